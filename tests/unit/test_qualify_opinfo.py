"""torch_fl/qualify's OpInfo recording without a device: which OpInfos a resumed run's pending operators need,
and when the samples directory already holds them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

from torch_fl.qualify import opinfo, runner  # noqa: E402


def info(name: str) -> Any:
    from torch.testing._internal.common_methods_invocations import op_db

    return next(i for i in op_db if i.name == name)


@pytest.mark.parametrize(
    ("name", "ops", "named"),
    [
        ("mul", ["mul.Tensor"], True),
        ("mul", ["mul_.Tensor"], True),
        ("nn.functional.mse_loss", ["mse_loss"], True),
        ("nn.functional.max_pool2d", ["max_pool2d_with_indices"], True),
        ("index_put", ["_index_put_impl_"], True),
        ("add", ["mul.Tensor", "bmm"], False),
        ("nn.functional.linear", ["mm"], False),
    ],
)
def test_an_opinfo_is_named_after_the_operators_it_calls_directly(name: str, ops: list[str], named: bool) -> None:
    assert opinfo.named_after(info(name), ops) is named


def test_a_resumed_run_records_only_the_opinfos_of_its_pending_operators(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    specs: list[dict] = []

    def child(plan: runner.Plan, code: str, *args: str) -> dict:
        specs.append(json.loads(args[0]))
        return {"opinfos": 1, "samples": 2, "errors": 0}

    monkeypatch.setattr(runner, "_child", child)
    plan = runner.Plan(provider="demo", out=tmp_path, samples=tmp_path / "samples", echo=lambda line: None)
    plan.samples.mkdir()
    claimed = ["add.Tensor", "mul.Tensor", "bmm"]
    runner._record_opinfo(plan, claimed, claimed, resumed=False)  # a fresh run: the whole database
    assert [(s["ops"], s["named_only"]) for s in specs] == [(claimed, False)]
    stamp = json.loads((plan.samples / ".opinfo-recorded").read_text())
    assert stamp["ops"] == sorted(claimed) and stamp["samples"] == 2
    runner._record_opinfo(plan, claimed, ["bmm"], resumed=True)  # the same machine resumes: nothing to record
    assert len(specs) == 1
    (plan.samples / ".opinfo-recorded").unlink()  # a new machine with the events: only the pending operators'
    runner._record_opinfo(plan, claimed, ["bmm", "mul.Tensor"], resumed=True)
    assert [(s["ops"], s["named_only"]) for s in specs[1:]] == [(["bmm", "mul.Tensor"], True)]
    (plan.samples / ".opinfo-recorded").write_text('{"opinfos": 9, "samples": 9, "errors": 0}\n')
    runner._record_opinfo(plan, claimed, ["bmm"], resumed=True)  # an older stamp stands for every claimed operator
    assert len(specs) == 2
    (plan.samples / ".opinfo-recorded").unlink()
    runner._record_opinfo(plan, [*claimed, "addmv.out"], ["addmv.out"], resumed=True)
    assert specs[2]["ops"] == ["addmv.out", "addmv"]  # the out= operator borrows its functional twin's samples


@pytest.mark.parametrize(("queued", "chunk"), [(283, 10), (38, 3), (14, 1), (1, 1)])
def test_a_short_queue_is_spread_over_every_worker(queued: int, chunk: int, tmp_path: Path) -> None:
    plan = runner.Plan(provider="demo", out=tmp_path, samples=tmp_path, workers=14, chunk=10)
    assert runner._Pool(plan, tmp_path / "events.jsonl", 0.0)._chunk(queued) == chunk
