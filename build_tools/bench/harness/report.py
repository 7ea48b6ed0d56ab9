"""Turn raw per-run timings into bench.json's summary, the project's goals, a comparison, a gate and the printed
table; markdown.py writes bench.md from the same dicts.

Pure Python (no torch, no matplotlib): everything here works on the plain dicts bench.json holds,
so a saved report can be re-rendered or compared without measuring again.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from torch_fl.bench import stats

SCHEMA = 1
# The acceptance goals: flagos native per call <= this many times the plain vendor device. Emulation
# adds the host-side re-tagging to a ~1 µs CPU kernel; on a GPU it must hide behind the launch.
GOAL_RATIO = {"cpu": 1.5, "cuda": 1.10, "dcu": 1.10}


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


# ---- building the summary ---------------------------------------------------------------------------


def _paired_arm(label: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One flagos arm of one paired case over its runs: µs and ratio to plain per pair, medians and range."""
    if "reason" in runs[0]:
        return {"label": label, "available": False, "reason": runs[0]["reason"], "route": None}
    ratios_all = [r for run in runs for r in run["ratios"]]
    return {
        "label": label,
        "available": True,
        "reason": None,
        "route": runs[0].get("route"),
        "us_median": statistics.median(u for run in runs for u in run["us"]),
        "ratio_median": statistics.median(ratios_all),
        "ratio_min": min(ratios_all),
        "ratio_max": max(ratios_all),
        "run_medians": [statistics.median(run["ratios"]) for run in runs],
        "pairs": len(ratios_all),
        "runs": [{"us": run["us"], "ratios": run["ratios"]} for run in runs],
    }


def paired_entry(case: str, runs: list[dict[str, Any]], labels: dict[str, str] | None = None) -> dict[str, Any]:
    """One case of the paired measurement: per flagos arm every pair's ratio to plain, the median over all pairs,
    the range and each run's median; the native arm's figures also at the case's level, where readers from before
    the other arms look for them."""
    labels = labels or {}
    arms = {
        arm: _paired_arm(labels.get(arm, f"flagos {arm}"), [run["arms"][arm] for run in runs])
        for arm in runs[0]["arms"]
    }
    entry: dict[str, Any] = {
        "case": case,
        "pairs": sum(len(run["plain_us"]) for run in runs),
        "plain_us_median": statistics.median(u for run in runs for u in run["plain_us"]),
    }
    native = arms.get("native", {})
    if native.get("available"):
        entry.update({k: native[k] for k in ("ratio_median", "ratio_min", "ratio_max", "run_medians")})
        entry["flagos_us_median"] = native["us_median"]
    entry["runs"] = [
        {
            "plain_us": run["plain_us"],
            **(
                {"flagos_us": run["arms"]["native"]["us"], "ratios": run["arms"]["native"]["ratios"]}
                if native.get("available")
                else {}
            ),
        }
        for run in runs
    ]
    entry["arms"] = arms
    return entry


def overhead_entry(op: str, kind: str, note: str, runs: list[dict[str, Any]], plain_label: str) -> dict[str, Any]:
    """One overhead op over its runs: median µs per arm, flagos minus plain, and the pairs' ratios."""
    plain = [u for run in runs for u in run["plain_us"]]
    flagos = [u for run in runs for u in run["flagos_us"]]
    pair_ratios = [f / p for f, p in zip(flagos, plain, strict=True)]
    fresh = [u for run in runs for u in run.get("flagos_fresh_us", [])]  # absent from reports before alias reuse
    return {
        "op": op,
        "kind": kind,
        "note": note,
        "plain_label": plain_label,
        "plain_us_median": statistics.median(plain),
        "flagos_us_median": statistics.median(flagos),
        "overhead_us": statistics.median(f - p for f, p in zip(flagos, plain, strict=True)),
        "fresh_overhead_us": (statistics.median(f - p for f, p in zip(fresh, plain, strict=True)) if fresh else None),
        "ratio_median": statistics.median(pair_ratios),
        "ratio_min": min(pair_ratios),
        "ratio_max": max(pair_ratios),
        "pairs": len(pair_ratios),
        "routes": sorted({f"{o} -> {r}" for run in runs for o, r in run["logged"]}),
        "runs": [{k: run[k] for k in ("plain_us", "flagos_us", "flagos_fresh_us") if k in run} for run in runs],
    }


