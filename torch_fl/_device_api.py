"""The rest of ``torch.cuda``'s device API on flagos: random state of every device, ``device_of``, streams made
outside torch, ``init``, ``ipc_collect``, the synchronisation debug mode and ``OutOfMemoryError``."""

from __future__ import annotations

import os
from collections.abc import Iterable

import torch

from . import _device
from ._vendor import Device, index_of, on_gpu

__all__ = [
    "ExternalStream",
    "OutOfMemoryError",
    "device_of",
    "get_rng_state_all",
    "get_stream_from_external",
    "get_sync_debug_mode",
    "init",
    "ipc_collect",
    "seed_all",
    "set_rng_state_all",
    "set_sync_debug_mode",
]

# torch's own class: flagos allocators raise c10::OutOfMemoryError, which torch turns into this one.
OutOfMemoryError = torch.OutOfMemoryError


def get_rng_state_all() -> list[torch.Tensor]:
    return [_device.get_rng_state(i) for i in range(_device.device_count())]


def set_rng_state_all(new_states: Iterable[torch.Tensor]) -> None:
    states = list(new_states)
    if len(states) != _device.device_count():
        raise ValueError(
            f"set_rng_state_all: got {len(states)} states for {_device.device_count()} flagos devices; pass one per "
            "device, as get_rng_state_all() returns them"
        )
    for index, state in enumerate(states):
        _device.set_rng_state(state, index)


def seed_all() -> None:
    """Seed every flagos device's generator with one fresh random seed."""
    _device.manual_seed_all(int.from_bytes(os.urandom(8), "little") & (2**63 - 1))


class device_of(_device.device):
    """Make the device of tensor ``obj`` current inside the block; a tensor on another device changes nothing."""

    def __init__(self, obj: torch.Tensor) -> None:
        on_flagos = isinstance(obj, torch.Tensor) and obj.device.type == "flagos"
        super().__init__(obj.device.index if on_flagos else None)


def init() -> None:
    """Initialise the flagos device. ``import torch_fl`` already has, so this only checks that it succeeded."""
    if not _device.is_initialized():
        raise RuntimeError("the flagos runtime is not initialised: `import torch_fl` failed or was not run")


def ipc_collect() -> None:
    """Free memory that other processes have released after receiving it: CUDA's IPC bookkeeping on GPUs; under
    emulation shared memory goes back to the host when its last user drops it, so there is nothing to collect."""
    if on_gpu():
        torch.cuda.ipc_collect()


def _external(stream_ptr: int, device: Device) -> torch.Stream:
    if not on_gpu():
        raise RuntimeError(
            "the flagos emulation has no streams made outside torch (its streams are serial queues on the host); "
            "use torch.flagos.Stream() there, and external streams on a GPU vendor"
        )
    vendor = torch.cuda.ExternalStream(stream_ptr, device=torch.device("cuda", index_of(device)))
    # The same stream relabelled as flagos: the runtime hands flagos streams to CUDA by their id (runtime/cuda.cpp).
    flagos_type = _device.current_stream(vendor.device_index).device_type
    return torch.Stream(stream_id=vendor.stream_id, device_index=vendor.device_index, device_type=flagos_type)


def get_stream_from_external(data_ptr: int, device: Device = None) -> torch.Stream:
    """A flagos stream over a vendor stream made outside torch (a ``cudaStream_t`` given as an int). The caller
    keeps it alive while torch uses it."""
    return _external(data_ptr, device)


class ExternalStream(_device.Stream):
    """``torch.cuda.ExternalStream`` for flagos: a ``torch.Stream`` on flagos over a vendor stream made outside
    torch."""

    def __new__(cls, stream_ptr: int, device: Device = None, **kwargs: object) -> torch.Stream:  # type: ignore[misc]
        return _external(stream_ptr, device)


_SYNC_MODES = {"default": 0, "warn": 1, "error": 2}
_sync_mode = 0


def set_sync_debug_mode(debug_mode: int | str) -> None:
    """Warn (1, "warn") or fail (2, "error") on operations that synchronise with the device; 0 ("default") is off.
    On GPUs this is CUDA's mode, which sees flagos kernels; the emulation never waits for a device, so there it is
    only remembered."""
    global _sync_mode
    mode = _SYNC_MODES.get(debug_mode, debug_mode) if isinstance(debug_mode, str) else debug_mode
    if mode not in (0, 1, 2):
        raise ValueError(f"set_sync_debug_mode: expected 0, 1, 2, 'default', 'warn' or 'error', got {debug_mode!r}")
    if on_gpu():
        torch.cuda.set_sync_debug_mode(mode)
    _sync_mode = mode


def get_sync_debug_mode() -> int:
    return torch.cuda.get_sync_debug_mode() if on_gpu() else _sync_mode
