"""Dynamo's view of the flagos device (``torch._dynamo.device_interface``): devices, streams and properties.

Streams, events and the current device come from ``torch.flagos`` for every vendor. What Inductor asks about the
hardware is the vendor's: on a GPU, flagos device i is the vendor's device i and the current flagos stream is the
vendor's current stream (csrc/runtime/cuda.cpp), so the raw stream a Triton kernel is launched on and the device
properties it is tuned for are CUDA's (HIP's on DCU); under the CPU emulation they are the host's.
"""

from __future__ import annotations

import os
from collections import namedtuple
from typing import Any

import torch
from torch._dynamo.device_interface import DeviceInterface

from .. import _core
from .. import flagos as _flagos

_HostProperties = namedtuple("_HostProperties", ["multi_processor_count"])


def _vendor_index(device: Any) -> int:
    return _flagos._index(device, any_type=True)


def on_gpu() -> bool:
    return _core.accelerator() in ("cuda", "dcu")


class FlagosInterface(DeviceInterface):
    """Dynamo and Inductor reach the flagos runtime through this class (registered for ``flagos`` and
    ``flagos:<i>``)."""

    device = _flagos.device  # type: ignore[assignment]
    Event = torch.Event  # type: ignore[assignment]
    Stream = torch.Stream  # type: ignore[assignment]

    class Worker:
        """Answers Inductor's compile workers from facts recorded in the parent process."""

        _properties: dict[int, Any] = {}
        _current: int | None = None

        @staticmethod
        def set_device(device: int) -> None:
            FlagosInterface.Worker._current = device

        @staticmethod
        def current_device() -> int:
            current = FlagosInterface.Worker._current
            return _flagos.current_device() if current is None else current

        @staticmethod
        def get_device_properties(device: Any = None) -> Any:
            index = FlagosInterface.Worker.current_device() if device is None else _vendor_index(device)
            cache = FlagosInterface.Worker._properties
            if index not in cache:
                if on_gpu():
                    cache[index] = torch.cuda.get_device_properties(index)
                else:
                    cache[index] = _HostProperties(os.cpu_count() or 1)
            return cache[index]

    current_device = staticmethod(_flagos.current_device)
    set_device = staticmethod(_flagos.set_device)  # type: ignore[assignment]
    device_count = staticmethod(_flagos.device_count)
    is_available = staticmethod(_flagos.is_available)
    stream = staticmethod(_flagos.stream)  # type: ignore[assignment]
    current_stream = staticmethod(_flagos.current_stream)
    set_stream = staticmethod(_flagos.set_stream)  # type: ignore[assignment]
    synchronize = staticmethod(_flagos.synchronize)
    memory_allocated = staticmethod(_flagos.memory_allocated)
    is_bf16_supported = staticmethod(_flagos.is_bf16_supported)  # type: ignore[assignment]

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        _core.exchange_stream(stream_id, device_index)

    @staticmethod
    def exchange_device(device: int) -> int:
        previous = _flagos.current_device()
        if device >= 0 and device != previous:
            _flagos.set_device(device)
        return previous

    @staticmethod
    def maybe_exchange_device(device: int) -> int:
        return FlagosInterface.exchange_device(device)

    @staticmethod
    def get_raw_stream(device_idx: int) -> int:
        if on_gpu():
            return torch._C._cuda_getCurrentRawStream(device_idx)
        return 0  # the emulation's kernels run on the calling thread

    @classmethod
    def get_device_properties(cls, device: Any = None) -> Any:
        return cls.Worker.get_device_properties(device)

    @staticmethod
    def get_compute_capability(device: Any = None) -> Any:
        if not on_gpu():
            return ""
        if torch.version.hip:
            return torch.cuda.get_device_properties(_vendor_index(device)).gcnArchName.split(":", 1)[0]
        major, minor = torch.cuda.get_device_capability(_vendor_index(device))
        return major * 10 + minor

    @staticmethod
    def is_triton_capable(device: Any = None) -> bool:
        return on_gpu()

    @classmethod
    def raise_if_triton_unavailable(cls, device: Any = None) -> None:
        if not on_gpu():
            raise RuntimeError(
                "flagos runs the CPU emulation in this process: Inductor generates C++ for it, not Triton"
            )
        from torch._dynamo.device_interface import CudaInterface

        check = getattr(CudaInterface, "raise_if_triton_unavailable", None)
        if check is not None:
            check(_vendor_index(device))  # CUDA's own check, asked about the vendor device behind flagos
