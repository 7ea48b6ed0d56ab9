"""What the model zoo's decoders need of reduce-overhead on a GPU vendor (build_tools/node/cuda_node.sh compile and
decode run this file there; the CPU emulation refuses reduce-overhead, so every test here is GPU-only): a
mixture-of-experts step on _grouped_mm records and replays as on cuda, and an int input that changes on every call
(a sliding-window cache's host-counted length) is named as the reason no graph replays."""

from __future__ import annotations

import pytest
import torch

import torch_fl
from torch_fl.compile import graph_runner

ON_GPU = torch_fl.accelerator() in ("cuda", "dcu")
gpu_only = pytest.mark.skipif(not ON_GPU, reason="flagos graphs under reduce-overhead run on CUDA/DCU")


def _grouped_mm_on_device() -> bool:
    """CUDA's own _grouped_mm kernel (bfloat16, sm90 and sm100): the one a graph can hold."""
    return ON_GPU and torch.cuda.is_available() and torch.cuda.get_device_capability()[0] in (9, 10)


def _experts(x: torch.Tensor, weights: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    # transformers' grouped_mm experts: tokens sorted by expert, group ends as int32 offsets on the device
    return torch._grouped_mm(x, weights, torch.cumsum(counts, 0, dtype=torch.int32))


@pytest.mark.skipif(not _grouped_mm_on_device(), reason="CUDA's _grouped_mm kernel: bfloat16 on sm90/sm100")
def test_grouped_mm_captures_in_a_flagos_graph():
    x = torch.randn(16, 64, dtype=torch.bfloat16).to("flagos")
    w = torch.randn(4, 64, 32, dtype=torch.bfloat16).to("flagos")
    counts = torch.tensor([3, 5, 0, 8]).to("flagos")
    g = torch.flagos.FlagosGraph()
    with torch.flagos.graph(g):
        out = _experts(x, w, counts)
    x.copy_(torch.randn(16, 64, dtype=torch.bfloat16).to("flagos"))
    g.replay()
    torch.testing.assert_close(out, _experts(x, w, counts))


@gpu_only
@pytest.mark.skipif(not _grouped_mm_on_device(), reason="CUDA's _grouped_mm kernel: bfloat16 on sm90/sm100")
def test_a_compiled_experts_step_replays(runners):
    w = torch.randn(4, 64, 32, dtype=torch.bfloat16).to("flagos")
    compiled = torch.compile(lambda x, counts: _experts(x, w, counts).relu(), mode="reduce-overhead")
    for _ in range(5):
        x = torch.randn(16, 64, dtype=torch.bfloat16).to("flagos")
        counts = torch.tensor([3, 5, 0, 8]).to("flagos")
        torch.testing.assert_close(compiled(x, counts), _experts(x, w, counts).relu())
    assert runners and all(r.skipped is None for r in runners), [r.skipped for r in runners]
    assert any(isinstance(rec, graph_runner.Recording) for r in runners for rec in r.recordings.values())


class _HostCounted:
    """A cache counting its length on the host, as transformers' sliding-window layer does."""

    def __init__(self) -> None:
        self.length = 0


@gpu_only
def test_an_int_new_on_every_call_is_named_and_a_recurring_one_replays(runners):
    cache = _HostCounted()

    def step(x, cache):
        cache.length += 1
        return x * cache.length  # after the first recompile the length is a graph input (automatic dynamic)

    compiled = torch.compile(step, mode="reduce-overhead", fullgraph=True)
    x = torch.randn(8).to("flagos")
    for _ in range(6):
        compiled(x, cache)
    named = [r.reason() for r in runners if r.reason()]
    assert named and "brought a new key" in named[-1], [r.reason() for r in runners]
    for _ in range(3):  # the same lengths again: recorded on their second call, then replayed
        cache.length = 6
        for _ in range(4):
            torch.testing.assert_close(compiled(x, cache), x * cache.length)
    assert any(isinstance(rec, graph_runner.Recording) for r in runners for rec in r.recordings.values())
