"""Memory history and snapshots of the flagos allocator, in the format of ``torch.cuda.memory._snapshot``, which
PyTorch's memory visualiser (``torch.cuda._memory_viz``, https://pytorch.org/memory_viz) reads.

On GPU vendors the allocator is CUDA's caching allocator, and these are ``torch.cuda.memory``'s functions for the
same device. Under emulation the emulation's allocator records them (csrc/runtime/emulation_memory.h): every
allocation is its own segment (nothing is cached), a snapshot lists the blocks allocated since recording began, and
the trace holds each block's ``segment_alloc``/``alloc`` and ``free_requested``/``free_completed``/``segment_free``
with the Python stack that made it.
"""

from __future__ import annotations

import pickle
import sys
from typing import Any

import torch

from . import _core
from ._vendor import Device, index_of, on_gpu

__all__ = ["_dump_snapshot", "_record_memory_history", "_snapshot", "install", "memory_snapshot"]

# The action codes of torch.ops.flagos.emulation_memory_snapshot's events (emulation::Action).
_ACTIONS = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "oom")
_LARGE_SEGMENT = 1 << 20  # torch's allocator serves requests above 1 MiB from its large pool


def _record_memory_history(
    enabled: str | bool | None = "all",
    context: str | None = "all",
    stacks: str = "all",
    max_entries: int = sys.maxsize,
    device: Device = None,
    clear_history: bool = False,
    **options: Any,
) -> None:
    """Start (``enabled="all"``: blocks and a trace of events; ``"state"``: blocks only) or stop (``None``)
    recording the allocator's history. ``context`` says which events keep their stack (``"state"``, ``"alloc"``,
    ``"all"`` or None), ``stacks`` whether C++ frames join Python's (``"all"``) or not (``"python"``)."""
    if isinstance(enabled, bool):  # torch.cuda's older spelling: True for everything, False to stop
        enabled = "all" if enabled else None
    if on_gpu():
        torch.cuda.memory._record_memory_history(
            enabled=enabled,
            context=context,
            stacks=stacks,
            max_entries=max_entries,
            device=torch.device("cuda", index_of(device)),
            clear_history=clear_history,
            **options,
        )
        return
    if options:
        raise TypeError(
            f"_record_memory_history: {', '.join(sorted(options))} concern CUDA's allocator and have no meaning "
            "under the flagos emulation; leave them out"
        )
    index_of(device)  # checked like every device argument; the emulation records all devices at once
    max_entries = min(int(max_entries), 2**63 - 1)
    if clear_history:
        _core.emulation_record_memory_history(None, None, "python", 0)
    _core.emulation_record_memory_history(enabled, context, stacks, max_entries)


def _snapshot(device: Device = None, augment_with_fx_traces: bool = False) -> dict[str, Any]:
    """The allocator's state: ``segments`` (live blocks with their stacks) and ``device_traces`` (one list of events
    per device), as ``torch.cuda.memory._snapshot`` gives them."""
    if on_gpu():
        cuda_device = None if device is None else torch.device("cuda", index_of(device))
        if augment_with_fx_traces:  # an argument of newer torch lines only
            return torch.cuda.memory._snapshot(cuda_device, augment_with_fx_traces=True)
        return torch.cuda.memory._snapshot(cuda_device)
    segments, traces = _emulated_state()
    return {"segments": segments, "device_traces": traces, "allocator_settings": {"backend": "emulation"}}


def _dump_snapshot(filename: str = "dump_snapshot.pickle", augment_with_fx_traces: bool = False) -> None:
    """Write ``_snapshot()`` to ``filename`` as a pickle, the file https://pytorch.org/memory_viz opens."""
    with open(filename, "wb") as f:
        pickle.dump(_snapshot(augment_with_fx_traces=augment_with_fx_traces), f)


def memory_snapshot(mempool_id: tuple[int, int] | None = None) -> list[dict[str, Any]]:
    """The live segments of every flagos device (of pool ``mempool_id`` only, when given)."""
    if on_gpu():
        return torch.cuda.memory_snapshot() if mempool_id is None else torch.cuda.memory_snapshot(mempool_id)
    segments, _ = _emulated_state()
    if mempool_id is None:
        return segments
    return [s for s in segments if tuple(s["segment_pool_id"]) == tuple(mempool_id)]


def _emulated_state() -> tuple[list[dict[str, Any]], list[list[dict[str, Any]]]]:
    blocks, events, files, names, lines, starts, frame_ids = _core.emulation_memory_snapshot()
    frames = [{"filename": f, "name": n, "line": line} for f, n, line in zip(files, names, lines, strict=True)]

    def stack(traceback: int) -> list[dict[str, Any]]:
        if traceback < 0:
            return []
        return [frames[i] for i in frame_ids[starts[traceback] : starts[traceback + 1]]]

    segments = []
    for device, address, size, pool, traceback in zip(*[iter(blocks)] * 5, strict=True):
        where = stack(traceback)
        block = {"address": address, "size": size, "requested_size": size, "state": "active_allocated"}
        segments.append(
            {
                "device": device,
                "address": address,
                "total_size": size,
                "allocated_size": size,
                "active_size": size,
                "requested_size": size,
                "stream": 0,
                "segment_type": "large" if size > _LARGE_SEGMENT else "small",
                "segment_pool_id": (0, pool),
                "is_expandable": False,
                "frames": where,
                "blocks": [{**block, "frames": where}],
            }
        )
    traces: list[list[dict[str, Any]]] = [[] for _ in range(torch.accelerator.device_count())]
    for device, action, address, size, time_us, traceback in zip(*[iter(events)] * 6, strict=True):
        entry = {"action": _ACTIONS[action], "addr": address, "size": size, "stream": 0, "time_us": time_us}
        if _ACTIONS[action] == "oom":
            entry.update(addr=0, device_free=address)
        entry["frames"] = stack(traceback)
        traces[device].append(entry)
    return segments, traces


def install() -> None:
    """torch.accelerator.memory._snapshot asks torch.cuda unless the accelerator is XPU, and torch.cuda has no
    snapshot in a CPU build of torch: under emulation it answers with flagos's. (On GPU vendors torch.cuda's
    snapshot is flagos's already.)"""
    memory = getattr(torch.accelerator, "memory", None)
    if not on_gpu() and memory is not None and hasattr(memory, "_snapshot"):
        memory._snapshot = _snapshot
