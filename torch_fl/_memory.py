"""``torch.flagos.memory``, like ``torch.cuda.memory``: the flagos allocator's statistics, limits, pools and blocks.

On a GPU vendor flagos memory is the vendor's caching allocator's (csrc/runtime/cuda.cpp), so the answers are
``torch.cuda``'s for the same device index. Under emulation they come from the emulation's own allocator
(csrc/runtime/emulation_memory.h, reached through ``_core``): every emulated device has the capacity
``FLAGOS_EMU_MEMORY`` sets (the host's memory by default), nothing is cached, and a request beyond the capacity, or
beyond the per-process fraction of it, raises ``torch.OutOfMemoryError``. History and snapshots are in
``_memory_history.py``, pools in ``_memory_pools.py``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from . import _core, _vendor
from ._memory_history import _dump_snapshot, _record_memory_history, _snapshot, memory_snapshot
from ._memory_pools import MemPool, use_mem_pool
from ._vendor import Device, index_of, on_gpu

__all__ = [
    "MemPool",
    "_dump_snapshot",
    "_record_memory_history",
    "_snapshot",
    "caching_allocator_alloc",
    "caching_allocator_delete",
    "caching_allocator_disabled",
    "caching_allocator_enable",
    "empty_cache",
    "get_allocator_backend",
    "get_per_process_memory_fraction",
    "host_memory_stats",
    "host_memory_stats_as_nested_dict",
    "list_gpu_processes",
    "max_memory_allocated",
    "max_memory_cached",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_cached",
    "memory_reserved",
    "memory_snapshot",
    "memory_stats",
    "memory_stats_as_nested_dict",
    "memory_summary",
    "reset_accumulated_host_memory_stats",
    "reset_accumulated_memory_stats",
    "reset_max_memory_allocated",
    "reset_max_memory_cached",
    "reset_peak_host_memory_stats",
    "reset_peak_memory_stats",
    "set_per_process_memory_fraction",
    "use_mem_pool",
]

# ---- statistics ----------------------------------------------------------------------------------------------
# The flagos allocator is torch's DeviceAllocator for the device (csrc/runtime/allocator.cpp), so these are
# torch.accelerator's memory functions with a flagos device argument: both give the same numbers. On GPUs the
# statistics are the vendor caching allocator's; under emulation only live and peak bytes are kept (nothing is
# cached, so reserved bytes are the allocated ones) and the cumulative fields stay 0.


def memory_stats(device: Device = None) -> dict[str, int]:
    """Flat allocator statistics of ``device``, keyed as ``torch.cuda.memory_stats``."""
    return dict(torch.accelerator.memory_stats(index_of(device)))


def memory_stats_as_nested_dict(device: Device = None) -> dict[str, Any]:
    """``memory_stats`` with each dotted key split into levels: ``stats["allocated_bytes"]["all"]["peak"]``."""
    nested: dict[str, Any] = {}
    for key, value in memory_stats(device).items():
        *parents, leaf = key.split(".")
        level = nested
        for part in parents:
            level = level.setdefault(part, {})
        level[leaf] = value
    return nested


def memory_allocated(device: Device = None) -> int:
    return torch.accelerator.memory_allocated(index_of(device))


def max_memory_allocated(device: Device = None) -> int:
    return torch.accelerator.max_memory_allocated(index_of(device))


def memory_reserved(device: Device = None) -> int:
    return torch.accelerator.memory_reserved(index_of(device))


def max_memory_reserved(device: Device = None) -> int:
    return torch.accelerator.max_memory_reserved(index_of(device))


def reset_peak_memory_stats(device: Device = None) -> None:
    torch.accelerator.reset_peak_memory_stats(index_of(device))


def reset_accumulated_memory_stats(device: Device = None) -> None:
    torch.accelerator.reset_accumulated_memory_stats(index_of(device))


# torch.cuda's older names for the same numbers ("cached" meant "reserved").
memory_cached = memory_reserved
max_memory_cached = max_memory_reserved
reset_max_memory_allocated = reset_peak_memory_stats
reset_max_memory_cached = reset_peak_memory_stats


def empty_cache() -> None:
    """Give cached, unused flagos memory back to the vendor (a no-op under emulation, which caches nothing)."""
    torch.accelerator.empty_cache()


def memory_summary(device: Device = None, abbreviated: bool = False) -> str:
    """A table of the allocator's statistics for ``device``: current, peak, allocated and freed, per pool size."""
    stats = memory_stats_as_nested_dict(device)
    index = index_of(device)
    rows = [("allocated memory", "allocated_bytes", True), ("active memory", "active_bytes", True)]
    rows += [("requested memory", "requested_bytes", True), ("reserved memory", "reserved_bytes", True)]
    rows += [("allocations", "allocation", False), ("active allocations", "active", False)]
    rows += [("reserved segments", "segment", False)]
    pools = ("all",) if abbreviated else ("all", "large_pool", "small_pool")
    line = "-" * 88
    lines = [line, f"flagos memory summary, device {index} ({_vendor.device_label(index)})", line]
    lines.append(f"{'metric':<36}{'current':>13}{'peak':>13}{'allocated':>13}{'freed':>13}")
    for title, key, in_bytes in rows:
        for pool in pools:
            counts = stats.get(key, {}).get(pool, {})
            cells = [counts.get(field, 0) for field in ("current", "peak", "allocated", "freed")]
            text = [_bytes(c) if in_bytes else str(c) for c in cells]
            lines.append(f"{(title + ' (' + pool + ')'):<36}" + "".join(f"{t:>13}" for t in text))
    lines.append(f"{'out-of-memory errors':<36}{stats.get('num_ooms', 0):>13}")
    free, total = mem_get_info(index)
    lines += [line, f"device memory: {_bytes(total - free)} in use of {_bytes(total)}", line]
    return "\n".join(lines) + "\n"


