"""``torch.flagos``: the device module of the flagos device (also ``torch_fl.flagos``)."""

from __future__ import annotations

import torch

from . import _C

__all__ = [
    "current_device",
    "device",
    "device_count",
    "get_rng_state",
    "initial_seed",
    "is_available",
    "is_initialized",
    "manual_seed",
    "manual_seed_all",
    "max_memory_allocated",
    "memory_allocated",
    "memory_reserved",
    "reset_peak_memory_stats",
    "seed",
    "set_device",
    "set_rng_state",
    "synchronize",
]

_Device = torch.device | str | int | None


def _index(device: _Device) -> int:
    """Device index of ``device`` (None = the current flagos device)."""
    if device is None:
        return _C.current_device()
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != "flagos":
        raise ValueError(f"expected a flagos device, got {device}")
    return _C.current_device() if device.index is None else device.index


class device:
    """Context manager that makes ``device`` current (like ``torch.cuda.device``);
    torch's serialization uses it to restore tensors onto flagos."""

    def __init__(self, device: _Device) -> None:
        self.index = _index(device) if device is not None else -1
        self.previous = -1

    def __enter__(self) -> None:
        if self.index >= 0:
            self.previous = _C.current_device()
            _C.set_device(self.index)

    def __exit__(self, *exc: object) -> None:
        if self.index >= 0:
            _C.set_device(self.previous)


def is_available() -> bool:
    return _C.device_count() > 0


def is_initialized() -> bool:
    return _C.accelerator() is not None


def device_count() -> int:
    return _C.device_count()


def current_device() -> int:
    return _C.current_device()


def set_device(device: _Device) -> None:
    _C.set_device(_index(device))


def synchronize(device: _Device = None) -> None:
    """Wait for all work queued on ``device`` (the vendor's stream semantics)."""
    _C.synchronize(_index(device))


def memory_allocated(device: _Device = None) -> int:
    return _C.memory_stats(_index(device))["allocated_bytes"]


def max_memory_allocated(device: _Device = None) -> int:
    return _C.memory_stats(_index(device))["peak_allocated_bytes"]


def memory_reserved(device: _Device = None) -> int:
    return _C.memory_stats(_index(device))["reserved_bytes"]


def reset_peak_memory_stats(device: _Device = None) -> None:
    _C.reset_peak_memory_stats(_index(device))


def manual_seed(seed: int, device: _Device = None) -> None:
    _C.manual_seed(_index(device), int(seed) & 0xFFFF_FFFF_FFFF_FFFF)


def manual_seed_all(seed: int) -> None:
    for index in range(device_count()):
        _C.manual_seed(index, int(seed) & 0xFFFF_FFFF_FFFF_FFFF)


def seed() -> int:
    return _C.seed(current_device())


def initial_seed() -> int:
    return _C.initial_seed(current_device())


def get_rng_state(device: _Device = None) -> torch.Tensor:
    return _C.get_rng_state(_index(device))


def set_rng_state(new_state: torch.Tensor, device: _Device = None) -> None:
    _C.set_rng_state(_index(device), new_state)


def _is_in_bad_fork() -> bool:
    return False
