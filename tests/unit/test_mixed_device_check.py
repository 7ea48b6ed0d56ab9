"""The verdict comparison of build_tools/node/mixed_device_check.py: which (op, argument) pairs it counts where, and
that only an emulation accepting what the reference refuses fails it."""

from __future__ import annotations

from build_tools.node import mixed_device_check as check


def row(op: str, arg: str, verdict: str) -> dict:
    out = {"op": op, "arg": arg, "shape": [3], "verdict": verdict}
    return out if verdict == "accept" else {**out, "error": f"{op} refused {arg}"}


REFERENCE = [
    row("cat", "input[1]", "refuse"),
    row("add", "args[0]", "accept"),
    row("gather", "args[1]", "refuse"),
    row("expand_as", "input", "accept"),
    row("only_reference", "input", "refuse"),
    {"op": "broken", "skip": "all on the device: RuntimeError"},
]


def test_counts_each_pair_once_by_both_verdicts() -> None:
    emulation = [
        row("cat", "input[1]", "refuse"),
        row("add", "args[0]", "accept"),
        row("gather", "args[1]", "refuse"),
        row("expand_as", "input", "refuse"),
    ]
    report, ok = check.compare(REFERENCE, emulation, "cuda")
    assert ok, report
    assert "(op, argument on the host): 4 (ops: 4; only in cuda: 1, only in the emulation: 0)" in report
    assert "skipped ops: cuda 1, emulation 0" in report
    assert "both refuse: 2" in report and "both accept: 1" in report
    assert "cuda refuses, emulation accepts: 0" in report
    assert "cuda accepts, emulation refuses: 1\n  expand_as input [3]: expand_as refused input" in report


def test_an_emulation_accepting_what_the_reference_refuses_fails() -> None:
    emulation = [row("cat", "input[1]", "accept"), row("gather", "args[1]", "refuse")]
    report, ok = check.compare(REFERENCE, emulation, "cuda")
    assert not ok
    assert "cuda refuses, emulation accepts: 1\n  cat input[1] [3]: cat refused input[1]" in report
