"""Turn raw per-run timings into bench.json's summary, bench.md, a comparison and the printed table.

Pure Python (no torch, no matplotlib): everything here works on the plain dicts bench.json holds,
so a saved report can be re-rendered or compared without measuring again.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

SCHEMA = 1
# The acceptance goals: flagos native per call <= this many times the plain vendor device. Emulation
# adds the host-side re-tagging to a ~1 µs CPU kernel; on a GPU it must hide behind the launch.
GOAL_RATIO = {"cpu": 1.5, "cuda": 1.10, "dcu": 1.10}


# ---- statistics -----------------------------------------------------------------------------------


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


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def _mean(values: Sequence[float] | None) -> float | None:
    return statistics.fmean(values) if values else None


# ---- building the summary ---------------------------------------------------------------------------


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
            entry[f"{key}_mean"] = _mean(per_run)


def _paired_arm(label: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One flagos arm of one paired case over its runs: µs and ratio to plain per pair, medians and range."""
    if "reason" in runs[0]:
        return {"label": label, "available": False, "reason": runs[0]["reason"], "route": None}
    ratios_all = [r for run in runs for r in run["ratios"]]
    return {"label": label, "available": True, "reason": None, "route": runs[0].get("route"),
            "us_median": statistics.median(u for run in runs for u in run["us"]),
            "ratio_median": statistics.median(ratios_all), "ratio_min": min(ratios_all),
            "ratio_max": max(ratios_all), "run_medians": [statistics.median(run["ratios"]) for run in runs],
            "pairs": len(ratios_all), "runs": [{"us": run["us"], "ratios": run["ratios"]} for run in runs]}


def paired_entry(case: str, runs: list[dict[str, Any]], labels: dict[str, str] | None = None) -> dict[str, Any]:
    """One case of the paired measurement: per flagos arm every pair's ratio to plain, the median over all pairs,
    the range and each run's median; the native arm's figures also at the case's level, where readers from before
    the other arms look for them."""
    labels = labels or {}
    arms = {arm: _paired_arm(labels.get(arm, f"flagos {arm}"), [run["arms"][arm] for run in runs])
            for arm in runs[0]["arms"]}
    entry: dict[str, Any] = {"case": case, "pairs": sum(len(run["plain_us"]) for run in runs),
                             "plain_us_median": statistics.median(u for run in runs for u in run["plain_us"])}
    native = arms.get("native", {})
    if native.get("available"):
        entry.update({k: native[k] for k in ("ratio_median", "ratio_min", "ratio_max", "run_medians")})
        entry["flagos_us_median"] = native["us_median"]
    entry["runs"] = [{"plain_us": run["plain_us"],
                      **({"flagos_us": run["arms"]["native"]["us"], "ratios": run["arms"]["native"]["ratios"]}
                         if native.get("available") else {})} for run in runs]
    entry["arms"] = arms
    return entry


def overhead_entry(op: str, kind: str, note: str, runs: list[dict[str, Any]], plain_label: str) -> dict[str, Any]:
    """One overhead op over its runs: median µs per arm, flagos minus plain, and the pairs' ratios."""
    plain = [u for run in runs for u in run["plain_us"]]
    flagos = [u for run in runs for u in run["flagos_us"]]
    pair_ratios = [f / p for f, p in zip(flagos, plain, strict=True)]
    fresh = [u for run in runs for u in run.get("flagos_fresh_us", [])]  # absent from reports before alias reuse
    return {"op": op, "kind": kind, "note": note, "plain_label": plain_label,
            "plain_us_median": statistics.median(plain), "flagos_us_median": statistics.median(flagos),
            "overhead_us": statistics.median(f - p for f, p in zip(flagos, plain, strict=True)),
            "fresh_overhead_us": (statistics.median(f - p for f, p in zip(fresh, plain, strict=True))
                                  if fresh else None),
            "ratio_median": statistics.median(pair_ratios), "ratio_min": min(pair_ratios),
            "ratio_max": max(pair_ratios), "pairs": len(pair_ratios),
            "routes": sorted({f"{o} -> {r}" for run in runs for o, r in run["logged"]}),
            "runs": [{k: run[k] for k in ("plain_us", "flagos_us", "flagos_fresh_us") if k in run} for run in runs]}


def _round_ratios(rounds: list[dict[str, list[float]]], arm: str) -> list[float]:
    """Per round, the arm's median step over plain's median step in the same round."""
    return [statistics.median(r[arm]) / statistics.median(r["plain"]) for r in rounds]


