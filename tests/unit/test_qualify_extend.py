"""torch_fl/qualify/extend.py and the report: a run that extends an earlier report carries the operators it
finished in every asked dtype, runs the rest, and its report says which entries came from where."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

from torch_fl.qualify import extend, report, runner  # noqa: E402

DTYPES = ["float32", "float16", "bool"]
META = {"provider": "demo", "version": "1.0", "accelerator": "cpu", "torch": "2.13.0+cpu"}


def judged(verdict: str) -> dict[str, Any]:
    return {"verdict": verdict, "samples": 2, "bitwise": verdict == "pass"}


def base_report() -> dict[str, Any]:
    return {
        "key": report.key(META),
        "torch_fl": "0.1.0+old",
        "input_classes": ["strided", "0dim", "broadcast", "mixed"],
        "ops": {
            "neg": {  # every dtype judged or unsampleable: final
                "verdict": "pass",
                "dtypes": {"float32": judged("pass"), "float16": judged("pass")},
                "no_sample": {"bool": "native refuses bool"},
                "tuning_s": 4.0,
            },
            "exp": {"verdict": "pass", "dtypes": {"float32": judged("pass")}},  # an older run's dtypes: runs again
            "mm": {"verdict": "timeout", "dtypes": {"float32": judged("timeout")}},
            "cat": {"verdict": "untested"},
            "pad": {"verdict": "no sample", "dtypes": {}, "no_sample": {"float32": "x"}},
            "sin": {"verdict": "pending"},
            "cos": {"verdict": "unsupported", "dtypes": {}, "detail": "the route resolver passed the provider over"},
            "sqrt": {"verdict": "crash", "dtypes": {"float32": judged("crash")}},  # a crash ends the run: final
            "ceil": {  # an entry a merged report kept from an older run
                "verdict": "pass",
                "dtypes": {d: judged("pass") for d in DTYPES},
                "earlier_run": "an older run's",
            },
            "abs": {  # a failure is final too, once it covers the dtypes
                "verdict": "wrong values",
                "dtypes": {"float32": judged("wrong values"), "float16": judged("pass"), "bool": judged("pass")},
            },
        },
    }


def test_only_final_entries_covering_every_asked_dtype_are_carried() -> None:
    base = base_report()
    got = extend.carried(base, sorted(base["ops"]), DTYPES)
    assert sorted(got) == ["abs", "cos", "neg", "sqrt"]
    # a run that asks for fewer dtypes carries the older entry as well
    assert "exp" in extend.carried(base, ["exp"], ["float32"])


def test_a_report_of_another_key_is_refused_with_the_way_out(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(base_report()))
    assert extend.read(path, report.key(META))["torch_fl"] == "0.1.0+old"
    with pytest.raises(ValueError, match=r"demo-1.0-cpu-torch2.13.*demo-2.0-cpu-torch2.13.*without --extend"):
        extend.read(path, report.key({**META, "version": "2.0"}))
    path.write_text("{}")
    with pytest.raises(ValueError, match="not a qualification report"):
        extend.read(path, report.key(META))


def test_seeding_is_idempotent_and_the_report_marks_carried_entries(tmp_path: Path) -> None:
    base, events = base_report(), tmp_path / "events.jsonl"
    ops = sorted(base["ops"])
    records = extend.carried(base, ops, DTYPES)
    assert extend.seed(events, base, records, set()) == 4
    done = runner.finished(runner.read_events(events))
    assert done == {"abs", "cos", "neg", "sqrt"}
    assert extend.seed(events, base, records, done) == 0  # a second start of the same run appends nothing
    # this run measures abs again (say, after --extend and a fresh worker) and qualifies exp
    with open(events, "a", encoding="utf-8") as fh:
        for op in ("abs", "exp"):
            fh.write(json.dumps({"event": "start", "op": op}) + "\n")
            fh.write(json.dumps({"event": "tuned", "op": op, "index": 0, "seconds": 1.5}) + "\n")
            fh.write(json.dumps({"event": "verdict", "op": op, "dtypes": {"float32": judged("pass")}}) + "\n")
    rep = report.build({**META, "qualified_ops": ops, "dtypes": DTYPES}, runner.read_events(events))
    assert rep["carried"] == 3  # neg, cos and sqrt; abs is this run's now
    assert rep["ops"]["neg"]["carried_from"] == "0.1.0+old"
    assert rep["ops"]["neg"]["no_sample"] == {"bool": "native refuses bool"}
    assert "carried_from" not in rep["ops"]["abs"] and rep["ops"]["abs"]["verdict"] == "pass"
    assert rep["ops"]["mm"]["verdict"] == "pending"  # open in the base, not reached by this run
    assert rep["tuning_s"] == pytest.approx(4.0 + 1.5 + 1.5)
    assert "3 operators' entries are carried" in report.markdown(rep)


def test_retime_opens_the_entries_timed_by_an_older_method() -> None:
    def timed(**how: Any) -> dict[str, Any]:
        return {"verdict": "pass", "dtypes": {d: judged("pass") for d in DTYPES},
                "speed": {"ratio": 1.0, "aa": 1.0, "samples": [{"ratio": 1.0, "aa": 1.0, **how}]}}  # fmt: skip

    base = {
        "key": report.key(META),
        "ops": {
            "beside": timed(alone=False, at="largest"),  # taken beside other workers' kernels
            "largest": timed(alone=True),  # alone, but at the two largest samples only
            "now": timed(alone=True, at="smallest"),
            "wrong": {"verdict": "wrong values", "dtypes": {d: judged("wrong values") for d in DTYPES}},
        },
    }
    ops = sorted(base["ops"])
    assert sorted(extend.carried(base, ops, DTYPES)) == ops
    assert sorted(extend.carried(base, ops, DTYPES, retime=True)) == ["now", "wrong"]  # a failure has no timing


def test_an_entry_being_retimed_stands_in_the_report_until_the_run_finishes_it(tmp_path: Path) -> None:
    old = {"verdict": "pass", "dtypes": {d: judged("pass") for d in DTYPES},
           "speed": {"ratio": 1.2, "aa": 1.0, "samples": [{"ratio": 1.2, "aa": 1.0, "alone": False}]}}  # fmt: skip
    base, events = {"key": report.key(META), "torch_fl": "0.1.0+old", "ops": {"neg": old, "exp": old}}, tmp_path / "e"
    ops = sorted(base["ops"])
    assert extend.carried(base, ops, DTYPES, retime=True) == {}
    assert extend.seed(events, base, extend.carried(base, ops, DTYPES), set(), "standing") == 2
    assert runner.finished(runner.read_events(events)) == set(), "both run again"
    assert extend.seed(events, base, extend.carried(base, ops, DTYPES), {"neg", "exp"}, "standing") == 0
    # the run finishes neg, starts exp and is cut short (its budget): exp keeps its old entry, not `pending`
    with open(events, "a", encoding="utf-8") as fh:
        verdict = {"event": "verdict", "op": "neg", "dtypes": {"float32": judged("pass")}}
        for e in ({"event": "start", "op": "neg"}, verdict, {"event": "start", "op": "exp"}):
            fh.write(json.dumps(e) + "\n")
    rep = report.build({**META, "qualified_ops": ops, "dtypes": DTYPES}, runner.read_events(events))
    assert rep["ops"]["exp"]["verdict"] == "pass" and rep["ops"]["exp"]["carried_from"] == "0.1.0+old"
    assert "carried_from" not in rep["ops"]["neg"] and rep["carried"] == 1


def test_input_classes_new_since_the_report_open_the_entries_a_crash_shaped() -> None:
    """A report of a run that sorted samples into fewer input classes (one that names none had the first three):
    its crash entries left samples uncalled as like the crash by those classes, so they run again; an entry whose
    failures were no crash stands. A run cut short still writes them as they stood."""
    crash_in_one_dtype = {
        "verdict": "pass except",
        "dtypes": {
            "float32": {**judged("pass except"), "except": ["broadcast"], "failure": {"verdict": "crash"}},
            "float16": judged("pass"),
            "bool": judged("pass"),
        },
    }
    base = base_report()
    del base["input_classes"]
    base["ops"]["mul"] = crash_in_one_dtype
    assert extend.new_classes(base) == ("mixed",)
    assert extend.new_classes({**base, "input_classes": ["strided", "0dim", "broadcast", "mixed"]}) == ()
    ops = sorted(base["ops"])
    assert sorted(extend.carried(base, ops, DTYPES)) == ["abs", "cos", "neg"]  # sqrt and mul run again
    assert sorted(extend.carried(base, ops, DTYPES, renew=False)) == ["abs", "cos", "mul", "neg", "sqrt"]


def test_operators_named_again_run_again_though_final() -> None:
    base = base_report()
    ops = sorted(base["ops"])
    got = extend.carried(base, ops, DTYPES, again=["neg", "sin"])  # sin is open anyway
    assert sorted(got) == ["abs", "cos", "sqrt"]
    # a run cut short still writes neg as the report had it
    assert "neg" in extend.carried(base, ops, DTYPES, renew=False, again=["neg"])
