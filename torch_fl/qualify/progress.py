"""How far a worker got, read from its events, and when its operator counts as hung.

An operator's time has three parts: its samples' first provider calls (autotuning: FlagGems' mm tunes for
minutes), counted up to the tuning budget; its waits for the shared device (device_lock.py: another worker was
timing an operator alone), never counted; and the rest, which may not pass the timeout.
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Progress:
    current: str | None = None  # the operator the worker is on
    sample: dict | None = None  # its last sample event
    tuned: float = 0.0  # seconds its finished first calls took
    tuning: int = 0  # the number of the first call running now (0: none)
    waited: float = 0.0  # seconds its finished waits for the device took
    waiting: int = 0  # the number of the wait running now (0: none)
    _opened: dict[str, int] = field(default_factory=lambda: {"tune": 0, "wait": 0})


def progress(events: list[dict[str, Any]]) -> Progress:
    p = Progress()
    for e in events:
        kind = e["event"]
        if kind == "start":
            p = Progress(current=e["op"])
        elif kind == "sample":
            p.sample = e
        elif kind == "tune":
            p._opened["tune"] += 1
            p.tuning = p._opened["tune"]
        elif kind == "tuned":
            p.tuned, p.tuning = p.tuned + e["seconds"], 0
        elif kind == "wait":
            p._opened["wait"] += 1
            p.waiting = p._opened["wait"]
        elif kind == "waited":
            p.waited, p.waiting = p.waited + e["seconds"], 0
        elif kind == "done":
            p.current = None
    return p


class Clock:
    """When an operator counts as hung: once its time in one worker, less its tuning (up to ``tuning`` seconds)
    and its waits for the device, passes ``timeout``. An operator run again in a fresh worker (past a crash) is
    timed afresh there: its key names the worker."""

    def __init__(self, timeout: float, tuning: float) -> None:
        self.timeout, self.tuning = timeout, tuning
        self.started: dict[Hashable, float] = {}
        self.seen: dict[tuple[Hashable, str, int], float] = {}  # (key, "tune" or "wait", its number) -> seen running

    def _running(self, key: Hashable, what: str, number: int, now: float) -> float:
        return now - self.seen.setdefault((key, what, number), now) if number else 0.0

    def hung(self, key: Hashable, p: Progress) -> str:
        """Why the operator of ``key`` (a worker and the operator it is on) counts as hung now, or "" while it
        does not."""
        now = time.monotonic()
        started = self.started.setdefault(key, now)
        tuned = p.tuned + self._running(key, "tune", p.tuning, now)
        spent = min(tuned, self.tuning)
        waited = p.waited + self._running(key, "wait", p.waiting, now)
        if now - started - spent - waited <= self.timeout:
            return ""
        if tuned > self.tuning:
            return (
                f"its first provider calls (autotuning) took more than the tuning budget of {self.tuning:.0f} s "
                f"(--tuning), and then {self.timeout:.0f} s more (--timeout)"
            )
        return f"the worker hung for more than {self.timeout:.0f} s beyond {spent:.0f} s of tuning"
