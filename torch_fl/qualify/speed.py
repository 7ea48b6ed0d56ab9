"""Provider time against native time for an operator that passed, measured in the worker's process.

Up to two passing samples, real workloads' first: the largest, where the device's time dominates, and the
smallest, where a call's host cost shows (a model calls both; FlagGems' ``sum`` costs about 100 µs of host time a
call against native's 14, which its largest sample hides). They run as in-process pairs: three arms (native,
provider, native again: the A/A control) take turns, the order rotated each round, and each arm's figure is the
median over the rounds.
"""

from __future__ import annotations

import statistics
import time as clock
from collections.abc import Callable
from typing import Any

from . import calls

ARMS = ("native", "provider", "native again")


def _size(sample: Any) -> int:
    from torch.utils._pytree import tree_flatten

    return sum(x.numel() for x in tree_flatten((sample.args, sample.kwargs))[0] if hasattr(x, "numel"))


def chosen(passing: list[Any]) -> list[Any]:
    """The largest and the smallest sample of the real ones (or of all where none is real); one where they agree."""
    real = [s for s in passing if not s.source.startswith(("opinfo:", "generated"))]
    ranked = sorted(real or passing, key=_size, reverse=True)
    return ranked[:1] + ranked[-1:] if len(ranked) > 1 else ranked


def measure(
    op: str,
    func: Any,
    passing: list[Any],
    route: Callable[[bool], None],
    sync: Callable[[], None],
    rounds: int,
) -> list[dict[str, Any]]:
    """One record per timed sample: native µs per call, provider/native and the A/A, as the speed event holds
    them. ``route(True)`` sends ``op`` to the provider, ``route(False)`` native."""
    out = []
    picked = chosen(passing)
    for at, sample in zip(("largest", "smallest") if len(picked) > 1 else ("only",), picked, strict=True):
        args, kwargs = calls.moved((sample.args, sample.kwargs), "flagos")
        times: dict[str, list[float]] = {a: [] for a in ARMS}
        reps = _reps(func, args, kwargs, sync)
        for r in range(rounds):
            for arm in ARMS[r % 3 :] + ARMS[: r % 3]:
                route(arm == "provider")
                func(*args, **kwargs)  # warm: the replay records its plan here
                sync()
                start = clock.perf_counter()
                for _ in range(reps):
                    func(*args, **kwargs)
                sync()
                times[arm].append((clock.perf_counter() - start) / reps)
        route(False)
        native = statistics.median(times["native"])
        out.append(
            {
                "sample": sample.describe()[:300],
                "source": sample.source,
                "at": at,
                "native_us": native * 1e6,
                "ratio": statistics.median(times["provider"]) / native,
                "aa": statistics.median(times["native again"]) / native,
                "reps": reps,
                "rounds": rounds,
            }
        )
    return out


def _reps(func: Any, args: tuple, kwargs: dict, sync: Callable[[], None]) -> int:
    """Calls per timed stretch: enough for about 2 ms, at most 200."""
    sync()
    start = clock.perf_counter()
    for _ in range(3):
        func(*args, **kwargs)
    sync()
    per_call = max((clock.perf_counter() - start) / 3, 1e-6)
    return max(3, min(200, int(2e-3 / per_call)))
