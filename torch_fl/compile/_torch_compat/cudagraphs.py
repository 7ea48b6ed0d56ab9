"""mode="reduce-overhead" on flagos over a GPU vendor: where Inductor decides about CUDA graphs, a flagos graph is
judged as a graph of the vendor's device and run through flagos graphs (``torch_fl/compile/graph_runner.py``).

Inductor's CUDA graph trees cannot take flagos tensors (they assert ``is_cuda`` on recorded outputs and rebuild
outputs through a CUDA-only constructor), so a flagos graph never reaches them. Each hook replaces a torch function
at the module attribute its callers look up when they run, and leaves every other graph to torch:

  devices   cudagraph_utils.check_multiple_devices_or_any_cpu_nodes (called by check_lowering_disable_cudagraph):
            a lowered graph whose one device is flagos:i is judged as the same graph on the vendor's device i;
            every skip reason (cpu nodes, several devices) is torch's own, worded with the graph's real devices
  runner    compile_fx.cudagraphify (output_code's post-compile steps import it when they run): a graph whose
            first call has flagos inputs (or no tensor input at all) runs through ``GraphRunner``; any other
            graph gets torch's own function
  backward  output_code.maybe_handle_backward_generation: tells the trees' manager that an ungraphed backward of a
            graphed forward runs; a flagos forward has no manager, so flagos graphs skip it
  skips     output_code.CompiledFxGraph.__init__ / post_compile and cudagraph_post_compile: Inductor logs a skip
            reason only for graphs whose device types hold "cuda" and only counts the others; a flagos graph's
            reason is logged as a cuda graph's is (cudagraph_or_error raises as on cuda)
A torch line where a check of ``problems`` fails keeps the refusal (``torch_fl/compile/graphs.py``), naming it.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .base import DEVICE


def _names_in(code: Any) -> set[str]:
    found = set(code.co_names) | {c for c in code.co_consts if isinstance(c, str)}
    for const in code.co_consts:
        if inspect.iscode(const):
            found |= _names_in(const)
    return found


def _torch_own(fn: Any) -> Any:
    return fn.__wrapped__ if getattr(fn, "__flagos__", False) else fn


def _calls(module: Any, caller: str, callee: str) -> bool:
    fn = _torch_own(getattr(module, caller, None))
    return inspect.isfunction(fn) and callee in _names_in(fn.__code__)


def addresses_stayed(inputs: list[Any], pointers: list[int | None], indices: list[int]) -> bool:
    """Whether ``inputs[i].data_ptr() == pointers[i]`` for every i in indices: ``pointers`` is indexed like
    ``inputs`` (None where nothing is checked), as torch's own check reads it."""
    return all(inputs[i].data_ptr() == pointers[i] for i in indices)


def same_addresses() -> Callable[[list[Any], list[int | None], list[int]], bool]:
    """``addresses_stayed`` in one C++ call where torch has it (the trees' check of their static inputs, in CUDA
    builds of torch only)."""
    native = getattr(torch._C, "_tensors_data_ptrs_at_indices_equal", None)
    return native if callable(native) else addresses_stayed


def problems() -> list[str]:
    """What this torch line (and torch_fl._core) lacks for flagos graphs under reduce-overhead, one line each."""
    from torch._inductor import compile_fx, cudagraph_utils, output_code

    from ... import _core

    found: list[str] = []

    def need(ok: bool, what: str) -> None:
        if not ok:
            found.append(what)

    need(
        _calls(cudagraph_utils, "check_lowering_disable_cudagraph", "check_multiple_devices_or_any_cpu_nodes"),
        "cudagraph_utils.check_lowering_disable_cudagraph calling check_multiple_devices_or_any_cpu_nodes by name",
    )
    own = _torch_own(getattr(compile_fx, "cudagraphify", None))
    params = inspect.signature(own).parameters if inspect.isfunction(own) else {}
    need(
        {"static_input_idxs", "mutated_input_idxs", "placeholders", "stack_traces"} <= set(params),
        "compile_fx.cudagraphify(model, static_input_idxs, *, stack_traces, placeholders, mutated_input_idxs)",
    )
    need(
        _calls(output_code, "cudagraph_post_compile", "cudagraphify"),
        "output_code.cudagraph_post_compile importing compile_fx.cudagraphify when it runs",
    )
    need(
        _calls(output_code, "cudagraph_post_compile", "maybe_handle_backward_generation"),
        "output_code.cudagraph_post_compile calling maybe_handle_backward_generation by name",
    )
    need(
        callable(getattr(_core, "fresh_aliases", None)) and callable(getattr(_core, "make_unreadable", None)),
        "torch_fl._core.fresh_aliases and make_unreadable (a wheel older than this code)",
    )
    return found


