"""The qualification's device lock: checks share the device, a timing has it alone, and a worker waiting to time
is not starved by the checks that keep starting. The hang clock: a wait never counts towards an operator's
timeout, and an operator run again in a fresh worker is timed afresh."""

from __future__ import annotations

import queue
import threading
from pathlib import Path

import pytest

pytest.importorskip("torch")

from torch_fl.qualify import progress  # noqa: E402
from torch_fl.qualify.device_lock import DeviceLock  # noqa: E402

PATIENCE = 30  # seconds a step may take before the test fails instead of hanging


class Holder:
    """One worker in a thread with its own lock files open (flock locks belong to an open file, so two openings in
    one process exclude each other as two processes do): reports each wait and each hold, and holds until told."""

    def __init__(self, name: str, directory: Path, how: str, said: queue.Queue) -> None:
        self.release = threading.Event()
        lock = DeviceLock(directory, lambda event, seconds=None: said.put(f"{name} {event}"))

        def run() -> None:
            with getattr(lock, how)():
                said.put(f"{name} holds")
                assert self.release.wait(PATIENCE)
            lock.close()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def done(self) -> None:
        self.release.set()
        self.thread.join(PATIENCE)


def test_checks_share_the_device(tmp_path: Path) -> None:
    said: queue.Queue = queue.Queue()
    a = Holder("a", tmp_path, "shared", said)
    assert said.get(timeout=PATIENCE) == "a holds"
    b = Holder("b", tmp_path, "shared", said)
    assert said.get(timeout=PATIENCE) == "b holds"  # no wait: two checks run side by side
    a.done()
    b.done()


def test_a_timing_waits_for_the_checks_and_no_new_check_overtakes_it(tmp_path: Path) -> None:
    said: queue.Queue = queue.Queue()
    check = Holder("check", tmp_path, "shared", said)
    assert said.get(timeout=PATIENCE) == "check holds"
    timer = Holder("timer", tmp_path, "alone", said)
    assert said.get(timeout=PATIENCE) == "timer wait"
    late = Holder("late", tmp_path, "shared", said)
    assert said.get(timeout=PATIENCE) == "late wait"  # the turnstile: without it, it would hold beside the check
    check.done()
    assert [said.get(timeout=PATIENCE) for _ in range(2)] == ["timer waited", "timer holds"]
    timer.done()
    assert [said.get(timeout=PATIENCE) for _ in range(2)] == ["late waited", "late holds"]
    late.done()
    assert said.empty()


def test_a_wait_for_the_device_never_counts_as_hanging(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    clock = progress.Clock(timeout=10, tuning=60)
    events = [{"event": "start", "op": "mm"}, {"event": "sample", "op": "mm", "index": 0}]
    assert clock.hung(("w1", "mm"), progress.progress(events)) == ""
    events += [{"event": "wait", "op": "mm"}]
    assert clock.hung(("w1", "mm"), progress.progress(events)) == ""  # the parent sees the wait as it starts
    now[0] += 50  # a wait still running: not hung
    assert clock.hung(("w1", "mm"), progress.progress(events)) == ""
    events += [{"event": "waited", "op": "mm", "seconds": 50.0}]
    now[0] += 9
    assert clock.hung(("w1", "mm"), progress.progress(events)) == ""
    now[0] += 2  # 11 s of its own past its waits
    assert "hung for more than 10 s" in clock.hung(("w1", "mm"), progress.progress(events))


def test_progress_starts_over_with_each_operator() -> None:
    events = [
        {"event": "start", "op": "mm"},
        {"event": "wait", "op": "mm"},
        {"event": "waited", "op": "mm", "seconds": 3.0},
        {"event": "tune", "op": "mm", "index": 0},
        {"event": "tuned", "op": "mm", "index": 0, "seconds": 4.0},
        {"event": "done", "op": "mm"},
        {"event": "start", "op": "bmm"},
        {"event": "tune", "op": "bmm", "index": 0},
    ]
    p = progress.progress(events)
    assert (p.current, p.waited, p.tuned, p.tuning, p.waiting) == ("bmm", 0.0, 0.0, 1, 0)


def test_an_operator_run_again_in_a_fresh_worker_is_timed_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    clock = progress.Clock(timeout=10, tuning=60)
    running = progress.progress([{"event": "start", "op": "mul.Tensor"}])
    assert clock.hung(("w1", "mul.Tensor"), running) == ""
    now[0] += 9  # the first worker crashed here; the operator runs again, past the sample, in another one
    assert clock.hung(("w2", "mul.Tensor"), running) == ""
    now[0] += 9
    assert clock.hung(("w2", "mul.Tensor"), running) == ""
    assert clock.hung(("w1", "mul.Tensor"), running) != ""
