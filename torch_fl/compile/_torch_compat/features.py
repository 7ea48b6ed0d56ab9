"""The Inductor features that torch gates on the device name ``cuda``, opened to flagos graphs on a GPU vendor.

On CUDA and DCU (HIP-as-CUDA) a flagos kernel is the vendor's Triton kernel on the vendor's stream, so what Inductor
does for a ``cuda`` graph is right for a flagos one. Each feature is one small hook on the torch function that asks
for the name, with a check that the function is still there and still asks it. A torch line where a check fails
keeps that feature off for flagos (``enable_vendor_features`` warns, naming it) and every other feature on.
The CPU emulation enables none of them: its kernels are Inductor's C++ ones.

  reduction_fusion  scheduler._is_gpu_triton_backend: mixed-order reduction fusion (the row and the column sums of
                    a norm's backward in one kernel) and the fusions that ask the same; lines without that helper
                    test the name inside MixOrderReduction.can_fuse, where the hook adds flagos to the tuple of
                    device names it tests
  mm_padding        fx_passes.pad_mm.check_device: pad matmuls whose sizes are misaligned for the tensor cores
  mm_padding_bias   fx_passes.pad_mm._should_pad: its timing of a padded addmm makes the bias only for a cuda or
                    xpu input and passes None otherwise, which fails the compilation of every flagos graph with an
                    addmm of a misaligned size (a classifier of 100 classes, BERT's 30522-token vocabulary); the
                    hook times a flagos addmm's padding on its matmul, the part that padding speeds up
  online_softmax    fx_passes.post_grad.prepare_softmax_extra_check: a softmax's max and sum in one pass (the loss
                    over a vocabulary); read when Inductor first registers its post-grad patterns, after this hook
  config_heuristics choices.InductorChoices.get_config_heuristics: the vendor's tuned configs for conv and flex
                    attention templates (the matmul templates' table is shared by ``gpu.share_template_heuristics``,
                    and ``use_triton_template`` asks ``is_gpu``, which ``gpu.declare_gpu`` answers)
  tma               codegen.triton.TMACompatibilityChecker.can_use_tma: tensor descriptors in pointwise and
                    reduction kernels (config.triton.use_tensor_descriptor); the persistent TMA matmul template asks
                    the hardware only
  pdl               codegen.triton.TritonKernel._enable_pdl_codegen: programmatic dependent launch
                    (config.triton.enable_pdl)
  random_4x         codegen.triton.TritonOverrides._can_use_4x_random: four random numbers per Philox round (a
                    feature of torch 2.13 and later: older lines have neither it nor its gate)
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import warnings
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import torch

from .base import DEVICE


class Gate(NamedTuple):
    module: str  # where torch defines the gate
    owner: str | None  # the class that holds it, or None for a module-level function
    name: str
    asks: str  # the name the gate's code holds: its test of the device
    hook: str  # the hook's maker in this module (the functions below FEATURES)


_CODEGEN = "torch._inductor.codegen.triton"
# per feature, the gates torch lines have, the newest first: the first one this line has is hooked
FEATURES: dict[str, tuple[Gate, ...]] = {
    "reduction_fusion": (
        Gate("torch._inductor.scheduler", None, "_is_gpu_triton_backend", "cuda", "_reduction_fusion"),
        Gate("torch._inductor.scheduler", "MixOrderReduction", "can_fuse", "cuda", "_widened"),
    ),
    "mm_padding": (Gate("torch._inductor.fx_passes.pad_mm", None, "check_device", "is_cuda", "_mm_padding"),),
    "mm_padding_bias": (Gate("torch._inductor.fx_passes.pad_mm", None, "_should_pad", "is_cuda", "_mm_padding_bias"),),
    "online_softmax": (
        Gate("torch._inductor.fx_passes.post_grad", None, "prepare_softmax_extra_check", "cuda", "_online_softmax"),
    ),
    "config_heuristics": (
        Gate("torch._inductor.choices", "InductorChoices", "get_config_heuristics", "cuda", "_config_heuristics"),
    ),
    "tma": (Gate(_CODEGEN, "TMACompatibilityChecker", "can_use_tma", "cuda", "_in_vendor_graph"),),
    "pdl": (Gate(_CODEGEN, "TritonKernel", "_enable_pdl_codegen", "cuda", "_in_vendor_graph"),),
    "random_4x": (Gate(_CODEGEN, "TritonOverrides", "_can_use_4x_random", "cuda", "_in_vendor_graph"),),
}


# the torch line where a feature first exists: an older line lacks its gate because it lacks the feature, which is
# no problem to report (features absent here exist on every line this package supports)
INTRODUCED: dict[str, tuple[int, int]] = {"random_4x": (2, 13)}


def _torch_line() -> tuple[int, int]:
    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def available() -> list[str]:
    """The features that this torch line has (hooked or not)."""
    line = _torch_line()
    return [key for key in FEATURES if INTRODUCED.get(key, (0, 0)) <= line]


def _holder(gate: Gate) -> Any:
    import importlib

    module = importlib.import_module(gate.module)
    return module if gate.owner is None else getattr(module, gate.owner)


def _function(raw: Any) -> Any:
    return raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw


def _stored(gate: Gate) -> tuple[Any, Callable[..., Any]]:
    """The attribute as stored (a staticmethod stays one) and its function (torch's own under a flagos hook)."""
    raw = inspect.getattr_static(_holder(gate), gate.name)
    fn = _function(raw)
    return raw, getattr(fn, "__wrapped__", fn) if getattr(fn, "__flagos__", False) else fn


def _names_in(code: Any) -> set[str]:
    found = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, str):
            found.add(const)
        elif isinstance(const, tuple):
            found.update(c for c in const if isinstance(c, str))
        elif inspect.iscode(const):
            found |= _names_in(const)
    return found