def skip_log_problems() -> list[str]:
    """What the skip-reason hook needs (its absence leaves the reasons counted, not logged, as torch does)."""
    from torch._inductor import cudagraph_utils, output_code

    found = []
    graph = getattr(output_code, "CompiledFxGraph", None)
    for name in ("__init__", "post_compile"):
        fn = _torch_own(getattr(graph, name, None))
        if not (
            inspect.isfunction(fn) and {"cuda", "device_types", "disabled_cudagraphs_reason"} <= _names_in(fn.__code__)
        ):
            found.append(f"output_code.CompiledFxGraph.{name} testing 'cuda' in device_types for its skip log")
    if not _calls(output_code, "cudagraph_post_compile", "device_types"):
        found.append("output_code.cudagraph_post_compile testing device_types for its skip log")
    if not callable(getattr(cudagraph_utils, "log_cudagraph_skip_and_bump_counter", None)):
        found.append("cudagraph_utils.log_cudagraph_skip_and_bump_counter")
    return found


# ---- the hooks (made by these functions around torch's own; ``install`` puts them in place) -------------------


def _vendor_mapping(mapping: dict[Any, Any], vendor_type: str) -> dict[Any, Any] | None:
    """``mapping`` with flagos:i named vendor:i, or None when it has no flagos device or already a vendor one."""
    if not any(d.type == DEVICE for d in mapping) or any(d.type == vendor_type for d in mapping):
        return None
    return {torch.device(vendor_type, d.index) if d.type == DEVICE else d: n for d, n in mapping.items()}


def devices_hook(original: Callable[..., Any], vendor_type: str) -> Callable[..., Any]:
    def check_multiple_devices_or_any_cpu_nodes(device_node_mapping: dict[Any, Any]) -> str | None:
        as_vendor = _vendor_mapping(device_node_mapping, vendor_type)
        if as_vendor is not None and original(as_vendor) is None:
            return None
        return original(device_node_mapping)  # torch's reason, naming the graph's own devices

    return check_multiple_devices_or_any_cpu_nodes


def _takes_flagos(inputs: Sequence[Any], constants: Sequence[Any]) -> bool:
    tensors = [t for t in (*inputs, *constants) if isinstance(t, torch.Tensor)]
    return not tensors or any(t.device.type == DEVICE for t in tensors)


def runner_hook(original: Callable[..., Any], make_runner: Callable[..., Any]) -> Callable[..., Any]:
    def cudagraphify(model: Callable[..., Any], static_input_idxs: Sequence[int] = (), **kwargs: Any) -> Any:
        torch_own = original(model, static_input_idxs, **kwargs)
        chosen: list[Callable[..., Any]] = []

        def run(new_inputs: list[Any]) -> Any:
            if not chosen:  # an Inductor graph's inputs are on one device once the devices hook passed it
                flagos = _takes_flagos(new_inputs, kwargs.get("constants", ()))
                chosen.append(make_runner(model, static_input_idxs, **kwargs) if flagos else torch_own)
            return chosen[0](new_inputs)

        return run

    return cudagraphify


def _flagos_only(compiled_graph: Any) -> bool:
    types = getattr(compiled_graph, "device_types", ())
    return DEVICE in types and "cuda" not in types


def backward_hook(original: Callable[..., Any]) -> Callable[..., Any]:
    def maybe_handle_backward_generation(compiled_graph: Any, boxed_forward_device_index: Any) -> None:
        if not _flagos_only(compiled_graph):
            original(compiled_graph, boxed_forward_device_index)

    return maybe_handle_backward_generation


def rerecord_limit() -> int:
    """How often one function records again for moved static inputs before it runs uncaptured (torch's setting)."""
    from torch._inductor import config

    return int(getattr(config.triton, "cudagraph_unexpected_rerecord_limit", 128))


def warn_many_keys(keys: dict[Any, Any], new_key: Any) -> bool:
    """torch's warning about recording one graph per distinct key, logged past its
    ``cudagraph_dynamic_shape_warn_limit`` as the trees log it; whether it was logged (a torch line without the
    function logs nothing)."""
    from torch._inductor import cudagraph_utils

    warn = getattr(cudagraph_utils, "maybe_warning_due_to_dynamic_shape", None)
    return bool(warn(keys, new_key)) if callable(warn) else False


