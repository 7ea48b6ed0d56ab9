"""Triton's launches as the recorder sees them (torch_fl/replay/_record.py).

Triton compiles one C launcher per kernel signature (``driver.active.launcher_cls``, CudaLauncher on NVIDIA,
HIPLauncher on AMD/DCU) and calls it with the grid, the stream, the CUfunction, the packed metadata (num_warps,
num_ctas, shared memory) and the kernel's arguments. The hook wraps that class: its constructor keeps the kernel's
signature, and each call, while a provider call records, reports the launch with its parameters packed as the
launcher packs them. Outside a recording the hook costs one thread-local read per launch.

Read from Triton 3.6 (torch 2.11's), CudaLauncher and HIPLauncher alike: parameters are the non-constexpr
arguments in order, then Triton's global and profile scratch pointers; floats are passed in their own width (the
driver module's FLOAT_STORAGE_TYPE). Other Triton lines, and anything this layout does not cover, refuse the key
instead of guessing (_KNOWN_TRITON).
"""

from __future__ import annotations

import functools
import sys

from . import _record

_INSTALLED: list[type] = []
_TRITON_LINE: tuple[int, ...] = ()


# The Triton lines whose launcher layout (above) was read from their source, CUDA and HIP alike. Any other line's
# launches are refused, never guessed: its launcher may pass another number of trailing parameters.
_KNOWN_TRITON = ((3, 6),)
_TRAILING_SCRATCH_PARAMS = 2


def install() -> None:
    """Wrap the active Triton driver's launcher class (once per process)."""
    try:
        import triton
        from triton.runtime import driver
    except ImportError:
        return
    global _TRITON_LINE
    _TRITON_LINE = tuple(int(p) for p in triton.__version__.split(".")[:2] if p.isdigit())
    cls = driver.active.launcher_cls
    if cls in _INSTALLED or getattr(cls, "_torch_fl_wrapped", False):
        return
    warp_size = driver.active.get_current_target().warp_size
    original_init, original_call = cls.__init__, cls.__call__

    @functools.wraps(original_init)
    def __init__(self, src, metadata, *args, **kwargs):
        original_init(self, src, metadata, *args, **kwargs)
        self._torch_fl_signature = list(src.signature.values())
        self._torch_fl_tensordesc = getattr(metadata, "tensordesc_meta", None)

    @functools.wraps(original_call)
    def __call__(self, gridX, gridY, gridZ, stream, function, *args):
        rec = _record.active()
        if rec is not None:
            _report(rec, self, warp_size, (gridX, gridY, gridZ), stream, function, args)
        return original_call(self, gridX, gridY, gridZ, stream, function, *args)

    cls.__init__, cls.__call__ = __init__, __call__
    cls._torch_fl_wrapped = True
    _INSTALLED.append(cls)


def _report(rec, launcher, warp_size: int, grid, stream, function, args) -> None:
    try:
        rec.launch(function, *_describe(launcher, warp_size, grid, stream, args))
    except _record.Refused as exc:
        rec.refuse(str(exc))


def _hook_set(hook) -> bool:
    # Triton >= 3.5 always passes its HookChain, empty unless something (a profiler) added a hook.
    return hook is not None and bool(getattr(hook, "calls", True))


def _float_storage(launcher) -> dict:
    return getattr(sys.modules.get(type(launcher).__module__), "FLOAT_STORAGE_TYPE", None) or {}


def _describe(launcher, warp_size: int, grid, stream, args):
    import torch

    if _TRITON_LINE not in _KNOWN_TRITON:
        known = ", ".join(".".join(map(str, v)) for v in _KNOWN_TRITON)
        raise _record.Refused(
            f"Triton {'.'.join(map(str, _TRITON_LINE))}, whose launcher layout the replay does not "
            f"know (it knows {known})"
        )
    signature = getattr(launcher, "_torch_fl_signature", None)
    if signature is None:
        raise _record.Refused("a Triton launcher made before torch_fl's launch hook")
    if getattr(launcher, "_torch_fl_tensordesc", None):
        raise _record.Refused("a kernel with tensor descriptors (TMA)")
    for attr in ("global_scratch_size", "profile_scratch_size"):
        if getattr(launcher, attr, 0):
            raise _record.Refused(f"a kernel that needs Triton's {attr.replace('_size', '')} memory")
    if getattr(launcher, "launch_cooperative_grid", False) or getattr(launcher, "launch_pdl", False):
        raise _record.Refused("a cooperative or PDL launch")
    if len(args) < 4 or not isinstance(args[0], tuple) or len(args[0]) < 3:
        raise _record.Refused("a Triton launcher call of an unknown layout")
    num_warps, num_ctas, shared = args[0][:3]
    if num_ctas != 1:
        raise _record.Refused("a launch of thread-block clusters (num_ctas > 1)")
    if _hook_set(args[2]) or _hook_set(args[3]):
        raise _record.Refused("a launch hook is installed (knobs.runtime.launch_enter_hook, a profiler)")
    if stream != torch.cuda.current_stream().cuda_stream:
        raise _record.Refused("a launch on a stream other than the current one")
    kernel_args = args[4:]
    if len(kernel_args) != len(signature):
        raise _record.Refused("a launch whose arguments do not match its signature")
    storage = _float_storage(launcher)
    params = []
    for ty, value in zip(signature, kernel_args, strict=True):
        if ty == "constexpr":
            continue
        if not isinstance(ty, str) or ty.startswith("tensordesc") or ty == "nvTmaDesc":
            raise _record.Refused(f"a kernel parameter of type {ty!r}")
        if ty.startswith("*"):
            address = 0 if value is None else value if isinstance(value, int) else value.data_ptr()
            params.append(("ptr", address))
        elif ty in ("fp16", "bf16", "fp32", "f32", "fp64") and not storage:
            raise _record.Refused("a float parameter of a Triton that does not say how it passes floats")
        else:
            params.append(("bytes", _record.pack_scalar("fp32" if ty == "f32" else ty, value)))
    # Triton's launcher appends its global and profile scratch pointers (both null here: no scratch memory).
    params.extend([("bytes", 0)] * _TRAILING_SCRATCH_PARAMS)
    block = (warp_size * num_warps, 1, 1)
    return (grid[0], grid[1], grid[2]), block, shared, params
