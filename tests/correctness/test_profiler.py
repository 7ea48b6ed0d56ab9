"""torch.profiler on the emulation: flagos operators get device time (their vendor kernel, which runs on the host,
reported as a flagos kernel under the operator) and device memory, in key_averages() and the trace. On a CUDA node
the kernels are CUDA's (test_device_api_cuda.py)."""

from __future__ import annotations

import json

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import torch_fl

pytestmark = pytest.mark.skipif(
    torch_fl.accelerator() != "cpu", reason="the emulation's kernels; on GPUs the vendor's activity gives them"
)
TORCH_LINE = tuple(int(part) for part in torch.__version__.split(".")[:2])


@pytest.mark.skipif(TORCH_LINE < (2, 13), reason="torch.profiler runs backend kineto profilers from torch 2.13 on")
def test_flagos_operators_have_device_time_and_memory(tmp_path) -> None:
    x = torch.randn(128, 128, device="flagos")
    host = torch.randn(128, 128)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], profile_memory=True) as prof:
        y = x @ x
        host @ host  # a host operator has no flagos kernel
    averages = {e.key: e for e in prof.key_averages()}
    kernels = [e for e in prof.events() if e.name.endswith("(emulated kernel)")]
    assert [k.name for k in kernels] == ["aten::mm (emulated kernel)"], [e.name for e in prof.events()]
    assert kernels[0].device_type == torch.autograd.DeviceType.PrivateUse1
    mm = [e for e in prof.events() if e.name == "aten::mm" and e.device_type == torch.autograd.DeviceType.CPU]
    assert len(mm) == 2 and sorted(e.self_device_time_total > 0 for e in mm) == [False, True]
    assert averages["aten::mm"].self_device_memory_usage == y.nbytes
    trace = tmp_path / "trace.json"
    prof.export_chrome_trace(str(trace))
    events = json.loads(trace.read_text())["traceEvents"]
    kernel = next(e for e in events if e.get("name") == "aten::mm (emulated kernel)")
    op = next(e for e in events if e.get("name") == "aten::mm" and e["ts"] <= kernel["ts"])
    assert kernel["cat"] == "kernel" and kernel["ts"] + kernel["dur"] <= op["ts"] + op["dur"] + 1


def test_the_autograd_profilers_device_events_time_flagos_operators() -> None:
    x = torch.randn(128, 128, device="flagos")
    with torch.autograd.profiler.profile(use_device="flagos", use_kineto=False) as prof:
        x @ x
    mm = next(e for e in prof.key_averages() if e.key == "aten::mm")
    assert mm.self_device_time_total > 0
