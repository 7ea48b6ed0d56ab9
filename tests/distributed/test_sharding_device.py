"""What FSDP2 asks of the flagos device itself, in one process: freeing and re-allocating a parameter's memory
through ``untyped_storage().resize_()`` while views of it stay valid (FSDP2 frees unsharded parameters that way
after each forward and backward), and pinned host memory for its offloaded shards."""

from __future__ import annotations

import torch

import torch_fl  # noqa: F401


def test_storage_resize_frees_and_reallocates_under_the_same_tensor():
    """resize_(0) hands the bytes back to the allocator (memory_allocated drops by them), resize_(n) gets fresh
    ones, and the tensor and a view of it, unchanged objects, read what is written there next."""
    torch.flagos.synchronize()
    param = torch.empty(256, 64, device="flagos")
    view = param[8:16]
    nbytes = param.untyped_storage().nbytes()
    held = torch.flagos.memory_allocated()
    param.untyped_storage().resize_(0)
    assert param.untyped_storage().nbytes() == 0
    assert torch.flagos.memory_allocated() == held - nbytes
    param.untyped_storage().resize_(nbytes)
    assert torch.flagos.memory_allocated() == held
    source = torch.arange(256 * 64, dtype=torch.float32).reshape(256, 64)
    param.copy_(source.to("flagos"))  # FSDP2 writes the all-gathered parameter into the regrown storage
    assert torch.equal(param.cpu(), source)
    assert torch.equal(view.cpu(), source[8:16])


def test_storage_resize_keeps_the_bytes_it_keeps():
    """Shrinking and regrowing keeps the leading bytes, as on cuda; the regrown tail is new memory."""
    t = torch.arange(32, dtype=torch.float32, device="flagos")
    storage = t.untyped_storage()
    storage.resize_(16 * 4)
    storage.resize_(32 * 4)
    assert torch.equal(t[:16].cpu(), torch.arange(16, dtype=torch.float32))


def test_pinned_host_memory_for_offloaded_shards():
    """CPUOffloadPolicy pins its host shards through the flagos hooks and copies them in without blocking."""
    host = torch.randn(64, 32).pin_memory()
    assert host.is_pinned()
    dev = host.to("flagos", non_blocking=True)
    torch.flagos.synchronize()
    assert torch.equal(dev.cpu(), host)
