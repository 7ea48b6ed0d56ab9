"""The replay cache of the provider routes: FlagGems' Triton launches replayed from C++.

A provider call costs its Python work (argument checks, type promotion, launcher glue) on every call, often ten
times what its kernel costs. For a provider that opts in (``Provider.replay``; FlagGems does), the router keys each
call by its operator, argument metadata and scalar values. The first calls of a key run in Python while the
recorder (``_record``) watches what they do on the device; two recordings that agree become a plan, and every
later call of that key runs the plan from C++ (``csrc/replay``): the same allocations, copies and kernels with
the new pointers, on the current stream, without Python. ``FLAGOS_LOG=dispatch`` says ``add.Tensor ->
flaggems/replay`` for a replayed call and ``-> flaggems`` for one that ran in Python.

What is never replayed, by construction (the recorder refuses the key, and its calls stay on the Python path):
an op with a generator argument; a call that runs any aten op besides allocating, filling fresh memory, making
views and copying between arguments and its own allocations (``.contiguous()``, ``.to(dtype)``, ``copy_``: a host
read such as ``.item()`` or a compute op is refused, and data-dependent host logic needs one of those); a copy from
or into other memory; a kernel pointer into memory that is neither an argument nor allocated by the call (a buffer
kept between calls); a result that is neither an argument nor allocated by the call; a launch on another stream,
with cluster, cooperative or PDL attributes, scratch memory, tensor descriptors or a launch hook installed; launches
that differ between two calls (random seeds, a tuner that has not settled). ``stats()`` lists the reasons per op.

Settings: ``FLAGOS_FLAGGEMS_REPLAY=0`` turns it off, ``FLAGOS_FLAGGEMS_VERIFY=1`` runs every replayed call through
the provider as well and fails on any bitwise difference, ``FLAGOS_REPLAY_CACHE_SIZE`` bounds the keys kept (least
recently used dropped first), ``FLAGOS_LOG=replay`` prints the statistics at exit.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .. import _core
from ._record import launch, record_call

__all__ = ["clear", "configure", "launch", "print_stats", "record_call", "settings", "stats"]


def configure(*, enabled: bool | None = None, verify: bool | None = None, capacity: int | None = None) -> None:
    """Change the replay settings of this process (None keeps a setting); takes effect on the next call."""
    cur_enabled, cur_verify, cur_capacity = _core.replay_settings()
    if capacity is not None and capacity < 1:
        raise ValueError(f"replay cache capacity must be a positive number of keys, got {capacity}")
    _core.replay_configure(
        cur_enabled if enabled is None else bool(enabled),
        cur_verify if verify is None else bool(verify),
        cur_capacity if capacity is None else int(capacity),
    )


def settings() -> dict[str, object]:
    enabled, verify, capacity = _core.replay_settings()
    return {"enabled": enabled, "verify": verify, "capacity": capacity}


def clear() -> None:
    """Drop every key, plan and statistic (the next calls record again)."""
    _core.replay_clear()


def stats() -> list[dict[str, object]]:
    """Per operator: hits (replayed calls), recordings, refused_calls, unkeyed_calls, verified, evictions, the
    keys now in the cache (ready_keys, refused_keys, pending_keys) and the reasons keys were refused."""
    return list(_core.replay_stats())


def format_stats(rows: Sequence[dict[str, object]] | None = None) -> str:
    rows = stats() if rows is None else rows
    if not rows:
        return "[flagos replay] no provider call went through the replay cache"
    head = ("op", "hits", "recordings", "refused", "unkeyed", "verified", "ready", "refused keys")
    table = [head] + [
        (
            str(r["op"]),
            *(
                str(r[k])
                for k in (
                    "hits",
                    "recordings",
                    "refused_calls",
                    "unkeyed_calls",
                    "verified",
                    "ready_keys",
                    "refused_keys",
                )
            ),
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table]
    for r in rows:
        for why, n in dict(r["reasons"]).items():
            lines.append(f"  {r['op']}: {n} x {why}")
    return "\n".join(f"[flagos replay] {line}" for line in lines)


def print_stats() -> None:
    print(format_stats(), file=sys.stderr)
