"""torch_fl/qualify/speed.py's choice of the samples it times: the largest real one, where the device's time
dominates, and the smallest, where a call's host cost shows."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch_fl.qualify.calls import Sample  # noqa: E402
from torch_fl.qualify.speed import chosen  # noqa: E402


def sample(numel: int, source: str) -> Sample:
    return Sample(op="sum.dim_IntList", args=(torch.zeros(numel), [0]), kwargs={}, source=source, dtype="float32")


def test_the_largest_and_the_smallest_real_sample_are_timed() -> None:
    real = [sample(n, "workload:llama") for n in (4096, 16, 1 << 20, 512)]
    opinfo = [sample(1 << 22, "opinfo:sum"), sample(1, "generated")]
    picked = chosen(opinfo + real)
    assert [s.args[0].numel() for s in picked] == [1 << 20, 16], "real samples first: the models' own shapes"


def test_without_real_samples_the_others_stand_in_and_one_sample_is_timed_once() -> None:
    opinfo = [sample(n, "opinfo:sum") for n in (8, 64, 2)]
    assert [s.args[0].numel() for s in chosen(opinfo)] == [64, 2]
    assert [s.args[0].numel() for s in chosen(opinfo[:1])] == [8]
    assert chosen([]) == []