def _problem(gate: Gate) -> str | None:
    where = f"{gate.module}.{gate.owner + '.' if gate.owner else ''}{gate.name}"
    try:
        _, fn = _stored(gate)
    except (ImportError, AttributeError):
        return f"{where} is gone"
    if not inspect.isfunction(fn):
        return f"{where} is no longer a function"
    if gate.asks not in _names_in(fn.__code__):
        return f"{where} no longer tests {gate.asks!r}"
    if gate.hook == "_widened" and not _name_tuples(fn.__code__, gate.asks):
        return f"{where} no longer tests {gate.asks!r} against a tuple of device names"
    if gate.hook == "_in_vendor_graph" and "get_current_device_or_throw" not in _names_in(fn.__code__):
        return f"{where} no longer reads the graph's current device"
    if gate.hook == "_online_softmax" and "online_softmax" not in _names_in(fn.__code__):
        return f"{where} no longer reads config.online_softmax"
    return None


def _name_tuples(code: Any, name: str) -> list[Any]:
    """The tuples (or frozensets) of names among the code's constants that hold ``name``: what _widened widens."""
    found = [c for c in code.co_consts if isinstance(c, (tuple, frozenset)) and name in c]
    return found + [t for c in code.co_consts if inspect.iscode(c) for t in _name_tuples(c, name)]


def gate_of(key: str) -> Gate | None:
    """The gate of a feature that this torch line has, or None."""
    return next((gate for gate in FEATURES[key] if _problem(gate) is None), None)


def original(key: str) -> Callable[..., Any]:
    """torch's own function behind a feature's gate."""
    gate = gate_of(key)
    if gate is None:
        raise LookupError(f"torch {torch.__version__} has no gate of {key}: {feature_problems()[key]}")
    return _stored(gate)[1]


def feature_problems() -> dict[str, str]:
    """Per feature this torch line has, what it lacks for its hook (absent: the hook applies)."""
    found = {}
    for key in available():
        gates = FEATURES[key]
        if gate_of(key) is None:
            found[key] = "; ".join(str(_problem(gate)) for gate in gates)
    return found


def _on_flagos(*devices: Any) -> bool:
    return bool(devices) and all(d is not None and torch.device(d).type == DEVICE for d in devices)


@contextlib.contextmanager
def graph_device_as(vendor_type: str) -> Iterator[None]:
    """Inside, the graph being lowered names the vendor's device where it names a flagos one (device i is the
    vendor's device i): for the codegen predicates that read ``V.graph.get_current_device_or_throw().type``."""
    from torch._inductor.virtualized import V

    graph = V.graph
    device = getattr(graph, "current_device", None)
    if not _on_flagos(device):
        yield
        return
    graph.current_device = torch.device(vendor_type, device.index)
    try:
        yield
    finally:
        graph.current_device = device


def _reduction_fusion(original: Callable[..., Any], vendor_type: str) -> Callable[..., Any]:
    from torch._inductor import utils

    def gate(node1: Any, node2: Any) -> bool:
        if _on_flagos(node1.get_device(), node2.get_device()):
            return node1.is_gpu() and node2.is_gpu() and utils.get_current_backend(vendor_type) == "triton"
        return original(node1, node2)

    return gate


