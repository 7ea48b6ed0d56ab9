"""Per-run figures of the A/B: each arm's µs over its runs and its ratios to the other arms, run against run.

Pure Python on the plain dicts the reports hold, shared by the node check and the tooling's harness.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any


def spread_pct(values: Sequence[float]) -> float:
    """(max - min) / mean across runs, in percent (0 for a single run)."""
    mean = statistics.fmean(values)
    return 0.0 if len(values) < 2 or mean == 0 else (max(values) - min(values)) / mean * 100


def summarize(values: Sequence[float]) -> dict[str, float]:
    return {
        "mean_us": statistics.fmean(values),
        "min_us": min(values),
        "max_us": max(values),
        "spread_pct": spread_pct(values),
    }


def ratios(num: Sequence[float] | None, den: Sequence[float] | None) -> list[float] | None:
    """Per-run ratios, run i against run i (both arms of one run share the machine's state)."""
    if not num or not den:
        return None
    return [a / b for a, b in zip(num, den, strict=True)]


def mean_or_none(values: Sequence[float] | None) -> float | None:
    return statistics.fmean(values) if values else None


def arm_entry(label: str, us: list[float] | None, reason: str | None, route: str | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"label": label, "available": reason is None, "reason": reason, "route": route, "us": us}
    if us:
        entry.update(summarize(us))
    return entry


def add_ratios(arms: dict[str, dict[str, Any]], plain: str, native: str) -> None:
    """Give every measured arm its per-run ratios against ``native`` and against ``plain``."""
    for entry in arms.values():
        for key, ref in (("vs_native", native), ("vs_plain", plain)):
            per_run = ratios(entry.get("us"), arms.get(ref, {}).get("us"))
            entry[key] = per_run
            entry[f"{key}_mean"] = mean_or_none(per_run)


def runs_text(values: Sequence[float] | None, fmt: str, suffix: str = "") -> str:
    """Runs separated by `` / `` (a dash when there are none)."""
    return " / ".join(format(v, fmt) + suffix for v in values) if values else "—"


def ab_table(ab: list[dict[str, Any]]) -> list[str]:
    """The printed A/B table: plain and native µs per run, native/plain, and every other arm against native."""
    if not ab:
        return ["(no A/B cases)"]
    others = [a for a in ab[0]["arms"] if a not in ("plain", "native")]
    header = f"{'case':32s} {'plain µs':>18s} {'native µs':>18s} {'native/plain':>16s}"
    header += "".join(f" {a + '/native':>16s}" for a in others)
    lines = [header]
    for c in ab:
        arms = c["arms"]
        plain, native = arms.get("plain", {}), arms.get("native", {})
        row = (
            f"{c['case']:32s} {runs_text(plain.get('us'), '.2f'):>18s} {runs_text(native.get('us'), '.2f'):>18s}"
            f" {runs_text(native.get('vs_plain'), '.2f', 'x'):>16s}"
        )
        for a in others:
            cell = runs_text(arms[a].get("vs_native"), ".2f", "x") if arms[a]["available"] else "unavailable"
            row += f" {cell:>16s}"
        lines.append(row)
    return lines
