"""What a flagos device is: its name, properties, capability, peers and sensors (like ``torch.cuda``'s functions of
the same names).

On a GPU vendor flagos device i is the vendor's device i, so each answer is ``torch.cuda``'s for index i. Under
emulation the device is described as what it is: host memory and host threads, named as emulated, with the capacity
``FLAGOS_EMU_MEMORY`` sets and no compute capability (it is no GPU: ``(0, 0)``).
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass

import torch

from . import _core
from ._vendor import Device, index_of, on_gpu

__all__ = [
    "EmulatedDeviceProperties",
    "can_device_access_peer",
    "clock_rate",
    "device_memory_used",
    "get_arch_list",
    "get_device_capability",
    "get_device_name",
    "get_device_properties",
    "get_gencode_flags",
    "is_tf32_supported",
    "memory_usage",
    "power_draw",
    "temperature",
    "utilization",
]


@dataclass(frozen=True)
class EmulatedDeviceProperties:
    """The properties of an emulated flagos device, under the names of ``torch.cuda``'s device properties that
    apply to it."""

    name: str
    total_memory: int  # FLAGOS_EMU_MEMORY, the host's memory by default
    major: int  # no compute capability: the device is no GPU
    minor: int
    multi_processor_count: int  # the host's CPUs, which run the kernels
    is_integrated: bool  # device memory is host memory
    is_multi_gpu_board: bool


def _check(index: int) -> int:
    count = torch.accelerator.device_count()
    if not 0 <= index < count:
        raise ValueError(f"flagos device index {index} is out of range: this process has {count} flagos devices")
    return index


def get_device_name(device: Device = None) -> str:
    index = _check(index_of(device))
    if on_gpu():
        return torch.cuda.get_device_name(index)
    return f"flagos emulated device (host CPU {platform.machine() or 'unknown'})"


def get_device_properties(device: Device = None) -> object:
    """The vendor's properties object on GPUs (``torch.cuda.get_device_properties``); an
    ``EmulatedDeviceProperties`` under emulation."""
    index = _check(index_of(device))
    if on_gpu():
        return torch.cuda.get_device_properties(index)
    return EmulatedDeviceProperties(
        name=get_device_name(index),
        total_memory=int(_core.emulation_capacity()),
        major=0,
        minor=0,
        multi_processor_count=os.cpu_count() or 1,
        is_integrated=True,
        is_multi_gpu_board=False,
    )


def get_device_capability(device: Device = None) -> tuple[int, int]:
    index = _check(index_of(device))
    return torch.cuda.get_device_capability(index) if on_gpu() else (0, 0)


def can_device_access_peer(device: Device, peer_device: Device) -> bool:
    """Whether ``device`` can read ``peer_device``'s memory directly: the driver's answer on GPUs; emulated devices
    share the host's memory, so always (for two valid devices)."""
    index, peer = _check(index_of(device)), _check(index_of(peer_device))
    return torch.cuda.can_device_access_peer(index, peer) if on_gpu() else True


def get_arch_list() -> list[str]:
    """The GPU architectures torch's vendor kernels were built for; none under emulation (host code)."""
    return torch.cuda.get_arch_list() if on_gpu() else []


def get_gencode_flags() -> str:
    return torch.cuda.get_gencode_flags() if on_gpu() else ""


def is_tf32_supported() -> bool:
    """Whether matmuls may run in TF32: the device's answer on GPUs; the emulation's host kernels have no TF32."""
    return torch.cuda.is_tf32_supported() if on_gpu() else False


# ---- sensors ----------------------------------------------------------------------------------------------------
# On GPUs, the vendor's management library (NVML or amd-smi) as torch.cuda reads it. The emulation's kernels run on
# the calling thread and have finished when an operator returns, so between calls its device is never busy.


def utilization(device: Device = None) -> int:
    """Percent of the last sample period in which a kernel ran (0 under emulation: nothing is ever pending)."""
    index = _check(index_of(device))
    return torch.cuda.utilization(index) if on_gpu() else 0


def memory_usage(device: Device = None) -> int:
    """Percent of the last sample period in which device memory was read or written (0 under emulation)."""
    index = _check(index_of(device))
    return torch.cuda.memory_usage(index) if on_gpu() else 0


def device_memory_used(device: Device = None) -> int:
    """Bytes in use on the device as the driver counts them (every process); under emulation this process's."""
    index = _check(index_of(device))
    if on_gpu():
        return torch.cuda.device_memory_used(index)
    free, total = _core.mem_get_info(index)
    return int(total) - int(free)


def _no_sensor(what: str) -> RuntimeError:
    return RuntimeError(
        f"the emulated flagos device has no {what}: it is host memory and host threads (FLAGOS_ACCELERATOR=cpu); "
        "read the host's own sensors, or run on a GPU vendor"
    )


def temperature(device: Device = None) -> int:
    index = _check(index_of(device))
    if on_gpu():
        return torch.cuda.temperature(index)
    raise _no_sensor("temperature sensor")


def power_draw(device: Device = None) -> int:
    index = _check(index_of(device))
    if on_gpu():
        return torch.cuda.power_draw(index)
    raise _no_sensor("power meter")


def clock_rate(device: Device = None) -> int:
    index = _check(index_of(device))
    if on_gpu():
        return torch.cuda.clock_rate(index)
    raise _no_sensor("clock of its own")
