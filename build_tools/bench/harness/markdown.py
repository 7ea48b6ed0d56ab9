"""bench.md from the dicts bench.json holds (report.py builds them): one section per measured part.

Pure Python (no torch, no matplotlib), so a saved report renders again without measuring.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch_fl.bench import stats

from .report import acceptance_runs, paired_arms_of


def _pinning(cpu: int | None) -> str:
    return "children not pinned" if cpu is None else f"every child pinned to CPU {cpu}"


def _us_cell(entry: dict[str, Any]) -> str:
    if not entry["available"]:
        return "unavailable"
    cell = stats.runs_text(entry["us"], ".2f")
    return f"{cell} ({entry['spread_pct']:.1f}%)" if len(entry["us"]) > 1 else cell


def _ratio_cell(entry: dict[str, Any], key: str) -> str:
    if not entry["available"]:
        return "unavailable"
    return stats.runs_text(entry.get(key), ".2f", "x")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _environment_md(report: dict[str, Any]) -> list[str]:
    env = report["environment"]
    keys = (
        "device",
        "vendor",
        "torch",
        "triton",
        "flag_gems",
        "torch_fl",
        "commit",
        "conf",
        "host",
        "date",
        "python",
        "cpu",
        "cpu_count",
        "torch_threads",
        "load_average",
    )
    rows = [(k, "not installed" if env[k] is None else f"`{env[k]}`") for k in keys if k in env]
    s = report["settings"]
    rows.append(
        (
            "settings",
            f"warm-up {s['warmup']}, repeat {s['repeat']}, runs {s['runs']}, "
            f"threads {s['threads'] or 'torch default'}, {_pinning(s.get('cpu'))}, "
            f"GLIBC_TUNABLES {s.get('glibc_tunables') or 'unset'}"
            f"{', short' if s['short'] else ''}",
        )
    )
    return _table(("environment", ""), rows)


def _ab_md(report: dict[str, Any]) -> list[str]:
    ab = report["ab"]
    if not ab:
        return []
    arm_names = list(ab[0]["arms"])
    labels = [ab[0]["arms"][a]["label"] for a in arm_names]
    out = [
        "## Route A/B",
        "",
        report["method"]["ab"],
        "",
        "µs per call, runs separated by `/`, spread across runs in brackets:",
        "",
    ]
    out += _table(["case", *labels], [[c["case"], *(_us_cell(c["arms"][a]) for a in arm_names)] for c in ab])
    titles = (("vs_plain", "Ratio against the plain vendor device"), ("vs_native", "Ratio against flagos native"))
    for key, title in titles:
        out += ["", f"{title} (per run):", ""]
        out += _table(
            ["case", *labels], [[c["case"], *(_ratio_cell(c["arms"][a], key) for a in arm_names)] for c in ab]
        )
    unavailable = {a["label"]: a["reason"] for c in ab for a in c["arms"].values() if not a["available"]}
    if unavailable:
        out += ["", "Arms not measured here:", ""] + [f"- **{k}**: {v}" for k, v in unavailable.items()]
    return out


def _acceptance_md(report: dict[str, Any]) -> list[str]:
    acc = report.get("acceptance") or {}
    if not acc.get("per_run"):
        return []
    verdict = "met" if acc["met"] else "**not met**"
    return [
        "",
        f"Goal: flagos native ≤ {acc['goal']}x the plain vendor device per call, in every case and run: "
        f"{verdict}. {acceptance_runs(acc)}.",
    ]


def _paired_rows(case: dict[str, Any], plain_label: str) -> list[list[str]]:
    rows = [[case["case"], plain_label, f"{case['plain_us_median']:.2f}", "—", "—", "—", str(case["pairs"])]]
    for arm in paired_arms_of(case).values():
        if not arm["available"]:
            rows.append([case["case"], arm["label"], "unavailable", "—", "—", "—", "—"])
            continue
        rows.append(
            [
                case["case"],
                arm["label"],
                f"{arm['us_median']:.2f}",
                f"{arm['ratio_median']:.3f}x",
                f"{arm['ratio_min']:.2f}x to {arm['ratio_max']:.2f}x",
                stats.runs_text(arm["run_medians"], ".3f", "x"),
                str(arm["pairs"]),
            ]
        )
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


def _items(report: dict[str, Any], part: str, key: str) -> list[dict[str, Any]]:
    """The entries of one part of the report; none when that part was not measured (or a report predates it)."""
    return (report.get(part) or {}).get(key) or []


def _section(title: str, method: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return ["", f"## {title}", "", method, "", *_table(header, rows)]


def _paired_md(report: dict[str, Any]) -> list[str]:
    cases = _items(report, "paired", "cases")
    if not cases:
        return []
    plain_label = f"plain {report['environment']['plain_device']}"
    rows = [row for case in cases for row in _paired_rows(case, plain_label)]
    header = ["case", "arm", "µs per call (median)", "median arm/plain", "pair range", "median per run", "pairs"]
    acc = (report.get("acceptance") or {}).get("paired")
    verdict = []
    if acc:
        verdict = [
            "",
            f"Goal on the paired medians: native/plain ≤ {acc['goal']}x in every case: "
            f"{'met' if acc['met'] else '**not met**'} (worst {acc['worst']:.3f}x, {acc['worst_case']}).",
        ]
    return [
        *_section("Paired in-process A/B", report["paired"]["method"], header, rows),
        *_paired_unavailable(cases),
        *verdict,
    ]


def _overhead_row(item: dict[str, Any]) -> list[str]:
    routes = ", ".join(item["routes"]) or "device kernel (not routed)"
    fresh = item.get("fresh_overhead_us")
    return [
        item["kind"],
        item["op"],
        item["note"],
        f"{item['plain_us_median']:.2f}",
        f"{item['flagos_us_median']:.2f}",
        f"{item['overhead_us']:+.2f}",
        "—" if fresh is None else f"{fresh:+.2f}",
        f"{item['ratio_median']:.2f}x ({item['ratio_min']:.2f} to {item['ratio_max']:.2f})",
        routes,
    ]


def _overhead_md(report: dict[str, Any]) -> list[str]:
    ops = _items(report, "overhead", "ops")
    if not ops:
        return []
    header = [
        "class",
        "op",
        "call",
        f"{ops[0]['plain_label']} µs",
        "flagos native µs",
        "overhead µs",
        "overhead, aliases built per call µs",
        "flagos/plain (pair range)",
        "flagos route logged",
    ]
    return _section("Host overhead per op class", report["overhead"]["method"], header, [_overhead_row(o) for o in ops])


def _step_row(size: dict[str, Any], arm: dict[str, Any]) -> list[str]:
    routes = ", ".join(f"{n} {r}" for r, n in sorted(arm["routed_calls"].items())) or "—"
    per_set = arm["vs_plain_sets"]
    return [
        str(size["d_model"]),
        arm["label"],
        f"{arm['ms_median']:.2f}",
        f"{arm['ms_min']:.2f} to {arm['ms_max']:.2f}",
        f"**{arm['vs_plain']:.3f}x**",
        f"{min(per_set):.3f} to {max(per_set):.3f}",
        f"{size['sets']} x {size['rounds'] // size['sets']}",
        routes,
    ]


def _step_md(report: dict[str, Any]) -> list[str]:
    sizes = _items(report, "step", "sizes")
    if not sizes:
        return []
    # a size without "sets" is from a report before the lockstep sets, rendered again
    rows = [_step_row(size, arm) for size in sizes if "sets" in size for arm in size["arms"].values()]
    header = [
        "d_model",
        "arm",
        "ms per step (median)",
        "range of the set medians",
        "against plain (per round)",
        "against plain, range of the set medians",
        "sets x rounds",
        "routed calls in one step",
    ]
    return _section("Training step", report["step"]["method"], header, rows)


STEP_PROFILE_ROWS = 25  # the markdown lists the ops that add the most; bench.json keeps all of them


def _step_profile_md(report: dict[str, Any]) -> list[str]:
    sizes = _items(report, "step_profile", "sizes")
    if not sizes:
        return []
    lines = ["", "## Training step, host time per op (profiler)", "", report["step_profile"]["method"]]
    for size in sizes:
        rows = [
            [
                r["op"],
                f"{r['plain_calls']:g}",
                f"{r['flagos_calls']:g}",
                f"{r['plain_us']:.1f}",
                f"{r['flagos_us']:.1f}",
                f"{r['delta_us']:+.1f}",
            ]
            for r in size["ops"][:STEP_PROFILE_ROWS]
        ]
        rows.append(
            [
                "all ops",
                "",
                "",
                f"{size['plain_us']:.1f}",
                f"{size['flagos_us']:.1f}",
                f"{size['flagos_us'] - size['plain_us']:+.1f}",
            ]
        )
        header = ["op", "calls plain", "calls flagos", "self µs plain", "self µs flagos", "flagos − plain µs"]
        lines += ["", f"d_model {size['d_model']}, per step:", "", *_table(header, rows)]
    return lines


def _printed_case(report: dict[str, Any], key: str, title: str) -> list[str]:
    """A model case's section: its lines as harness/<key>.py printed them (its docstring is the method)."""
    case = report.get(key)
    if not case:
        return []
    return [
        "",
        f"## {title}",
        "",
        f"As harness/{key}.py prints it (its docstring is the method):",
        "",
        "```",
        *case["lines"],
        "```",
    ]


def to_markdown(report: dict[str, Any]) -> str:
    env = report["environment"]
    partial = (
        []
        if report.get("complete", True)
        else ["**Partial report**: the run stopped before its end; below is what it had measured.", ""]
    )
    lines = [
        f"# torch_fl benchmark: {env['vendor']}",
        "",
        *partial,
        *_environment_md(report),
        "",
        *_ab_md(report),
        *_acceptance_md(report),
        *_paired_md(report),
        *_overhead_md(report),
        *_step_md(report),
        *_step_profile_md(report),
        *_printed_case(report, "llm", "Compiled decoder LLM training step"),
        *_printed_case(report, "decode", "Greedy decoding: eager, compiled, reduce-overhead"),
        *_printed_case(report, "zoo", "Model zoo and profile diff"),
        "",
    ]
    return "\n".join(lines)