def _bytes(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    return str(count)


# ---- the device's memory and this process's share -------------------------------------------------------------


def mem_get_info(device: Device = None) -> tuple[int, int]:
    """Free and total bytes of the device: the driver's count on GPUs (every process), under emulation the
    capacity (``FLAGOS_EMU_MEMORY``) less what flagos tensors hold."""
    index = index_of(device)
    if on_gpu():
        return torch.cuda.mem_get_info(index)
    free, total = _core.mem_get_info(index)
    return int(free), int(total)


def set_per_process_memory_fraction(fraction: float, device: Device = None) -> None:
    """Let this process hold at most ``fraction`` of the device's memory; beyond it an allocation raises
    ``torch.OutOfMemoryError`` (the vendor's limit on GPUs, the emulated device's under emulation)."""
    if not isinstance(fraction, (int, float)) or isinstance(fraction, bool):
        raise TypeError(f"set_per_process_memory_fraction: fraction must be a float in [0, 1], got {fraction!r}")
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"set_per_process_memory_fraction: fraction must be in [0, 1], got {fraction}")
    index = index_of(device)
    if on_gpu():
        torch.cuda.set_per_process_memory_fraction(float(fraction), index)
    else:
        _core.emulation_set_memory_fraction(float(fraction), index)


def get_per_process_memory_fraction(device: Device = None) -> float:
    index = index_of(device)
    if on_gpu():
        return torch.cuda.get_per_process_memory_fraction(index)
    return float(_core.emulation_memory_fraction(index))


def list_gpu_processes(device: Device = None) -> str:
    """The processes using the device and their memory: the driver's list on GPUs; under emulation the device is
    this process's alone."""
    index = index_of(device)
    if on_gpu():
        return torch.cuda.list_gpu_processes(index)
    import os

    used = memory_allocated(index) / 2**20
    return f"flagos:{index} ({_vendor.device_label(index)})\nprocess {os.getpid():>10d} uses {used:12.3f} MB memory"


# ---- raw blocks ----------------------------------------------------------------------------------------------


def caching_allocator_alloc(size: int, device: Device = None, stream: torch.Stream | None = None) -> int:
    """A block of ``size`` bytes from the flagos allocator, as an address; give it back with
    ``caching_allocator_delete``. ``stream`` (default: the current one) is the stream that will use it."""
    index = index_of(device if stream is None else stream.device_index)
    return int(_core.caching_allocator_alloc(int(size), index, None if stream is None else stream.stream_id))


def caching_allocator_delete(mem_ptr: int) -> None:
    """Give back a block ``caching_allocator_alloc`` returned."""
    _core.caching_allocator_delete(int(mem_ptr))


def caching_allocator_enable(value: bool = True) -> None:
    """Switch the vendor's caching off (False) or on: blocks then go back to the driver when freed. The emulation
    caches nothing, so it is always off there and this changes nothing."""
    if on_gpu():
        torch.cuda.caching_allocator_enable(value)


@contextlib.contextmanager
def caching_allocator_disabled() -> Iterator[None]:
    """The vendor's caching off inside the block (the emulation never caches)."""
    if on_gpu():
        with torch.cuda.caching_allocator_disabled():
            yield
    else:
        yield


def get_allocator_backend() -> str:
    """The vendor allocator's backend (``native`` or ``cudaMallocAsync`` on CUDA); ``emulation`` under emulation."""
    return torch.cuda.get_allocator_backend() if on_gpu() else "emulation"


# ---- pinned host memory ---------------------------------------------------------------------------------------
# Pinned memory is the vendor's: CUDA's caching host allocator on GPUs. The emulation's pinned blocks are plain host
# memory that is neither cached nor counted, so its statistics are empty.


def host_memory_stats() -> dict[str, Any]:
    return dict(torch.cuda.host_memory_stats()) if on_gpu() else {}


def host_memory_stats_as_nested_dict() -> dict[str, Any]:
    return dict(torch.cuda.host_memory_stats_as_nested_dict()) if on_gpu() else {}


def reset_accumulated_host_memory_stats() -> None:
    if on_gpu():
        torch.cuda.reset_accumulated_host_memory_stats()


def reset_peak_host_memory_stats() -> None:
    if on_gpu():
        torch.cuda.reset_peak_host_memory_stats()
