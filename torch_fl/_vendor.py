"""Which vendor serves the flagos device in this process, and the device index of a device argument: what the
device-API modules (``_memory``, ``_memory_history``, ``_device_info``) ask before they answer."""

from __future__ import annotations

import torch

from . import _core

Device = torch.device | str | int | None

__all__ = ["Device", "device_label", "index_of", "on_gpu"]


def on_gpu() -> bool:
    """Whether flagos runs on a GPU vendor (CUDA, or DCU through HIP's CUDA names): then flagos device i is the
    vendor's device i, and torch.cuda answers for it."""
    return _core.accelerator() in ("cuda", "dcu")


def index_of(device: Device) -> int:
    """The flagos device index of ``device``; None means the current flagos device."""
    if device is None:
        return torch.accelerator.current_device_index()
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"expected a flagos device (torch.device, 'flagos:N' or an index), got {device!r}")
    parsed = torch.device(device)
    if parsed.type != "flagos":
        raise ValueError(f"expected a flagos device, got {parsed}; pass 'flagos:N' or the index N")
    return torch.accelerator.current_device_index() if parsed.index is None else parsed.index


def device_label(index: int) -> str:
    """How a message names the device: the vendor's device name on GPUs, 'emulated' otherwise."""
    return torch.cuda.get_device_name(index) if on_gpu() else "emulated on the host CPU"
