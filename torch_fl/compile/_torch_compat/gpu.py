"""flagos as Inductor's GPU on a GPU vendor: the GPU type, Triton's target, profiling and template tables."""

from __future__ import annotations

import functools
import sys
from typing import Any

import torch

from .base import DEVICE, rebind


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
# sys.modules are rebound too; these are the ones torch 2.11-2.15 have.
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

    rebind("get_gpu_type", original, get_gpu_type)
    testing = sys.modules.get("torch.testing._internal.inductor_utils")
    if testing is not None and getattr(testing, "GPU_TYPE", DEVICE) != DEVICE:
        testing.GPU_TYPE = DEVICE  # type: ignore[attr-defined]


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
        rebind(original.__name__, original, functools.wraps(original)(copy))


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
