"""The router's host cost per call (build_tools/bench/harness/router_cost.py), a tiny run on the emulation: every arm
timed, the A/A present, and the router's phases found under the path each op takes (the fast path for the ops
with a typed entry, the convolution hooks' among them)."""

from __future__ import annotations

import os

import pytest
from harness import router_cost

pytestmark = pytest.mark.skipif(
    os.environ.get("FLAGOS_ACCELERATOR", "cpu") != "cpu", reason="the in-process pair needs the emulation"
)


def test_each_op_is_timed_in_three_arms_with_its_router_phases():
    results = {r["op"]: r for r in router_cost.measure(["convolution_backward_overrideable", "relu"], 2, 5)}
    for r in results.values():
        assert set(r["us"]) == {"flagos", "plain", "plain-again"} and min(r["us"].values()) > 0
        assert r["ratio"] > 0 and r["aa"] > 0
    (conv,) = results["convolution_backward_overrideable"]["router"]
    assert (conv["op"], conv["path"]) == ("convolution_backward_overrideable", "fast") and min(conv["us"]) >= 0
    (relu,) = results["relu"]["router"]
    assert (relu["op"], relu["path"]) == ("relu", "fast") and relu["us"][1] > 0
    text = router_cost.table(list(results.values()))
    assert "convolution_backward_overrideable fast:" in text and "A/A" in text


def test_the_step_splits_forward_and_backward():
    step = router_cost.measure_step(2, 2)
    assert set(step) == {"forward", "backward", "step"}
    # the whole step and its forward are each timed per arm; their order is a timing, left to the benchmark (two
    # rounds of two steps on a busy host once put a step under its own forward)
    for part in ("forward", "step"):
        assert set(step[part]["us"]) == {"flagos", "plain", "plain-again"}
        assert min(step[part]["us"].values()) > 0 and step[part]["ratio"] > 0 and step[part]["aa"] > 0
    assert "backward" in router_cost.step_table(step)


def test_the_decode_op_mix_and_token_are_timed_with_their_a_a():
    from harness import decode_ops

    ops = ["view", "neg", "index_copy_", "_to_copy"]
    assert set(ops) <= set(decode_ops.DECODE_OPS)
    results = {r["op"]: r for r in router_cost.measure(ops, 2, 5)}
    for r in results.values():
        assert r["ratio_q"][0] <= r["ratio"] <= r["ratio_q"][2] and r["aa_q"][0] <= r["aa"] <= r["aa_q"][2]
    assert results["neg"]["router"][0]["path"] == "fast"
    token = router_cost.measure_decode(2, 1, layers=1)
    assert min(token["us"].values()) > 0 and token["router_calls"] > 0
    assert "A/A" in router_cost.decode_table(token)


def test_every_decode_op_has_a_case():
    import torch
    from harness import decode_ops

    assert set(decode_ops.cases(torch)) == set(decode_ops.DECODE_OPS)


def test_a_gpu_node_refuses_the_step_and_says_how_to_run(monkeypatch, capsys):
    # plain cuda's autograd cannot run in a process that loaded torch_fl: the single ops may, the step may not
    monkeypatch.setenv("FLAGOS_ACCELERATOR", "cuda")
    with pytest.raises(SystemExit) as exit_:
        router_cost.main(["--ops", "none", "--steps", "3"])
    assert exit_.value.code == 2
    assert "pass --steps 0 on a GPU node" in capsys.readouterr().err
