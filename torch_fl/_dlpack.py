"""DLPack for flagos tensors, in the vendor's terms.

torch exports a PrivateUse1 tensor as ``kDLExtDev``, which no other library reads, and its
``Tensor.__dlpack_device__`` knows the device only as ``privateuse1``, so once the device is renamed it raises
``Unknown device type flagos``. A flagos tensor's bytes are the vendor's memory (host memory under the emulation,
CUDA memory on NVIDIA, HIP memory on DCU), so flagos exports them as the vendor's device type: ``kDLCPU`` under
the emulation, ``kDLCUDA`` on CUDA, ``kDLROCM`` on DCU. ``install`` wraps the two methods for flagos tensors only;
the export is a vendor view of the same bytes (``_core.vendor_view``) handed to torch's own exporter, so streams,
versions and copies follow torch's rules for that vendor. The way back, zero-copy, is ``torch.flagos.from_dlpack``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.overrides import has_torch_function_unary

from . import _core

_torch_dlpack = torch.Tensor.__dlpack__
_torch_dlpack_device = torch.Tensor.__dlpack_device__


def _vendor_view(tensor: torch.Tensor) -> torch.Tensor:
    # torch refuses these before exporting (Tensor.__dlpack__); the view would silently drop the bits
    if tensor.requires_grad:
        raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
    if tensor.is_conj() or tensor.is_neg():
        raise BufferError("Can't export tensors with the conjugate or negative bit set; call resolve_conj() first")
    return _core.vendor_view(tensor)


def __dlpack__(self: torch.Tensor, **kwargs: Any) -> Any:  # noqa: N807 (the protocol's name)
    if self.device.type != "flagos" or has_torch_function_unary(self):
        return _torch_dlpack(self, **kwargs)
    return _torch_dlpack(_vendor_view(self), **kwargs)


def __dlpack_device__(self: torch.Tensor) -> tuple[Any, int]:  # noqa: N807
    if self.device.type != "flagos" or has_torch_function_unary(self):
        return _torch_dlpack_device(self)
    return _torch_dlpack_device(_core.vendor_view(self.detach()))


def from_dlpack(ext_tensor: Any, device: torch.device | str | int | None = None) -> torch.Tensor:
    """A flagos tensor over the memory of ``ext_tensor`` (an object with ``__dlpack__``, or a capsule), zero-copy.

    The memory must be the vendor's: host memory under the emulation (``kDLCPU``), the GPU's on CUDA and DCU.
    ``device`` picks the flagos device under the emulation (default: the current one); on GPUs the memory's own
    device decides, and ``device`` must agree with it. Memory of another kind cannot become flagos memory without a
    copy: ``torch.from_dlpack(x).to("flagos")`` makes one.
    """
    vendor = torch.from_dlpack(ext_tensor)
    accel = _core.accelerator()
    expected = "cpu" if accel == "cpu" else "cuda"
    if vendor.device.type != expected:
        raise ValueError(
            f"torch.flagos.from_dlpack: the memory is on {vendor.device}, and flagos on {accel} serves {expected} "
            f"memory only; copy it instead: torch.from_dlpack(x).to('flagos')"
        )
    wanted = None if device is None else torch.device("flagos", device) if isinstance(device, int) else device
    wanted = None if wanted is None else torch.device(wanted)
    if wanted is not None and wanted.type != "flagos":
        raise ValueError(f"torch.flagos.from_dlpack: device must be a flagos device, got {wanted}")
    if expected == "cpu":  # kDLCPU names no device: a flagos tensor keeps its own, other memory takes the current
        own = ext_tensor.device.index if isinstance(ext_tensor, torch.Tensor) and ext_tensor.is_flagos else None
        index = wanted.index if wanted is not None and wanted.index is not None else own
        index = _core.current_device() if index is None else index
    else:
        index = vendor.device.index
        if wanted is not None and wanted.index not in (None, index):
            raise ValueError(
                f"torch.flagos.from_dlpack: the memory is on {vendor.device}, not flagos:{wanted.index}; a GPU's "
                "memory stays on its own device (copy it with .to() if it must move)"
            )
    if not 0 <= index < _core.device_count():
        raise ValueError(f"torch.flagos.from_dlpack: flagos:{index} does not exist ({_core.device_count()} device(s))")
    return _core.flagos_view(vendor, index)


def install() -> None:
    torch.Tensor.__dlpack__ = __dlpack__  # type: ignore[method-assign]
    torch.Tensor.__dlpack_device__ = __dlpack_device__  # type: ignore[method-assign]
