"""Every place where torch_fl's compile support leans on torch internals that change between torch lines.

Checked against torch 2.9 (DTK 26.04's line), 2.10, 2.11 (the H200 node), 2.13 (cpu CI) and 2.14 (the cpu
index's second line). Each function names what it relies on, so a new torch line is checked here and nowhere else.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import torch

DEVICE = "flagos"


def mark_fallback(node: torch.fx.Node) -> None:
    """Have Inductor call this node's op through ATen instead of lowering it: GraphLowering.call_function honours
    ``node.meta["should_fallback"]`` (torch >= 2.10; on 2.9 the op's lowering reads it, see ``_fallback_by_node``).
    An op with neither a lowering nor a fallback would get an implicit fallback there, which asserts that the op
    has no decomposition; the decomposition guard (routes.guard_decompositions) keeps it in the table, so the
    fallback is made here, saying so."""
    from torch._inductor import lowering

    node.meta["should_fallback"] = True
    op = node.target
    if op not in lowering.lowerings:
        tag = lowering.get_layout_constraint_tag(op, with_default=True)
        lowering.make_fallback(
            op, layout_constraint=lowering.tag_to_layout_constraint(tag), warn=False, override_decomp=True
        )
    elif not _call_function_honours_should_fallback():
        _fallback_by_node(op)


@functools.cache
def _call_function_honours_should_fallback() -> bool:
    """Whether GraphLowering.call_function reads ``node.meta["should_fallback"]`` itself (torch >= 2.10)."""
    import inspect

    from torch._inductor import graph

    try:
        source = inspect.getsource(graph.GraphLowering.call_function)
    except (OSError, TypeError):  # no sources shipped: assume the newer lines' behaviour
        return True
    return '"should_fallback" in n.meta' in source


def _fallback_by_node(op: Any) -> None:
    """torch 2.9: GraphLowering.call_function lowers every node of an op alike, so the op's lowering is wrapped
    to do what 2.10 does there: a node marked ``should_fallback`` calls the op through ATen (``fallback_handler``,
    not added to the fallback set), every other node keeps torch's lowering. The wrapper is called where 2.10
    checks the mark, after the layout constraints, with the node being lowered in ``V.graph.current_node``."""
    from torch._inductor import lowering
    from torch._inductor.virtualized import V

    original = lowering.lowerings[op]
    if getattr(original, "__flagos__", False):
        return

    @functools.wraps(original)
    def lower(*args: Any, **kwargs: Any) -> Any:
        node = V.graph.current_node
        if node is not None and node.target is op and "should_fallback" in node.meta:
            return lowering.fallback_handler(op, add_to_fallback_set=False)(*args, **kwargs)
        return original(*args, **kwargs)

    lower.__flagos__ = True  # type: ignore[attr-defined]
    lowering.lowerings[op] = lower


def inductor_decomposition_tables() -> list[dict[Any, Any]]:
    """The dicts ``torch._inductor.decomposition.select_decomp_table()`` may return: ``decompositions`` itself
    (with ``config.fallback_random``) or the cached ``fast_random_decomps()`` copy."""
    from torch._inductor import decomposition

    tables = [decomposition.decompositions]
    fast = getattr(decomposition, "fast_random_decomps", None)
    if fast is not None:
        tables.append(fast())
    return tables


# torch's hook for an out-of-tree device's fused attention (csrc/dispatch/attention_overrideable.cpp): the
# flagos choice answers ``overrideable`` wherever the vendor takes flash attention, so traced graphs hold these.
FUSED_ATTENTION_OPS = (
    "_scaled_dot_product_fused_attention_overrideable",
    "_scaled_dot_product_fused_attention_overrideable_backward",
)


def _fused_attention_overloads() -> list[Any]:
    return [getattr(torch.ops.aten, name).default for name in FUSED_ATTENTION_OPS]


# Python kernels this module registers with the dispatcher; a Library unregisters them when it is collected.
_LIBRARIES: list[Any] = []


def _fused_attention_backward_meta(
    grad_out: Any, query: Any, key: Any, value: Any, attn_bias: Any, grad_input_mask: Any, out: Any, logsumexp: Any,
    cum_seq_q: Any, cum_seq_k: Any, max_q: Any, max_k: Any, dropout_p: float, is_causal: bool, philox_seed: Any,
    philox_offset: Any, *, scale: float | None = None,
) -> tuple[Any, Any, Any, Any]:
    """The backward's shapes on fake tensors: each gradient is laid out like its input, as torch 2.13's own meta
    kernel says (tests/compile compares the two where both exist)."""
    bias = torch.empty_like(attn_bias) if attn_bias is not None else None
    return torch.empty_like(query), torch.empty_like(key), torch.empty_like(value), bias


def supply_fused_attention_backward_meta() -> None:
    """torch 2.11 (and older lines) has a Meta kernel for the fused attention hook's forward but none for its
    backward, so AOTAutograd cannot trace a compiled graph's backward through it. Where it is missing, flagos
    registers one with the same rule as torch's later kernel."""
    name = FUSED_ATTENTION_OPS[1]
    if hasattr(torch.ops.aten, name) and not _has_meta(name):
        lib = torch.library.Library("aten", "IMPL")
        lib.impl(name, _fused_attention_backward_meta, "Meta")
        _LIBRARIES.append(lib)


def _has_meta(name: str) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", "Meta")


def keep_fused_attention_extern() -> None:
    """Have Inductor call the fused attention hook through ATen, as an extern kernel, instead of decomposing it
    into matmuls and a softmax that keep the attention matrix. torch 2.9-2.14 declare both ops with
    ``lowering.make_fallback(op, sdpa_constraint)``; a line that lacks the declaration gets the same one here,
    and a decomposition of them, where a table has one, is dropped for the same reason."""
    from torch._inductor import lowering

    for op in _fused_attention_overloads():
        for table in inductor_decomposition_tables():
            table.pop(op, None)
        if op not in lowering.lowerings:
            lowering.make_fallback(op, lowering.sdpa_constraint, warn=False, override_decomp=True)


def _fused_attention_problems() -> list[str]:
    from torch._inductor import lowering

    found = []
    for name in FUSED_ATTENTION_OPS:
        if not hasattr(torch.ops.aten, name):
            found.append(f"aten::{name} (the fused attention hook)")
        elif name != FUSED_ATTENTION_OPS[1] and not _has_meta(name):  # the backward's: supplied where missing
            found.append(f"a Meta kernel of aten::{name} (fake tensors trace it)")
    if not found and not callable(getattr(lowering, "sdpa_constraint", None)) and any(
        op not in lowering.lowerings for op in _fused_attention_overloads()
    ):
        found.append("lowering.sdpa_constraint (the fused attention ops' fallback layout constraint)")
    return found


def declare_gpu() -> None:
    """Let Inductor treat flagos as a GPU (Triton kernels, GPU layouts and heuristics): it asks
    ``torch._inductor.utils.is_gpu``, which reads the module-level list ``GPU_TYPES`` (imported by name elsewhere,
    so the list is changed in place). flagos goes first: code that takes the first available entry (the addmm
    patterns of fx_passes.freezing_patterns) must pick the device ``gpu_type_is_flagos`` names."""
    from torch._inductor import utils

    if DEVICE not in utils.GPU_TYPES:
        utils.GPU_TYPES.insert(0, DEVICE)
    gpu_type_is_flagos()


# Modules that bind ``torch._inductor.utils.get_gpu_type`` by name (checked by ``problems``). Others found in
# sys.modules are rebound too; these are the ones torch 2.11-2.14 have.
GPU_TYPE_USERS = (
    "torch._inductor.fx_passes.joint_graph",
    "torch._inductor.fx_passes.post_grad",
    "torch._inductor.autotune_process",
    "torch._inductor.codegen.cpp_wrapper_gpu",
)


def gpu_type_is_flagos() -> None:
    """Inductor asks ``torch._inductor.utils.get_gpu_type()`` for the one GPU type of the process (the device it
    moves CPU constructors to in post_grad, the device of autotuning and of ``is_big_gpu``, the bmm_to_mm check).
    It collects the ``GPU_TYPES`` whose torch module says ``is_available()`` and asserts there is at most one;
    on a CUDA node both cuda and flagos are, so every compilation would fail there. PyTorch allows one accelerator
    per process, and in a process with flagos on a GPU vendor that is flagos (CUDA autograd cannot run in it), so
    the answer is flagos. The function is bound by name in several modules (``GPU_TYPE_USERS``): those already
    imported are rebound here, those imported later take it from utils. ``torch.testing._internal.inductor_utils``
    computes ``GPU_TYPE`` once at import; when imported earlier, its value is corrected. comm_analysis has a
    function of the same name (the NVIDIA GPU generation) that is a different object and is left alone."""
    from torch._inductor import utils

    original = utils.get_gpu_type
    if getattr(original, "__flagos__", False):
        return

    @functools.cache
    def get_gpu_type() -> str:
        return DEVICE

    _rebind("get_gpu_type", original, get_gpu_type)
    testing = sys.modules.get("torch.testing._internal.inductor_utils")
    if testing is not None and getattr(testing, "GPU_TYPE", DEVICE) != DEVICE:
        testing.GPU_TYPE = DEVICE  # type: ignore[attr-defined]


def _rebind(name: str, original: Any, replacement: Any) -> None:
    """Put ``replacement`` wherever a loaded module holds ``original`` under ``name`` (torch._inductor.utils and the
    modules that imported it by name); modules imported later take it from utils."""
    replacement.__flagos__ = True
    replacement.__wrapped__ = original
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if isinstance(namespace, dict) and namespace.get(name) is original:
            setattr(module, name, replacement)


# The function of torch._inductor.utils that times kernels with the profiler, under the names torch lines give it:
# 2.11 reads get_gpu_type in do_bench_using_profiling itself, later lines in the _do_bench_using_profiling it calls.
# 2.9 and 2.10 read none: they time on "cuda" by name, which is the vendor's device on CUDA and on DCU (HIP-as-CUDA),
# so there is nothing to redirect.
PROFILER_BENCH = ("do_bench_using_profiling", "_do_bench_using_profiling")


def _profiler_benches() -> list[Any]:
    import types

    from torch._inductor import utils

    found = []
    for name in PROFILER_BENCH:
        fn = getattr(utils, name, None)
        fn = getattr(fn, "__wrapped__", fn) if getattr(fn, "__flagos__", False) else fn
        if isinstance(fn, types.FunctionType) and "get_gpu_type" in fn.__code__.co_names:
            found.append(fn)
    return found


def profile_on_vendor(vendor_type: str) -> None:
    """``torch._inductor.utils.do_bench_using_profiling`` (opt-in: TORCHINDUCTOR_PROFILE_WITH_DO_BENCH_USING_PROFILING,
    feedback savers of select_algorithm) times kernels with torch's profiler, naming the profiler activity and the
    event device type after ``get_gpu_type()``, which is flagos here and has neither: the kernels Triton launches for
    flagos are the vendor's, so a copy of the function whose ``get_gpu_type`` answers the vendor type measures them
    (its scratch buffer is then vendor memory, which is flagos memory too). The copy replaces the original wherever
    it is bound by name (select_algorithm and autotune_process import it)."""
    import types

    for original in _profiler_benches():
        if getattr(getattr(sys.modules[original.__module__], original.__name__, None), "__flagos__", False):
            continue
        globals_ = dict(original.__globals__, get_gpu_type=lambda: vendor_type)
        copy = types.FunctionType(
            original.__code__, globals_, original.__name__, original.__defaults__, original.__closure__
        )
        copy.__kwdefaults__ = original.__kwdefaults__
        _rebind(original.__name__, original, functools.wraps(original)(copy))


def tune_triton_for_vendor(vendor_type: str) -> None:
    """Triton compiles for a target named by ``DeviceProperties.type`` (``GPUTarget(type, cc, warp)``) and its
    launcher asks the device interface of that type for streams. For flagos both are the vendor's (flagos device i
    is vendor device i; the current flagos stream is the vendor's current stream), so the properties Inductor
    records for a flagos kernel name the vendor's type. ``DeviceProperties.create`` (torch._inductor.runtime.hints)
    takes the type from ``device.type``; it is wrapped for flagos devices only."""
    from torch._inductor.runtime import hints

    original = hints.DeviceProperties.create
    if getattr(original, "__flagos__", False):
        return
    create = original.__func__  # a classmethod

    def create_for_flagos(cls: type, device: torch.device) -> Any:
        if device.type == DEVICE:
            return create(cls, torch.device(vendor_type, device.index))
        return create(cls, device)

    create_for_flagos.__flagos__ = True  # type: ignore[attr-defined]
    hints.DeviceProperties.create = classmethod(create_for_flagos)  # type: ignore[method-assign,assignment]


def share_template_heuristics(vendor_type: str) -> None:
    """Inductor takes the configs of its matmul templates from a table keyed by (template, device type, op)
    (``torch._inductor.template_heuristics.registry``, torch >= 2.9), and logs an error on every lookup for a
    device type the table lacks. flagos kernels are the vendor's (Triton on a GPU, C++ under the emulation), so
    flagos takes the vendor's entries, registered through the table's own decorator. A torch line without the
    table has nothing to share."""
    try:
        from torch._inductor import template_heuristics  # noqa: F401  (importing it registers torch's entries)
        from torch._inductor.template_heuristics import registry
    except ImportError:
        return
    table = getattr(registry, "_TEMPLATE_HEURISTIC_REGISTRY", None)
    if not isinstance(table, dict):
        return
    for key, heuristic in list(table.items()):
        if len(key) == 3 and key[1] == vendor_type and (key[0], DEVICE, key[2]) not in table:
            registry.register_template_heuristic(key[0], DEVICE, op_name=key[2])(heuristic)


def register_backend(scheduling: Any, wrapper: Any, custom_pass: Any) -> None:
    """``register_backend_for_device(device, scheduling, wrapper, cpp_wrapper, fx_wrapper, custom_pass)``
    (torch >= 2.6 names the last one ``device_custom_pass``)."""
    from torch._inductor.codegen.common import register_backend_for_device

    register_backend_for_device(DEVICE, scheduling, wrapper, device_custom_pass=custom_pass)


def register_op_overrides(overrides: Any) -> None:
    """``get_device_op_overrides`` registers torch's own devices (cpu, cuda, xpu, mps, mtia) lazily, in torch 2.11
    only while its table is empty (later lines keep a flag), and gives any device it lacks the CPU's. Asking for the
    CPU's first fills the table with torch's before flagos joins it, so a cuda graph in this process still gets
    cuda's device calls."""
    from torch._inductor.codegen.common import get_device_op_overrides, register_device_op_overrides

    get_device_op_overrides("cpu")
    register_device_op_overrides(DEVICE, overrides)


def register_interface(interface: type) -> None:
    """Dynamo's registry takes ``flagos`` and each ``flagos:<i>`` (as torch does for ``cuda:<i>``)."""
    from torch._dynamo.device_interface import register_interface_for_device

    register_interface_for_device(DEVICE, interface)
    for index in range(interface.device_count()):
        register_interface_for_device(f"{DEVICE}:{index}", interface)


def schedule_as_cpu() -> None:
    """Under the CPU emulation Inductor's C++ backend generates flagos kernels. Inductor infers the backend from the
    device type in a few places, taking any non-CPU device for a Triton one; for flagos they must answer as for the
    CPU:
    - ``BaseSchedulerNode.is_cpu`` (torch._inductor.scheduler): the scheduler's loop-reordering and fusion
      heuristics for other devices assume Triton's tiling;
    - ``get_current_backend`` (torch._inductor.utils, bound by name in codegen.common and scheduler): the dtype
      propagation and checks of the kernel code generator follow it."""
    import inspect

    from torch._inductor import config, scheduler, utils
    from torch._inductor.codegen import common
    from torch._inductor.scheduler import BaseSchedulerNode

    backend_of = utils.get_current_backend
    if not getattr(backend_of, "__flagos__", False):
        # torch 2.9's takes no device and reads the graph's current one; 2.10 and later take an optional device
        takes_device = bool(inspect.signature(backend_of).parameters)

        def get_current_backend(device_type: str | None = None) -> str:
            if device_type is None:
                from torch._inductor.virtualized import V

                device_type = V.graph.get_current_device_or_throw().type
            if device_type == DEVICE:
                return config.cpu_backend
            # without a device parameter no caller passes one: the graph's device, read above, is the one asked
            return backend_of(device_type) if takes_device else backend_of()

        get_current_backend.__flagos__ = True  # type: ignore[attr-defined]
        for module in (utils, common, scheduler):
            if getattr(module, "get_current_backend", None) is backend_of:
                module.get_current_backend = get_current_backend  # type: ignore[attr-defined]

    original = BaseSchedulerNode.is_cpu
    if getattr(original, "__flagos__", False):
        return

    def is_cpu(self: Any) -> bool:
        device = self.get_device()
        return device is not None and device.type in ("cpu", DEVICE)

    is_cpu.__flagos__ = True  # type: ignore[attr-defined]
    BaseSchedulerNode.is_cpu = is_cpu  # type: ignore[method-assign]


def problems(gpu: bool) -> list[str]:
    """What this torch line lacks of the internals above that a GPU vendor (``gpu``) or the CPU emulation needs,
    one line each (empty when all are there): registration refuses with this list rather than failing halfway,
    and the compile suite asserts it is empty for both."""
    import importlib
    import inspect

    from torch._dynamo import device_interface
    from torch._inductor import decomposition, graph, lowering, scheduler, utils
    from torch._inductor.codegen import common
    from torch._inductor.runtime import hints

    found: list[str] = []

    def need(ok: bool, what: str) -> None:
        if not ok:
            found.append(what)

    if gpu:
        need(isinstance(getattr(utils, "GPU_TYPES", None), list), "torch._inductor.utils.GPU_TYPES (a list)")
        need(
            isinstance(inspect.getattr_static(hints.DeviceProperties, "create", None), classmethod),
            "DeviceProperties.create (a classmethod)",
        )
        gpu_type = getattr(utils, "get_gpu_type", None)
        torch_own = gpu_type.__wrapped__ if getattr(gpu_type, "__flagos__", False) else gpu_type  # type: ignore[union-attr]
        need(
            callable(torch_own) and getattr(torch_own, "__module__", None) == utils.__name__,
            "torch._inductor.utils.get_gpu_type (defined there, so modules imported later bind torch_fl's)",
        )
        benches = _profiler_benches()
        need(
            len(benches) == 1 or (not benches and callable(getattr(utils, PROFILER_BENCH[0], None))),
            "one of torch._inductor.utils." + "/".join(PROFILER_BENCH) + " reading get_gpu_type (the profiler bench), "
            f"or {PROFILER_BENCH[0]} timing on cuda by name (torch <= 2.10)",
        )
        for name in GPU_TYPE_USERS:
            try:
                bound = getattr(importlib.import_module(name), "get_gpu_type", None)
            except ImportError:
                bound = None
            need(bound is gpu_type, f"{name} binds torch._inductor.utils.get_gpu_type by name")
    else:
        need(callable(getattr(utils, "get_current_backend", None)), "torch._inductor.utils.get_current_backend")
        need(
            getattr(common, "get_current_backend", None) is getattr(utils, "get_current_backend", 0),
            "torch._inductor.codegen.common binds get_current_backend by name",
        )
        need(callable(getattr(scheduler.BaseSchedulerNode, "is_cpu", None)), "BaseSchedulerNode.is_cpu")
    need(
        "device_custom_pass" in inspect.signature(common.register_backend_for_device).parameters,
        "register_backend_for_device(device_custom_pass=...)",
    )
    need(callable(getattr(common, "register_device_op_overrides", None)), "register_device_op_overrides")
    need(callable(getattr(device_interface, "register_interface_for_device", None)), "register_interface_for_device")
    need(
        "override_decomp" in inspect.signature(lowering.make_fallback).parameters,
        "lowering.make_fallback(override_decomp=...)",
    )
    need(
        callable(getattr(lowering, "tag_to_layout_constraint", None))
        and callable(getattr(lowering, "get_layout_constraint_tag", None)),
        "lowering's layout-constraint helpers",
    )
    need(isinstance(getattr(decomposition, "decompositions", None), dict), "Inductor's decomposition table")
    found.extend(_fused_attention_problems())
    if not _call_function_honours_should_fallback():  # torch 2.9: the per-node fallback is ours (_fallback_by_node)
        need(isinstance(getattr(lowering, "lowerings", None), dict), "torch._inductor.lowering.lowerings (a dict)")
        need(
            "add_to_fallback_set" in inspect.signature(lowering.fallback_handler).parameters,
            "lowering.fallback_handler(add_to_fallback_set=...)",
        )
        need(hasattr(graph.GraphLowering, "call_function"), "GraphLowering.call_function")
    return found
