"""Finer verdicts (torch_fl/qualify/verdict.py ``finer``): a sample's input classes, and when the failures of an
(op, dtype) that all fall in some class make it "pass except" that class."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch_fl.qualify import verdict  # noqa: E402
from torch_fl.qualify.calls import input_classes  # noqa: E402

PASS, WRONG, EXCEPT = verdict.PASS, verdict.WRONG_VALUES, verdict.PASS_EXCEPT


def test_a_sample_falls_in_the_classes_of_its_tensor_arguments() -> None:
    x = torch.ones(4, 6)
    assert input_classes((x, x.clone()), {}) == ()
    assert input_classes((x.t(), x.t().clone()), {}) == ("strided",)
    assert input_classes((x, torch.tensor(2.0)), {}) == ("0dim", "broadcast")
    assert input_classes((x, x[:, :1]), {}) == ("strided", "broadcast")
    assert input_classes(([x, x[:2]],), {}) == ("broadcast",)  # in lists too
    assert input_classes((x,), {"out": torch.ones(6, 4).t()}) == ("strided",)  # out= is an argument too
    assert input_classes((x, 2.0), {}) == ()  # a number is no tensor


def test_tensors_of_two_dtypes_are_mixed_unless_one_is_0dim() -> None:
    x = torch.ones(4, 6, dtype=torch.bfloat16)
    assert input_classes((x, torch.ones(4, 6)), {}) == ("mixed",)
    assert input_classes((x.t(), torch.ones(1, 4)), {}) == ("strided", "broadcast", "mixed")
    assert input_classes(([x, torch.ones(4, 6, dtype=torch.int64)],), {}) == ("mixed",)  # in lists too
    # a 0-dim operand (a Python number torch wrapped, as a recorded sample runs it) is the 0dim class's alone
    assert input_classes((x, torch.tensor(2.0, dtype=torch.float64)), {}) == ("0dim", "broadcast")


def test_failures_all_in_one_class_pass_except_that_class() -> None:
    outcomes = [(PASS, ())] * 3 + [(WRONG, ("strided",)), (PASS, ("strided",)), (WRONG, ("strided", "0dim"))]
    assert verdict.finer(outcomes) == (EXCEPT, ("strided",))


def test_the_fewest_classes_that_explain_every_failure_win_then_the_most_served() -> None:
    outcomes = [(PASS, ())] * 3 + [(PASS, ("broadcast",))] * 2 + [(WRONG, ("0dim", "broadcast"))]
    # 0dim alone explains it and leaves the broadcast samples served: 5 served, against 3 for broadcast
    assert verdict.finer(outcomes) == (EXCEPT, ("0dim",))
    two = [(PASS, ())] * 3 + [(WRONG, ("strided",)), (WRONG, ("0dim",))]
    assert verdict.finer(two) == (EXCEPT, ("strided", "0dim"))


def test_a_crash_skipped_by_a_rerun_is_explained_by_its_class() -> None:
    """A crash reaches the outcomes only as a sample an earlier worker crashed on and the rerun skipped, after every
    other sample of the operator ran (qualify/runner.py): its class explains it as it does wrong values."""
    assert verdict.finer([(PASS, ())] * 3 + [(verdict.CRASH, ("broadcast",))]) == (EXCEPT, ("broadcast",))
    assert verdict.finer([(PASS, ())] * 3 + [(verdict.CRASH, ())]) == (verdict.CRASH, ())


@pytest.mark.parametrize(
    "outcomes",
    [
        [(PASS, ())] * 3 + [(WRONG, ())],  # a failure outside every class
        [(PASS, ())] * 2 + [(WRONG, ("strided",))],  # too few served samples pass to trust the class
        [(PASS, ())] * 3 + [(verdict.TIMEOUT, ("broadcast",))],  # a hang ends the run: later samples never ran
    ],
)
def test_unexplained_failures_keep_their_verdict(outcomes: list) -> None:
    judged, excepted = verdict.finer(outcomes)
    assert excepted == () and judged == verdict.worst([v for v, _ in outcomes])


def test_all_passing_is_a_plain_pass() -> None:
    assert verdict.finer([(PASS, ("strided",)), (PASS, ())]) == (PASS, ())
    assert verdict.ORDER.index(EXCEPT) == verdict.ORDER.index(PASS) - 1  # worse than pass, better than any failure
