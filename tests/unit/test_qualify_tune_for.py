"""--tune-for: an operator whose autotuning runs long is judged on its first samples, the dtypes taking turns,
and the report says how many samples of each dtype ran."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("torch")

from torch_fl.qualify import report, worker  # noqa: E402


def test_a_tuning_cut_leaves_every_dtype_judged_and_says_so() -> None:
    samples = [SimpleNamespace(dtype=d) for d in ["float32"] * 3 + ["bfloat16"] * 2 + ["float16"]]
    references = {i: object() for i in range(len(samples)) if i != 1}  # native refused sample 1
    assert worker.interleaved(references, samples) == [0, 3, 5, 2, 4]
    entry = {"verdict": "pass", "samples": 2, "cut": 5}
    assert report._dtype_verdict(entry) == "pass (2 of 7 samples)"