def _mm_padding(original: Callable[..., Any], vendor_type: str) -> Callable[..., Any]:
    def gate(a: Any, b: Any, *args: Any) -> bool:
        return _on_flagos(a.device, b.device) or original(a, b, *args)

    return gate


def _mm_padding_bias(original: Callable[..., Any], vendor_type: str) -> Callable[..., Any]:
    def gate(match: Any, mat1: Any, mat2: Any, op: Any, input: Any = None) -> bool:
        if op is torch.ops.aten.addmm and input is not None and _on_flagos(input.device):
            return original(match, mat1, mat2, torch.ops.aten.mm)
        return original(match, mat1, mat2, op, input)

    return gate


def _online_softmax(original: Callable[..., Any], vendor_type: str) -> Callable[..., Any]:
    from torch._inductor import config

    def gate(match: Any) -> bool:
        if _on_flagos(match.kwargs["x"].meta["val"].device):  # torch's test, asked for the vendor's backend
            return bool(config.online_softmax) and getattr(config, f"{vendor_type}_backend") == "triton"
        return original(match)

    return gate


def _config_heuristics(original: Callable[..., Any], vendor_type: str) -> Callable[..., Any]:
    def gate(self: Any, device_type: str | None = vendor_type) -> Any:
        return original(self, vendor_type if device_type == DEVICE else device_type)

    return gate


def _in_vendor_graph(original: Callable[..., Any], vendor_type: str) -> Callable[..., Any]:
    def gate(*args: Any, **kwargs: Any) -> Any:
        with graph_device_as(vendor_type):
            return original(*args, **kwargs)

    return gate


def _widened(original: Callable[..., Any], vendor_type: str) -> Callable[..., Any]:
    """A copy of ``original`` whose tuples of device names that hold the vendor's also hold flagos: for a gate
    that tests ``device_type in ("cuda", "xpu")`` inside a larger function."""
    import types

    def widen(code: types.CodeType) -> types.CodeType:
        consts = []
        for const in code.co_consts:
            if isinstance(const, (tuple, frozenset)) and vendor_type in const and DEVICE not in const:
                const = type(const)((*const, DEVICE))
            elif inspect.iscode(const):
                const = widen(const)
            consts.append(const)
        return code.replace(co_consts=tuple(consts))

    copy = types.FunctionType(
        widen(original.__code__), original.__globals__, original.__name__, original.__defaults__, original.__closure__
    )
    copy.__kwdefaults__ = original.__kwdefaults__
    return copy


def hooked(key: str, vendor_type: str) -> Callable[..., Any]:
    """The hook of a feature around torch's gate, not installed (tests call it directly)."""
    gate = gate_of(key)
    torch_own = original(key)
    hook = functools.wraps(torch_own)(globals()[gate.hook](torch_own, vendor_type))  # type: ignore[union-attr]
    hook.__flagos__ = True  # type: ignore[attr-defined]
    return hook


def enable_vendor_features(vendor_type: str) -> list[str]:
    """Install every feature hook this torch line allows (on a GPU vendor only); warn for the others,
    naming them (each call). Returns the features enabled."""
    missing = feature_problems()
    enabled = []
    for key in available():
        gate = gate_of(key)
        if gate is None:
            continue
        raw, _ = _stored(gate)
        if not getattr(_function(raw), "__flagos__", False):
            hook = hooked(key, vendor_type)
            setattr(_holder(gate), gate.name, type(raw)(hook) if isinstance(raw, (staticmethod, classmethod)) else hook)
        enabled.append(key)
    if missing:
        warnings.warn(
            f"torch_fl: torch {torch.__version__} compiles flagos graphs without "
            + "; ".join(f"{key} ({why})" for key, why in missing.items())
            + ": torch_fl/compile/_torch_compat/features.py knows the gates of earlier lines",
            RuntimeWarning,
            stacklevel=2,
        )
    return enabled


def enabled_features() -> list[str]:
    """The features whose hook is installed in this process."""
    found = []
    for key, gates in FEATURES.items():
        for gate in gates:
            with contextlib.suppress(ImportError, AttributeError):
                if getattr(_function(inspect.getattr_static(_holder(gate), gate.name)), "__flagos__", False):
                    found.append(key)
                    break
    return found