def announce(reason: str) -> None:
    """Say a skip reason the way Inductor says a cuda graph's (its log; an error under cudagraph_or_error)."""
    from torch._inductor import config, cudagraph_utils

    log = getattr(cudagraph_utils, "cudagraphs_log", None) or logging.getLogger(cudagraph_utils.__name__)
    log.warning(reason)
    if getattr(config.triton, "cudagraph_or_error", False):
        raise RuntimeError(reason)


def skip(reason: str) -> None:
    """A skip decided at run time (the graph runner's): counted and logged as Inductor does it for cuda."""
    from torch._inductor.cudagraph_utils import log_cudagraph_skip_and_bump_counter

    log_cudagraph_skip_and_bump_counter(reason)


def mutation_reason(placeholders: Sequence[Any], indices: Sequence[int]) -> str:
    """Inductor's wording of the "mutated inputs" skip, with the stack trace of the mutation where it has one."""
    from torch._inductor import cudagraph_utils

    worded = getattr(cudagraph_utils, "get_mutation_stack_trace", None)
    if callable(worded) and len(placeholders) > max(indices, default=-1):
        return worded(placeholders, indices)
    return f"skipping cudagraphs due to mutated inputs ({len(indices)} instances)"


def _counted_skips() -> int:
    from torch._dynamo.utils import counters

    return counters["inductor"]["cudagraph_skips"]


def counted_skip_hook(original: Callable[..., Any]) -> Callable[..., Any]:
    """CompiledFxGraph.__init__ / post_compile: a skip torch counted for a flagos graph is logged too."""

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        before = _counted_skips()
        result = original(self, *args, **kwargs)
        reason = getattr(self, "disabled_cudagraphs_reason", None)
        if _flagos_only(self) and reason and _counted_skips() > before:
            announce(f"skipping cudagraphs due to {reason}")
        return result

    return method


def post_compile_hook(original: Callable[..., Any]) -> Callable[..., Any]:
    """cudagraph_post_compile: the fail reasons it finds for a flagos graph are counted and logged, as for cuda."""

    def cudagraph_post_compile(example_inputs: Any, compiled_graph: Any, cudagraphs: Any, *args: Any) -> None:
        before = _counted_skips()
        original(example_inputs, compiled_graph, cudagraphs, *args)
        info = getattr(compiled_graph, "cudagraph_info", None)
        reasons = getattr(info, "cudagraph_fail_reasons", None)
        if _flagos_only(compiled_graph) and reasons and not cudagraphs and _counted_skips() == before:
            skip(compiled_graph.disabled_cudagraphs_reason or f"skipping cudagraphs due to {reasons}")

    return cudagraph_post_compile


def _put(holder: Any, name: str, make: Callable[[Any], Callable[..., Any]]) -> None:
    original = inspect.getattr_static(holder, name)
    if getattr(original, "__flagos__", False):
        return
    hook = functools.wraps(original)(make(original))
    hook.__flagos__ = True  # type: ignore[attr-defined]
    hook.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(holder, name, hook)


def install(vendor_type: str, make_runner: Callable[..., Any]) -> list[str]:
    """Put the hooks in place (idempotent) where ``problems`` is empty; returns the problems otherwise, installing
    nothing. The skip log is installed where its own checks pass."""
    found = problems()
    if found:
        return found
    from torch._inductor import compile_fx, cudagraph_utils, output_code

    _put(cudagraph_utils, "check_multiple_devices_or_any_cpu_nodes", lambda o: devices_hook(o, vendor_type))
    _put(compile_fx, "cudagraphify", lambda o: runner_hook(o, make_runner))
    _put(output_code, "maybe_handle_backward_generation", backward_hook)
    if not skip_log_problems():
        _put(output_code.CompiledFxGraph, "__init__", counted_skip_hook)
        _put(output_code.CompiledFxGraph, "post_compile", counted_skip_hook)
        _put(output_code, "cudagraph_post_compile", post_compile_hook)
    return []


def installed() -> bool:
    from torch._inductor import compile_fx, cudagraph_utils

    return all(
        getattr(getattr(m, n, None), "__flagos__", False)
        for m, n in ((compile_fx, "cudagraphify"), (cudagraph_utils, "check_multiple_devices_or_any_cpu_nodes"))
    )
