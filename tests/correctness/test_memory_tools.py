"""The memory tools of torch.flagos on the emulation: torch.OutOfMemoryError with the sizes, the per-process memory
fraction, memory_summary and the nested statistics, memory pools, and history snapshots that PyTorch's memory
visualiser (torch.cuda._memory_viz) reads. On a GPU vendor these are torch.cuda's own (the cuda-marked tests in
test_device_api_cuda.py check the OOM there)."""

from __future__ import annotations

import gc
import pickle

import pytest
import torch
from torch.cuda import _memory_viz

import torch_fl

MiB = 1 << 20

pytestmark = pytest.mark.skipif(
    torch_fl.accelerator() != "cpu", reason="the emulation's allocator; on GPUs torch.cuda's answers"
)


def test_a_too_large_allocation_raises_out_of_memory_error_with_the_sizes() -> None:
    before = torch.flagos.memory_allocated()
    with pytest.raises(torch.OutOfMemoryError, match=r"tried to allocate 1\.00 PiB.*FLAGOS_EMU_MEMORY") as caught:
        torch.empty(1 << 50, dtype=torch.uint8, device="flagos")
    assert isinstance(caught.value, RuntimeError)  # code that catches RuntimeError still catches it
    assert torch.flagos.memory_allocated() == before


def test_the_per_process_fraction_limits_what_this_process_may_hold() -> None:
    gc.collect()
    total = torch.flagos.mem_get_info()[1]
    in_use = torch.flagos.memory_allocated()
    fraction = (in_use + 8 * MiB) / total
    torch.flagos.set_per_process_memory_fraction(fraction)
    try:
        assert torch.flagos.get_per_process_memory_fraction() == pytest.approx(fraction)
        small = torch.empty(MiB, dtype=torch.uint8, device="flagos")  # within the share
        with pytest.raises(torch.OutOfMemoryError, match="set_per_process_memory_fraction"):
            torch.empty(16 * MiB, dtype=torch.uint8, device="flagos")
        with pytest.raises(torch.OutOfMemoryError):  # a native-route result counts too
            torch.ones(MiB // 4, device="flagos").repeat(16)
        del small
    finally:
        torch.flagos.set_per_process_memory_fraction(1.0)
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        torch.flagos.set_per_process_memory_fraction(1.5)


def test_nested_statistics_and_summary_show_what_is_held() -> None:
    held = torch.empty(3 * MiB, dtype=torch.uint8, device="flagos")
    nested = torch.flagos.memory_stats_as_nested_dict()
    assert nested["allocated_bytes"]["all"]["current"] == torch.flagos.memory_allocated() >= held.nbytes
    summary = torch.flagos.memory_summary()
    assert "emulated" in summary and "allocated memory (all)" in summary
    assert torch.flagos.list_gpu_processes().startswith("flagos:0")


def test_a_memory_pool_names_the_blocks_allocated_in_it() -> None:
    pool = torch.flagos.MemPool()
    assert isinstance(pool, torch.flagos.MemPool) and pool.id != torch.flagos.MemPool().id
    with torch.flagos.use_mem_pool(pool):
        inside = torch.empty(MiB, dtype=torch.uint8, device="flagos")
    outside = torch.empty(MiB, dtype=torch.uint8, device="flagos")
    assert pool.use_count() == 1
    assert [s["address"] for s in pool.snapshot()] == [inside.data_ptr()]
    assert outside.data_ptr() not in [s["address"] for s in pool.snapshot()]
    del inside
    assert pool.use_count() == 0


def _training_step() -> torch.Tensor:
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).to("flagos")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss = model(torch.randn(16, 32, device="flagos")).square().mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return model[0].weight


def test_a_snapshot_of_a_training_step_loads_in_the_memory_visualiser(tmp_path) -> None:
    torch.flagos.memory._record_memory_history(max_entries=100_000, stacks="python")
    try:
        weight = _training_step()
        snapshot = torch.flagos.memory._snapshot()
        torch.flagos.memory._dump_snapshot(str(tmp_path / "step.pickle"))
    finally:
        torch.flagos.memory._record_memory_history(enabled=None)
    trace = snapshot["device_traces"][0]
    allocs = [e for e in trace if e["action"] == "alloc"]
    assert allocs and len(allocs) == len([e for e in trace if e["action"] == "segment_alloc"])
    assert any(f["name"] == "_training_step" for e in allocs for f in e["frames"]), "no stack names the step"
    assert weight.untyped_storage().data_ptr() in {s["address"] for s in snapshot["segments"]}
    # PyTorch's own tooling reads it: the text trace, the segment summary, the flamegraph input, the HTML page.
    text = _memory_viz.trace(snapshot)
    assert f"{len(trace)} entries" in text and "del " in text
    assert "total_allocated" in _memory_viz.segsum(snapshot)
    lines = _memory_viz.segments(snapshot, format_flamegraph=lambda lines: lines)
    assert "_training_step" in lines
    assert "snapshot.pickle" in _memory_viz.trace_plot(snapshot)
    with open(tmp_path / "step.pickle", "rb") as f:
        assert pickle.load(f)["device_traces"][0][: len(trace)] == trace[: len(trace)]


def test_an_out_of_memory_error_is_in_the_trace() -> None:
    torch.flagos.memory._record_memory_history(context=None, stacks="python")
    try:
        with pytest.raises(torch.OutOfMemoryError):
            torch.empty(1 << 50, dtype=torch.uint8, device="flagos")
        trace = torch.flagos.memory._snapshot()["device_traces"][0]
    finally:
        torch.flagos.memory._record_memory_history(enabled=None)
    assert trace[-1]["action"] == "oom" and trace[-1]["size"] == 1 << 50
    assert "raise OutOfMemoryError" in _memory_viz.trace({"segments": [], "device_traces": [trace]})


def test_bad_history_options_name_the_culprit() -> None:
    with pytest.raises(RuntimeError, match="enabled must be None, 'state' or 'all', got 'everything'"):
        torch.flagos.memory._record_memory_history(enabled="everything")
    with pytest.raises(TypeError, match="compile_context concern CUDA's allocator"):
        torch.flagos.memory._record_memory_history(compile_context=True)