def _round_ratios(rounds: list[dict[str, list[float]]], arm: str) -> list[float]:
    """Per round, the arm's median step over plain's median step in the same round."""
    return [statistics.median(r[arm]) / statistics.median(r["plain"]) for r in rounds]


def step_set_summary(rounds: list[dict[str, list[float]]]) -> dict[str, dict[str, float]]:
    """One process set: per arm its median step (ms) and the median over rounds of its ratio to plain."""
    return {
        arm: {
            "ms": statistics.median(t for r in rounds for t in r[arm]),
            "vs_plain": statistics.median(_round_ratios(rounds, arm)),
        }
        for arm in rounds[0]
    }


def step_entry(d_model: int, labels: dict[str, str], sets: list[dict[str, Any]]) -> dict[str, Any]:
    """One d_model of the training step from its lockstep sets (run.measure_step): per arm the median step, the
    ratio to plain taken round by round (median over every round of every set) and the per-set medians."""
    out: dict[str, Any] = {
        "d_model": d_model,
        "sets": len(sets),
        "rounds": sum(len(s["rounds"]) for s in sets),
        "arms": {},
    }
    summaries = [step_set_summary(s["rounds"]) for s in sets]
    for arm, label in labels.items():
        routes: dict[str, int] = {}
        for _, route in sets[0]["info"][arm]["logged"]:
            routes[route] = routes.get(route, 0) + 1
        per_set_ms = [summary[arm]["ms"] for summary in summaries]
        per_set_ratio = [summary[arm]["vs_plain"] for summary in summaries]
        out["arms"][arm] = {
            "label": label,
            "ms": per_set_ms,
            "ms_median": statistics.median(t for s in sets for r in s["rounds"] for t in r[arm]),
            "ms_min": min(per_set_ms),
            "ms_max": max(per_set_ms),
            "routed_calls": routes,
            "vs_plain": statistics.median(x for s in sets for x in _round_ratios(s["rounds"], arm)),
            "vs_plain_sets": per_set_ratio,
        }
    return out


def paired_acceptance(paired: dict[str, Any] | None, goal: float) -> dict[str, Any] | None:
    """The goal on the paired native / plain medians (None when no case paired the native arm)."""
    measured = [c for c in (paired or {}).get("cases", []) if c.get("ratio_median") is not None]
    if not measured:
        return None
    worst = max(measured, key=lambda c: c["ratio_median"])
    return {
        "goal": goal,
        "worst": worst["ratio_median"],
        "worst_case": worst["case"],
        "met": all(c["ratio_median"] <= goal for c in measured),
    }


def goal_for(vendor: str) -> float:
    return GOAL_RATIO.get(vendor, max(GOAL_RATIO.values()))


def acceptance(ab: list[dict[str, Any]], goal: float) -> dict[str, Any]:
    """The device issue's check, run by run: every case's flagos native / plain ratio within ``goal``."""
    per_case = {c["case"]: c["arms"]["native"]["vs_plain"] for c in ab if c["arms"].get("native", {}).get("vs_plain")}
    per_run = []
    for run in range(min((len(r) for r in per_case.values()), default=0)):
        worst_case = max(per_case, key=lambda name: per_case[name][run])
        worst = per_case[worst_case][run]
        per_run.append({"run": run + 1, "worst": worst, "worst_case": worst_case, "met": worst <= goal})
    # Between processes the same work moves by more than a router costs on a GPU (see --control), so
    # the median over runs of each case's ratio is reported beside the strict every-run check.
    median = {name: statistics.median(r) for name, r in per_case.items()}
    worst_median = max(median, key=median.__getitem__) if median else None
    control = {
        c["case"]: c["arms"]["plain-again"]["vs_plain"] for c in ab if c["arms"].get("plain-again", {}).get("vs_plain")
    }
    return {
        "goal": goal,
        "what": "flagos native / plain vendor device, µs per call, in each run",
        "per_case": per_case,
        "per_run": per_run,
        "worst": max((r["worst"] for r in per_run), default=None),
        "met": bool(per_run) and all(r["met"] for r in per_run),
        "median_per_case": median,
        "median_worst_case": worst_median,
        "median_met": bool(median) and all(m <= goal for m in median.values()),
        "control_per_case": control,
    }


