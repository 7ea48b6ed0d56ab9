"""Pinned host memory for flagos: pin_memory(), is_pinned(), DataLoader(pin_memory=True) and non_blocking copies
both ways. On GPUs the memory is the vendor's pinned host memory; under emulation it is host memory that knows it
was pinned."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import torch_fl  # noqa: F401


def test_pin_memory_and_is_pinned() -> None:
    x = torch.randn(16)
    pinned = x.pin_memory()
    assert pinned.is_pinned() and not x.is_pinned()
    assert torch.equal(pinned, x)
    assert pinned[3:].is_pinned()  # a view into the pinned block
    assert torch.empty(8, pin_memory=True).is_pinned()


def test_non_blocking_copies_both_ways() -> None:
    x = torch.arange(1000, dtype=torch.float32).pin_memory()
    on_device = x.to("flagos", non_blocking=True)
    back = on_device.mul(2).to("cpu", non_blocking=True)
    torch.flagos.synchronize()
    assert on_device.device.type == "flagos"
    assert back.is_pinned()  # torch pins the host side of a non_blocking device-to-host copy
    assert torch.equal(back, x * 2)
    host = torch.empty(1000).pin_memory()
    host.copy_(on_device, non_blocking=True)
    torch.flagos.synchronize()
    assert torch.equal(host, x)


def test_pin_memory_dataloader_feeds_flagos() -> None:
    data = torch.arange(64, dtype=torch.float32).reshape(16, 4)
    loader = DataLoader(TensorDataset(data), batch_size=4, pin_memory=True)
    seen = []
    for (batch,) in loader:
        assert batch.is_pinned()
        seen.append(batch.to("flagos", non_blocking=True))
    torch.flagos.synchronize()
    assert all(b.device.type == "flagos" for b in seen)
    assert torch.equal(torch.cat([b.cpu() for b in seen]), data)


def test_pin_memory_dataloader_with_workers() -> None:
    data = torch.randn(12, 3)
    loader = DataLoader(TensorDataset(data), batch_size=3, pin_memory=True, num_workers=2)
    got = [batch for (batch,) in loader]
    assert all(b.is_pinned() for b in got)
    assert torch.equal(torch.cat(got), data)


HOST_CACHE = """
import torch, torch_fl
kept = torch.ones(3, device="flagos") + torch.empty(4, pin_memory=True).fill_(1)[:3].to("flagos")
torch.flagos.empty_host_cache()
torch.accelerator.empty_host_cache()
torch.accelerator.memory.empty_host_cache()
assert torch.equal(kept.cpu(), torch.full((3,), 2.0))
print("emptied")
"""


@pytest.mark.skipif(not hasattr(torch.accelerator, "empty_host_cache"), reason="this torch has no empty_host_cache")
def test_empty_host_cache_answers_for_flagos() -> None:
    """torch asks its host allocator of the accelerator, which flagos has none of: the process died of a segfault
    once a flagos tensor existed. torch_fl answers it with the vendor's host cache (a child, so a crash fails the
    test, not the run)."""
    child = subprocess.run([sys.executable, "-c", HOST_CACHE], capture_output=True, text=True, timeout=120)
    assert child.returncode == 0 and child.stdout.strip() == "emptied", (child.returncode, child.stderr[-2000:])
