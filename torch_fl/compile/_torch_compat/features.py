"""The Inductor features that torch gates on the device name ``cuda``, opened to flagos graphs on a GPU vendor.

On CUDA and DCU (HIP-as-CUDA) a flagos kernel is the vendor's Triton kernel on the vendor's stream, so what Inductor
does for a ``cuda`` graph is right for a flagos one. Each feature is one small hook on the torch function that asks
for the name, with a check that the function is still there and still asks it. A torch line where a check fails
keeps that feature off for flagos (``enable_vendor_features`` warns, naming it) and every other feature on.
The CPU emulation enables none of them: its kernels are Inductor's C++ ones.

  reduction_fusion  scheduler._is_gpu_triton_backend: mixed-order reduction fusion (a norm's forward and the
                    weight-gradient reduction of its backward in one kernel) and the fusions that ask the same
  mm_padding        fx_passes.pad_mm.check_device: pad matmuls whose sizes are misaligned for the tensor cores
  config_heuristics choices.InductorChoices.get_config_heuristics: the vendor's tuned configs for conv and flex
                    attention templates (the matmul templates' table is shared by ``gpu.share_template_heuristics``,
                    and ``use_triton_template`` asks ``is_gpu``, which ``gpu.declare_gpu`` answers)
  tma               codegen.triton.TMACompatibilityChecker.can_use_tma: tensor descriptors in pointwise and
                    reduction kernels (config.triton.use_tensor_descriptor); the persistent TMA matmul template asks
                    the hardware only
  pdl               codegen.triton.TritonKernel._enable_pdl_codegen: programmatic dependent launch
                    (config.triton.enable_pdl)
  random_4x         codegen.triton.TritonOverrides._can_use_4x_random: four random numbers per Philox round
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


class Feature(NamedTuple):
    module: str  # where torch defines the gate
    owner: str | None  # the class that holds it, or None for a module-level function
    name: str
    asks: str  # the name the gate's code holds: its test of the device


FEATURES: dict[str, Feature] = {
    "reduction_fusion": Feature("torch._inductor.scheduler", None, "_is_gpu_triton_backend", "cuda"),
    "mm_padding": Feature("torch._inductor.fx_passes.pad_mm", None, "check_device", "is_cuda"),
    "config_heuristics": Feature("torch._inductor.choices", "InductorChoices", "get_config_heuristics", "cuda"),
    "tma": Feature("torch._inductor.codegen.triton", "TMACompatibilityChecker", "can_use_tma", "cuda"),
    "pdl": Feature("torch._inductor.codegen.triton", "TritonKernel", "_enable_pdl_codegen", "cuda"),
    "random_4x": Feature("torch._inductor.codegen.triton", "TritonOverrides", "_can_use_4x_random", "cuda"),
}


def _holder(feature: Feature) -> Any:
    import importlib

    module = importlib.import_module(feature.module)
    return module if feature.owner is None else getattr(module, feature.owner)


def _function(raw: Any) -> Any:
    return raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw


def _gate(feature: Feature) -> tuple[Any, Callable[..., Any]]:
    """The attribute as stored (a staticmethod stays one) and its function (torch's own under a flagos hook)."""
    raw = inspect.getattr_static(_holder(feature), feature.name)
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


def feature_problems() -> dict[str, str]:
    """Per feature, what this torch line lacks for its hook (absent: the hook applies)."""
    found = {}
    for key, feature in FEATURES.items():
        where = f"{feature.module}.{feature.owner + '.' if feature.owner else ''}{feature.name}"
        try:
            _, fn = _gate(feature)
        except (ImportError, AttributeError):
            found[key] = f"{where} is gone"
            continue
        if not inspect.isfunction(fn):
            found[key] = f"{where} is no longer a function"
        elif feature.asks not in _names_in(fn.__code__):
            found[key] = f"{where} no longer tests {feature.asks!r}"
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


def _config_heuristics(original: Callable[..., Any], vendor_type: str) -> Callable[..., Any]:
    def gate(self: Any, device_type: str | None = vendor_type) -> Any:
        return original(self, vendor_type if device_type == DEVICE else device_type)

    return gate


def _in_vendor_graph(original: Callable[..., Any], vendor_type: str) -> Callable[..., Any]:
    def gate(*args: Any, **kwargs: Any) -> Any:
        with graph_device_as(vendor_type):
            return original(*args, **kwargs)

    return gate


_HOOKS: dict[str, Callable[[Callable[..., Any], str], Callable[..., Any]]] = {
    "reduction_fusion": _reduction_fusion,
    "mm_padding": _mm_padding,
    "config_heuristics": _config_heuristics,
    "tma": _in_vendor_graph,
    "pdl": _in_vendor_graph,
    "random_4x": _in_vendor_graph,
}


def hooked(key: str, vendor_type: str) -> Callable[..., Any]:
    """The hook of a feature around torch's gate, not installed (tests call it directly)."""
    _, original = _gate(FEATURES[key])
    hook = functools.wraps(original)(_HOOKS[key](original, vendor_type))
    hook.__flagos__ = True  # type: ignore[attr-defined]
    return hook


def enable_vendor_features(vendor_type: str) -> list[str]:
    """Install every feature hook this torch line allows (on a GPU vendor only); warn for the others,
    naming them (each call). Returns the features enabled."""
    missing = feature_problems()
    enabled = []
    for key, feature in FEATURES.items():
        if key in missing:
            continue
        raw, _ = _gate(feature)
        if not getattr(_function(raw), "__flagos__", False):
            hook = hooked(key, vendor_type)
            stored = type(raw)(hook) if isinstance(raw, (staticmethod, classmethod)) else hook
            setattr(_holder(feature), feature.name, stored)
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
    for key, feature in FEATURES.items():
        with contextlib.suppress(ImportError, AttributeError):
            if getattr(_function(inspect.getattr_static(_holder(feature), feature.name)), "__flagos__", False):
                found.append(key)
    return found
