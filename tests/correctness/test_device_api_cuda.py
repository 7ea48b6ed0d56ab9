"""On a CUDA node (FLAGOS_ACCELERATOR=cuda): torch.flagos's device API answers as plain CUDA does for the same
device, the vendor's OutOfMemoryError reaches flagos allocations, and torch.profiler shows the CUDA kernels of flagos
operators with their times. Plain CUDA runs in another process, one without torch_fl (docs/device.md, one
accelerator per process). Skipped without a GPU runtime."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

import torch_fl

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(
        torch_fl.accelerator() not in ("cuda", "dcu"),
        reason=f"needs a GPU runtime; this process runs FLAGOS_ACCELERATOR={torch_fl.accelerator()}",
    ),
]

FIELDS = ("name", "total_memory", "major", "minor", "multi_processor_count", "is_integrated", "is_multi_gpu_board")

PLAIN_CUDA = f"""
import json, torch
p = torch.cuda.get_device_properties(0)
print(json.dumps({{"props": {{f: getattr(p, f) for f in {FIELDS!r}}}, "uuid": str(p.uuid),
    "capability": list(torch.cuda.get_device_capability(0)), "name": torch.cuda.get_device_name(0),
    "total": torch.cuda.mem_get_info(0)[1]}}))
"""


@pytest.fixture(scope="module")
def plain_cuda() -> dict:
    """What plain CUDA says about device 0, from a process that does not import torch_fl."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLAGOS")}
    out = subprocess.run([sys.executable, "-c", PLAIN_CUDA], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_device_properties_are_plain_cudas(plain_cuda) -> None:
    props = torch.flagos.get_device_properties(0)
    assert {f: getattr(props, f) for f in FIELDS} == plain_cuda["props"]
    assert str(props.uuid) == plain_cuda["uuid"]
    assert list(torch.flagos.get_device_capability(0)) == plain_cuda["capability"]
    assert torch.flagos.get_device_name("flagos:0") == plain_cuda["name"]


def test_mem_get_info_is_the_drivers(plain_cuda) -> None:
    assert torch.flagos.mem_get_info(0)[1] == plain_cuda["total"]
    held = torch.empty(256 << 20, dtype=torch.uint8, device="flagos")
    # Back to back, nothing allocates between the two questions, so the driver gives one answer to both.
    assert torch.flagos.mem_get_info(0) == torch.cuda.mem_get_info(0)
    assert torch.accelerator.get_memory_info(0) == torch.cuda.mem_get_info(0)
    del held


def test_a_too_large_allocation_raises_out_of_memory_error() -> None:
    with pytest.raises(torch.OutOfMemoryError):
        torch.empty(1 << 50, dtype=torch.uint8, device="flagos")
    torch.flagos.set_per_process_memory_fraction(0.01)
    try:
        with pytest.raises(torch.OutOfMemoryError):
            torch.empty(int(torch.flagos.mem_get_info()[1] * 0.05), dtype=torch.uint8, device="flagos")
    finally:
        torch.flagos.set_per_process_memory_fraction(1.0)


def test_a_snapshot_holds_flagos_blocks() -> None:
    torch.flagos.memory._record_memory_history(stacks="python")
    try:
        t = torch.empty(8 << 20, dtype=torch.uint8, device="flagos")
        snapshot = torch.flagos.memory._snapshot()
    finally:
        torch.flagos.memory._record_memory_history(enabled=None)
    blocks = [b for s in snapshot["segments"] for b in s["blocks"] if b["state"] == "active_allocated"]
    assert any(b["address"] == t.data_ptr() for b in blocks)


def test_the_profiler_shows_cuda_kernels_under_flagos_operators() -> None:
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(1024, 1024, device="flagos")
    torch.flagos.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            y = x @ x
        torch.flagos.synchronize()
    del y
    mm = [e for e in prof.key_averages() if e.key == "aten::mm"]
    assert mm and mm[0].device_time_total > 0, prof.key_averages().table(row_limit=10)
    # With PrivateUse1 renamed, torch labels CUPTI's kernels with the PrivateUse1 device type (kineto_shim.cpp).
    on_device = (torch.autograd.DeviceType.CUDA, torch.autograd.DeviceType.PrivateUse1)
    kernels = [e for e in prof.events() if e.device_type in on_device and e.device_time > 0]
    assert kernels, "no CUDA kernel events"
    assert all("emulated kernel" not in e.name for e in kernels)  # the vendor's kernels, not the emulation's
