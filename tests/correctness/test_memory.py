"""Flagos memory through torch's own allocator API: the flagos allocator is the device's c10::DeviceAllocator, so
``torch.accelerator``'s memory functions read the same statistics as ``torch.flagos``'s, and ``empty_cache`` and
``record_stream`` reach the allocator that owns the memory. Runs on the emulation and on a GPU; the one
emulation-only test says so."""

from __future__ import annotations

import gc

import pytest
import torch

import torch_fl

MiB = 1 << 20


def settled() -> None:
    """Let go of every freed tensor, and of memory a side stream may still be using, before counting."""
    gc.collect()
    torch.flagos.synchronize()


def test_flagos_is_the_accelerator_whose_memory_torch_reports() -> None:
    assert torch.accelerator.current_accelerator().type == "flagos"
    assert torch.accelerator.memory_stats(), "torch sees no statistics: the flagos allocator is not initialised"


def test_accelerator_memory_allocated_follows_flagos_tensors() -> None:
    settled()
    before = torch.accelerator.memory_allocated()
    t = torch.empty(MiB, device="flagos")  # 4 MiB: no allocator rounding
    assert torch.accelerator.memory_allocated() - before == t.nbytes
    assert torch.accelerator.memory_allocated() == torch.flagos.memory_allocated()
    assert torch.accelerator.max_memory_allocated() >= before + t.nbytes
    del t
    settled()
    assert torch.accelerator.memory_allocated() == before


def test_flagos_and_accelerator_statistics_are_the_same_numbers() -> None:
    keep = torch.ones(3, MiB // 4, device="flagos")
    stats = torch.accelerator.memory_stats()
    assert torch.flagos.memory_stats() == dict(stats)
    assert stats["allocated_bytes.all.current"] == torch.flagos.memory_allocated() >= keep.nbytes
    assert stats["allocated_bytes.all.peak"] == torch.flagos.max_memory_allocated()
    assert stats["reserved_bytes.all.current"] == torch.flagos.memory_reserved()
    assert stats["reserved_bytes.all.peak"] == torch.flagos.max_memory_reserved()
    assert torch.flagos.memory_reserved() >= torch.flagos.memory_allocated()
    assert torch.flagos.max_memory_reserved() >= torch.flagos.memory_reserved()


def test_statistics_are_per_device(two_devices) -> None:
    settled()
    before0 = torch.accelerator.memory_allocated(0)
    before1 = torch.accelerator.memory_allocated("flagos:1")
    t = torch.empty(256, 1024, device="flagos:1")
    assert torch.accelerator.memory_allocated(torch.device("flagos:1")) - before1 == t.nbytes
    assert torch.flagos.memory_allocated("flagos:1") - before1 == t.nbytes
    assert torch.accelerator.memory_allocated(0) == before0
    assert torch.accelerator.memory_stats(1)["allocated_bytes.all.current"] == torch.flagos.memory_allocated(1)


def test_reset_peak_memory_stats_brings_the_peak_down_to_what_is_held() -> None:
    settled()
    spike = torch.empty(8 * MiB, device="flagos")
    peak = torch.flagos.max_memory_allocated()
    assert peak >= spike.nbytes
    del spike
    settled()
    assert torch.accelerator.max_memory_allocated() == peak  # a peak outlives the tensor ...
    torch.accelerator.reset_peak_memory_stats()
    assert torch.flagos.max_memory_allocated() == torch.flagos.memory_allocated() < peak  # ... until reset
    torch.flagos.reset_peak_memory_stats("flagos")
    assert torch.accelerator.max_memory_allocated() == torch.accelerator.memory_allocated()


def test_empty_cache_gives_back_freed_memory_only() -> None:
    settled()
    torch.flagos.empty_cache()  # a block cached by an earlier test could serve `freed` without new memory
    kept = torch.full((MiB,), 3.0, device="flagos")
    reserved_before = torch.flagos.memory_reserved()
    freed = torch.empty(16 * MiB, device="flagos")
    assert torch.flagos.memory_reserved() >= reserved_before + freed.nbytes
    del freed
    settled()
    torch.flagos.empty_cache()
    torch.accelerator.empty_cache()
    assert torch.flagos.memory_reserved() <= reserved_before
    assert torch.flagos.memory_reserved() >= torch.flagos.memory_allocated() >= kept.nbytes
    assert torch.equal(kept.cpu(), torch.full((MiB,), 3.0))  # live memory untouched


def test_memory_recorded_on_a_side_stream_is_given_back_once_that_stream_is_done() -> None:
    settled()
    before = torch.flagos.memory_allocated()
    x = torch.ones(MiB, device="flagos")
    side = torch.flagos.Stream()
    side.wait_stream(torch.flagos.current_stream())
    with torch.flagos.stream(side):
        y = x * 2
    x.record_stream(side)
    del x
    side.synchronize()
    settled()
    assert torch.flagos.memory_allocated() - before == y.nbytes
    assert torch.equal(y.cpu(), torch.full((MiB,), 2.0))


def test_emulated_memory_caches_nothing() -> None:
    """Under emulation a freed block goes straight back to the host: reserved is always allocated, and the
    emulation keeps live and peak bytes only (the cumulative fields stay 0)."""
    if torch_fl.accelerator() != "cpu":
        pytest.skip(f"emulation only; this process runs FLAGOS_ACCELERATOR={torch_fl.accelerator()}")
    t = torch.empty(MiB, device="flagos")
    stats = torch.flagos.memory_stats()
    assert stats["reserved_bytes.all.current"] == stats["allocated_bytes.all.current"] >= t.nbytes
    assert stats["active_bytes.all.current"] == stats["allocated_bytes.all.current"]
    assert stats["allocated_bytes.all.allocated"] == stats["allocated_bytes.all.freed"] == 0