def step_set_summary(rounds: list[dict[str, list[float]]]) -> dict[str, dict[str, float]]:
    """One process set: per arm its median step (ms) and the median over rounds of its ratio to plain."""
    return {arm: {"ms": statistics.median(t for r in rounds for t in r[arm]),
                  "vs_plain": statistics.median(_round_ratios(rounds, arm))} for arm in rounds[0]}


def step_entry(d_model: int, labels: dict[str, str], sets: list[dict[str, Any]]) -> dict[str, Any]:
    """One d_model of the training step from its lockstep sets (run.measure_step): per arm the median step, the
    ratio to plain taken round by round (median over every round of every set) and the per-set medians."""
    out: dict[str, Any] = {"d_model": d_model, "sets": len(sets), "rounds": sum(len(s["rounds"]) for s in sets),
                           "arms": {}}
    summaries = [step_set_summary(s["rounds"]) for s in sets]
    for arm, label in labels.items():
        routes: dict[str, int] = {}
        for _, route in sets[0]["info"][arm]["logged"]:
            routes[route] = routes.get(route, 0) + 1
        per_set_ms = [summary[arm]["ms"] for summary in summaries]
        per_set_ratio = [summary[arm]["vs_plain"] for summary in summaries]
        out["arms"][arm] = {
            "label": label, "ms": per_set_ms,
            "ms_median": statistics.median(t for s in sets for r in s["rounds"] for t in r[arm]),
            "ms_min": min(per_set_ms), "ms_max": max(per_set_ms), "routed_calls": routes,
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
    return {"goal": goal, "worst": worst["ratio_median"], "worst_case": worst["case"],
            "met": all(c["ratio_median"] <= goal for c in measured)}


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
    control = {c["case"]: c["arms"]["plain-again"]["vs_plain"] for c in ab
               if c["arms"].get("plain-again", {}).get("vs_plain")}
    return {"goal": goal, "what": "flagos native / plain vendor device, µs per call, in each run",
            "per_case": per_case, "per_run": per_run,
            "worst": max((r["worst"] for r in per_run), default=None),
            "met": bool(per_run) and all(r["met"] for r in per_run),
            "median_per_case": median,
            "median_worst_case": worst_median,
            "median_met": bool(median) and all(m <= goal for m in median.values()),
            "control_per_case": control}


def _acceptance_runs(acc: dict[str, Any]) -> str:
    text = "; ".join(f"run {r['run']} {'met' if r['met'] else 'NOT met'} (worst {r['worst']:.2f}x, {r['worst_case']})"
                     for r in acc["per_run"])
    if len(acc["per_run"]) > 2 and acc.get("median_per_case"):
        worst = acc["median_worst_case"]
        text += (f". Median over {len(acc['per_run'])} runs per case: {'met' if acc['median_met'] else 'NOT met'} "
                 f"(worst {acc['median_per_case'][worst]:.2f}x, {worst})")
    control = [r for runs in (acc.get("control_per_case") or {}).values() for r in runs]
    if control:
        text += (f". Noise floor, plain again / plain (A/A, {len(control)} pairs): "
                 f"{min(control):.2f}x to {max(control):.2f}x")
    return text


# ---- markdown ------------------------------------------------------------------------------------------


def _runs(values: Sequence[float] | None, fmt: str, suffix: str = "") -> str:
    return " / ".join(format(v, fmt) + suffix for v in values) if values else "—"


def _pinning(cpu: int | None) -> str:
    return "children not pinned" if cpu is None else f"every child pinned to CPU {cpu}"


def _us_cell(entry: dict[str, Any]) -> str:
    if not entry["available"]:
        return "unavailable"
    cell = _runs(entry["us"], ".2f")
    return f"{cell} ({entry['spread_pct']:.1f}%)" if len(entry["us"]) > 1 else cell


def _ratio_cell(entry: dict[str, Any], key: str) -> str:
    if not entry["available"]:
        return "unavailable"
    return _runs(entry.get(key), ".2f", "x")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _environment_md(report: dict[str, Any]) -> list[str]:
    env = report["environment"]
    keys = ("device", "vendor", "torch", "triton", "flag_gems", "torch_fl", "commit", "conf", "host", "date",
            "python", "cpu", "cpu_count", "torch_threads", "load_average")
    rows = [(k, "not installed" if env[k] is None else f"`{env[k]}`") for k in keys if k in env]
    s = report["settings"]
    rows.append(("settings", f"warm-up {s['warmup']}, repeat {s['repeat']}, runs {s['runs']}, "
                             f"threads {s['threads'] or 'torch default'}, {_pinning(s.get('cpu'))}, "
                             f"GLIBC_TUNABLES {s.get('glibc_tunables') or 'unset'}"
                             f"{', short' if s['short'] else ''}"))
    return _table(("environment", ""), rows)


def _ab_md(report: dict[str, Any]) -> list[str]:
    ab = report["ab"]
    if not ab:
        return []
    arm_names = list(ab[0]["arms"])
    labels = [ab[0]["arms"][a]["label"] for a in arm_names]
    out = ["## Route A/B", "", report["method"]["ab"], "",
           "µs per call, runs separated by `/`, spread across runs in brackets:", ""]
    out += _table(["case", *labels], [[c["case"], *(_us_cell(c["arms"][a]) for a in arm_names)] for c in ab])
    titles = (("vs_plain", "Ratio against the plain vendor device"), ("vs_native", "Ratio against flagos native"))
    for key, title in titles:
        out += ["", f"{title} (per run):", ""]
        out += _table(["case", *labels],
                      [[c["case"], *(_ratio_cell(c["arms"][a], key) for a in arm_names)] for c in ab])
    unavailable = {a["label"]: a["reason"] for c in ab for a in c["arms"].values() if not a["available"]}
    if unavailable:
        out += ["", "Arms not measured here:", ""] + [f"- **{k}**: {v}" for k, v in unavailable.items()]
    return out


def _acceptance_md(report: dict[str, Any]) -> list[str]:
    acc = report.get("acceptance") or {}
    if not acc.get("per_run"):
        return []
    verdict = "met" if acc["met"] else "**not met**"
    return ["", f"Goal: flagos native ≤ {acc['goal']}x the plain vendor device per call, in every case and run: "
                f"{verdict}. {_acceptance_runs(acc)}."]


def paired_arms_of(case: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A paired case's flagos arms; a report from before --paired-arms has its one native arm at the case's level."""
    if "arms" in case:
        return case["arms"]
    native = {k: case[k] for k in ("ratio_median", "ratio_min", "ratio_max", "run_medians", "pairs")}
    return {"native": {"label": "flagos native", "available": True, "reason": None, "route": "native",
                       "us_median": case["flagos_us_median"], **native}}


def _paired_rows(case: dict[str, Any], plain_label: str) -> list[list[str]]:
    rows = [[case["case"], plain_label, f"{case['plain_us_median']:.2f}", "—", "—", "—", str(case["pairs"])]]
    for arm in paired_arms_of(case).values():
        if not arm["available"]:
            rows.append([case["case"], arm["label"], "unavailable", "—", "—", "—", "—"])
            continue
        rows.append([case["case"], arm["label"], f"{arm['us_median']:.2f}", f"{arm['ratio_median']:.3f}x",
                     f"{arm['ratio_min']:.2f}x to {arm['ratio_max']:.2f}x", _runs(arm["run_medians"], ".3f", "x"),
                     str(arm["pairs"])])
    return rows


def _paired_unavailable(cases: list[dict[str, Any]]) -> list[str]:
    """One line per (arm, reason), naming the cases only where the reason is not every case's."""
    where: dict[tuple[str, str], list[str]] = {}
    for case in cases:
        for arm in paired_arms_of(case).values():
            if not arm["available"]:
                where.setdefault((arm["label"], arm["reason"]), []).append(case["case"])
    lines = []
    for (label, reason), names in where.items():
        scope = "" if len(names) == len(cases) else f" ({', '.join(names)})"
        lines.append(f"- **{label}**{scope}: {reason}")
    return ["", "Arms not measured here:", "", *lines] if lines else []


def _paired_md(report: dict[str, Any]) -> list[str]:
    paired = report.get("paired")
    if not paired or not paired["cases"]:
        return []
    plain_label = f"plain {report['environment']['plain_device']}"
    rows = [row for case in paired["cases"] for row in _paired_rows(case, plain_label)]
    header = ["case", "arm", "µs per call (median)", "median arm/plain", "pair range", "median per run", "pairs"]
    acc = (report.get("acceptance") or {}).get("paired")
    verdict = []
    if acc:
        verdict = ["", f"Goal on the paired medians: native/plain ≤ {acc['goal']}x in every case: "
                       f"{'met' if acc['met'] else '**not met**'} (worst {acc['worst']:.3f}x, {acc['worst_case']})."]
    return ["", "## Paired in-process A/B", "", paired["method"], "", *_table(header, rows),
            *_paired_unavailable(paired["cases"]), *verdict]


def _overhead_md(report: dict[str, Any]) -> list[str]:
    oh = report.get("overhead")
    if not oh or not oh["ops"]:
        return []
    rows = []
    for item in oh["ops"]:
        routes = ", ".join(item["routes"]) or "device kernel (not routed)"
        fresh = item.get("fresh_overhead_us")
        rows.append([item["kind"], item["op"], item["note"], f"{item['plain_us_median']:.2f}",
                     f"{item['flagos_us_median']:.2f}", f"{item['overhead_us']:+.2f}",
                     "—" if fresh is None else f"{fresh:+.2f}",
                     f"{item['ratio_median']:.2f}x ({item['ratio_min']:.2f} to {item['ratio_max']:.2f})", routes])
    header = ["class", "op", "call", f"{oh['ops'][0]['plain_label']} µs", "flagos native µs", "overhead µs",
              "overhead, aliases built per call µs", "flagos/plain (pair range)", "flagos route logged"]
    return ["", "## Host overhead per op class", "", oh["method"], "", *_table(header, rows)]


def _step_md(report: dict[str, Any]) -> list[str]:
    step = report.get("step")
    if not step or not step["sizes"]:
        return []
    rows = []
    for size in step["sizes"]:
        if "sets" not in size:  # a report from before the lockstep sets, rendered again
            continue
        for arm in size["arms"].values():
            routes = ", ".join(f"{n} {r}" for r, n in sorted(arm["routed_calls"].items())) or "—"
            per_set = arm["vs_plain_sets"]
            rows.append([str(size["d_model"]), arm["label"], f"{arm['ms_median']:.2f}",
                         f"{arm['ms_min']:.2f} to {arm['ms_max']:.2f}", f"**{arm['vs_plain']:.3f}x**",
                         f"{min(per_set):.3f} to {max(per_set):.3f}",
                         f"{size['sets']} x {size['rounds'] // size['sets']}",
                         routes])
    header = ["d_model", "arm", "ms per step (median)", "range of the set medians", "against plain (per round)",
              "against plain, range of the set medians", "sets x rounds", "routed calls in one step"]
    return ["", "## Training step", "", step["method"], "", *_table(header, rows)]


def step_profile_entry(d_model: int, plain: dict[str, list[float]], flagos: dict[str, list[float]]) -> dict[str, Any]:
    """One d_model's step profile: per op, [calls, self host µs] per step in each arm, and flagos minus plain."""
    rows = []
    for op in sorted(set(plain) | set(flagos)):
        p_calls, p_us = plain.get(op, [0.0, 0.0])
        f_calls, f_us = flagos.get(op, [0.0, 0.0])
        rows.append({"op": op, "plain_calls": p_calls, "flagos_calls": f_calls, "plain_us": p_us, "flagos_us": f_us,
                     "delta_us": f_us - p_us})
    rows.sort(key=lambda r: -r["delta_us"])
    return {"d_model": d_model, "plain_us": sum(r["plain_us"] for r in rows),
            "flagos_us": sum(r["flagos_us"] for r in rows), "ops": rows}


STEP_PROFILE_ROWS = 25  # the markdown lists the ops that add the most; bench.json keeps all of them


def _step_profile_md(report: dict[str, Any]) -> list[str]:
    prof = report.get("step_profile")
    if not prof or not prof["sizes"]:
        return []
    lines = ["", "## Training step, host time per op (profiler)", "", prof["method"]]
    for size in prof["sizes"]:
        rows = [[r["op"], f"{r['plain_calls']:g}", f"{r['flagos_calls']:g}", f"{r['plain_us']:.1f}",
                 f"{r['flagos_us']:.1f}", f"{r['delta_us']:+.1f}"] for r in size["ops"][:STEP_PROFILE_ROWS]]
        rows.append(["all ops", "", "", f"{size['plain_us']:.1f}", f"{size['flagos_us']:.1f}",
                     f"{size['flagos_us'] - size['plain_us']:+.1f}"])
        header = ["op", "calls plain", "calls flagos", "self µs plain", "self µs flagos", "flagos − plain µs"]
        lines += ["", f"d_model {size['d_model']}, per step:", "", *_table(header, rows)]
    return lines


def to_markdown(report: dict[str, Any]) -> str:
    env = report["environment"]
    partial = ([] if report.get("complete", True) else
               ["**Partial report**: the run stopped before its end; below is what it had measured.", ""])
    lines = [f"# torch_fl benchmark: {env['vendor']}", "", *partial, *_environment_md(report), "", *_ab_md(report),
             *_acceptance_md(report), *_paired_md(report), *_overhead_md(report), *_step_md(report),
             *_step_profile_md(report), ""]
    return "\n".join(lines)


# ---- the printed table ------------------------------------------------------------------------------------


def short_table(report: dict[str, Any]) -> str:
    ab = report["ab"]
    if not ab:
        return "(no A/B cases)"
    others = [a for a in ab[0]["arms"] if a not in ("plain", "native")]
    header = f"{'case':32s} {'plain µs':>18s} {'native µs':>18s} {'native/plain':>16s}"
    header += "".join(f" {a + '/native':>16s}" for a in others)
    lines = [header]
    for c in ab:
        arms = c["arms"]
        plain, native = arms.get("plain", {}), arms.get("native", {})
        row = (f"{c['case']:32s} {_runs(plain.get('us'), '.2f'):>18s} {_runs(native.get('us'), '.2f'):>18s}"
               f" {_runs(native.get('vs_plain'), '.2f', 'x'):>16s}")
        for a in others:
            cell = _runs(arms[a].get("vs_native"), ".2f", "x") if arms[a]["available"] else "unavailable"
            row += f" {cell:>16s}"
        lines.append(row)
    for size in (report.get("step") or {}).get("sizes", []):
        lines.append(f"training step d_model {size['d_model']}: " + ", ".join(
            f"{a['label']} {a['ms_median']:.2f} ms ({a['vs_plain']:.3f}x)" for a in size["arms"].values()))
    acc = report.get("acceptance") or {}
    if acc.get("per_run"):
        lines.append(f"goal native/plain <= {acc['goal']}x: {_acceptance_runs(acc)}")
    paired = (acc or {}).get("paired")
    if paired:
        lines.append(f"paired in-process medians: {'met' if paired['met'] else 'NOT met'} "
                     f"(worst {paired['worst']:.3f}x, {paired['worst_case']}): "
                     + ", ".join(f"{c['case']} {c['ratio_median']:.3f}x" for c in report['paired']['cases']
                                 if c.get("ratio_median") is not None))
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
        lines.append(head + ", ".join(f"{c} {a['ratio_median']:.3f}x" if a["available"] else f"{c} unavailable"
                                      for c, a in arms))
    return lines


# ---- comparison and gate ------------------------------------------------------------------------------------


def _change(old: float | None, new: float | None) -> str:
    if old is None or new is None:
        return "—"
    return f"{old:10.2f} -> {new:10.2f}  ({(new - old) / old * 100:+6.1f}%)"


def compare(old: dict[str, Any], new: dict[str, Any]) -> str:
    """The change of each case's mean µs per arm, and of its native/plain ratio, from ``old`` to ``new``."""
    old_cases = {c["case"]: c for c in old.get("ab", [])}
    lines = [f"change against {old.get('environment', {}).get('commit', '?')} "
             f"({old.get('environment', {}).get('date', '?')}), mean µs per call:"]
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
            lines.append(f"overhead {item['op']:23s} {'µs flagos-plain':16s} "
                         f"{_change(was.get('overhead_us'), item.get('overhead_us'))}")
    old_steps = {s["d_model"]: s for s in (old.get("step") or {}).get("sizes", [])}
    for size in (new.get("step") or {}).get("sizes", []):
        was = old_steps.get(size["d_model"], {}).get("arms", {})
        for arm, entry in size["arms"].items():
            lines.append(f"step d_model {size['d_model']:<6d} {entry['label'] + '/plain':28s} "
                         f"{_change(was.get(arm, {}).get('vs_plain'), entry['vs_plain'])}")
    return "\n".join(lines)


def gate(report: dict[str, Any], max_ratio: float) -> list[str]:
    """Cases whose mean flagos native / plain ratio exceeds ``max_ratio`` (empty: the gate passes)."""
    failed = []
    for case in report["ab"]:
        ratio = case["arms"].get("native", {}).get("vs_plain_mean")
        if ratio is not None and ratio > max_ratio:
            failed.append(f"{case['case']}: native/plain {ratio:.2f}x > {max_ratio}x")
    return failed