def acceptance_runs(acc: dict[str, Any]) -> str:
    text = "; ".join(
        f"run {r['run']} {'met' if r['met'] else 'NOT met'} (worst {r['worst']:.2f}x, {r['worst_case']})"
        for r in acc["per_run"]
    )
    if len(acc["per_run"]) > 2 and acc.get("median_per_case"):
        worst = acc["median_worst_case"]
        text += (
            f". Median over {len(acc['per_run'])} runs per case: {'met' if acc['median_met'] else 'NOT met'} "
            f"(worst {acc['median_per_case'][worst]:.2f}x, {worst})"
        )
    control = [r for runs in (acc.get("control_per_case") or {}).values() for r in runs]
    if control:
        text += (
            f". Noise floor, plain again / plain (A/A, {len(control)} pairs): "
            f"{min(control):.2f}x to {max(control):.2f}x"
        )
    return text


def paired_arms_of(case: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A paired case's flagos arms; a report from before --paired-arms has its one native arm at the case's level."""
    if "arms" in case:
        return case["arms"]
    native = {k: case[k] for k in ("ratio_median", "ratio_min", "ratio_max", "run_medians", "pairs")}
    return {
        "native": {
            "label": "flagos native",
            "available": True,
            "reason": None,
            "route": "native",
            "us_median": case["flagos_us_median"],
            **native,
        }
    }


def step_profile_entry(d_model: int, plain: dict[str, list[float]], flagos: dict[str, list[float]]) -> dict[str, Any]:
    """One d_model's step profile: per op, [calls, self host µs] per step in each arm, and flagos minus plain."""
    rows = []
    for op in sorted(set(plain) | set(flagos)):
        p_calls, p_us = plain.get(op, [0.0, 0.0])
        f_calls, f_us = flagos.get(op, [0.0, 0.0])
        rows.append(
            {
                "op": op,
                "plain_calls": p_calls,
                "flagos_calls": f_calls,
                "plain_us": p_us,
                "flagos_us": f_us,
                "delta_us": f_us - p_us,
            }
        )
    rows.sort(key=lambda r: -r["delta_us"])
    return {
        "d_model": d_model,
        "plain_us": sum(r["plain_us"] for r in rows),
        "flagos_us": sum(r["flagos_us"] for r in rows),
        "ops": rows,
    }


# ---- the printed table ------------------------------------------------------------------------------------


def short_table(report: dict[str, Any]) -> str:
    """The node check's A/B table, then the step, the goal and the paired lines."""
    lines = stats.ab_table(report["ab"])
    if not report["ab"]:
        return "\n".join(lines)
    for size in (report.get("step") or {}).get("sizes", []):
        lines.append(
            f"training step d_model {size['d_model']}: "
            + ", ".join(f"{a['label']} {a['ms_median']:.2f} ms ({a['vs_plain']:.3f}x)" for a in size["arms"].values())
        )
    llm = report.get("llm")
    if llm:
        ratios = f", time {llm['time_ratio']:.3f}x (A/A {llm['aa_ratio']:.3f})" if "time_ratio" in llm else ""
        lines.append(f"compiled LLM step: {llm['verdict']}{ratios}" + ("" if llm["judged"] else " (tiny, not judged)"))
    zoo = report.get("zoo")
    if zoo:
        lines.append(
            f"model zoo: {zoo['verdict']}"
            + (" (tiny, timings not judged)" if zoo["settings"]["size"] == "tiny" else "")
        )
    acc = report.get("acceptance") or {}
    if acc.get("per_run"):
        lines.append(f"goal native/plain <= {acc['goal']}x: {acceptance_runs(acc)}")
    paired = (acc or {}).get("paired")
    if paired:
        lines.append(
            f"paired in-process medians: {'met' if paired['met'] else 'NOT met'} "
            f"(worst {paired['worst']:.3f}x, {paired['worst_case']}): "
            + ", ".join(
                f"{c['case']} {c['ratio_median']:.3f}x"
                for c in report["paired"]["cases"]
                if c.get("ratio_median") is not None
            )
        )
    lines += _paired_arm_lines(report.get("paired"))
    return "\n".join(lines)


def _paired_arm_lines(paired: dict[str, Any] | None) -> list[str]:
    """One line per paired flagos arm other than native (whose line is the goal's above)."""
    cases = (paired or {}).get("cases", [])
    names = [a for a in paired_arms_of(cases[0]) if a != "native"] if cases else []
    lines = []
    for name in names:
        arms = [(case["case"], paired_arms_of(case)[name]) for case in cases]
        head = f"paired {arms[0][1]['label']} / plain medians: "
        if not any(arm["available"] for _, arm in arms):
            lines.append(head + f"unavailable ({arms[0][1]['reason']})")
            continue
        lines.append(
            head + ", ".join(f"{c} {a['ratio_median']:.3f}x" if a["available"] else f"{c} unavailable" for c, a in arms)
        )
    return lines


# ---- comparison and gate ------------------------------------------------------------------------------------


def _change(old: float | None, new: float | None) -> str:
    if old is None or new is None:
        return "—"
    return f"{old:10.2f} -> {new:10.2f}  ({(new - old) / old * 100:+6.1f}%)"


def compare(old: dict[str, Any], new: dict[str, Any]) -> str:
    """The change of each case's mean µs per arm, and of its native/plain ratio, from ``old`` to ``new``."""
    old_cases = {c["case"]: c for c in old.get("ab", [])}
    lines = [
        f"change against {old.get('environment', {}).get('commit', '?')} "
        f"({old.get('environment', {}).get('date', '?')}), mean µs per call:"
    ]
    for case in new["ab"]:
        before = old_cases.get(case["case"])
        if before is None:
            lines.append(f"{case['case']}: new case")
            continue
        for arm, entry in case["arms"].items():
            was = before["arms"].get(arm, {})
            lines.append(f"{case['case']:32s} {entry['label']:16s} {_change(was.get('mean_us'), entry.get('mean_us'))}")
        ratio_was = before["arms"].get("native", {}).get("vs_plain_mean")
        ratio_now = case["arms"].get("native", {}).get("vs_plain_mean")
        lines.append(f"{case['case']:32s} {'native/plain':16s} {_change(ratio_was, ratio_now)}")
    old_ops = {o["op"]: o for o in (old.get("overhead") or {}).get("ops", [])}
    for item in (new.get("overhead") or {}).get("ops", []):
        was = old_ops.get(item["op"])
        if was is not None:
            lines.append(
                f"overhead {item['op']:23s} {'µs flagos-plain':16s} "
                f"{_change(was.get('overhead_us'), item.get('overhead_us'))}"
            )
    old_steps = {s["d_model"]: s for s in (old.get("step") or {}).get("sizes", [])}
    for size in (new.get("step") or {}).get("sizes", []):
        was = old_steps.get(size["d_model"], {}).get("arms", {})
        for arm, entry in size["arms"].items():
            lines.append(
                f"step d_model {size['d_model']:<6d} {entry['label'] + '/plain':28s} "
                f"{_change(was.get(arm, {}).get('vs_plain'), entry['vs_plain'])}"
            )
    return "\n".join(lines)


def gate(report: dict[str, Any], max_ratio: float) -> list[str]:
    """Cases whose mean flagos native / plain ratio exceeds ``max_ratio`` (empty: the gate passes)."""
    failed = []
    for case in report["ab"]:
        ratio = case["arms"].get("native", {}).get("vs_plain_mean")
        if ratio is not None and ratio > max_ratio:
            failed.append(f"{case['case']}: native/plain {ratio:.2f}x > {max_ratio}x")
    return failed
