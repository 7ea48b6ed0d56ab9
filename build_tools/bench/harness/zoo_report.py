"""The zoo's reports from the dict zoo.py builds: zoo.json, zoo.md, zoo.png, and with a profile diff profdiff.json
and profdiff.md; the plain-text summary table the node prints. Pure Python but for the plot (matplotlib)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from torch_fl._atomic import write_atomic

from .markdown import _table
from .opdiff import REPORT_OPS, summary_line
from .plot import png, require_matplotlib

KERNEL_ROWS = 40
KERNEL_CHARS = 100  # the markdown's cut of a kernel name; the json keeps profile_ops.py's


def require_plot() -> None:
    require_matplotlib("zoo.png")


def write(result: dict[str, Any], out: Path, plot: bool = False) -> list[Path]:
    """The reports of what ``result`` planned: a profile diff alone (python -m harness.profdiff) writes its own."""
    files: dict[str, bytes] = {}
    if result["settings"]["pairs"]:
        files["zoo.json"] = (json.dumps(result, indent=1) + "\n").encode()
        files["zoo.md"] = zoo_markdown(result).encode()
        if plot:
            files["zoo.png"] = render_png(result)
    if result.get("profdiff"):
        keep = {k: result.get(k) for k in ("environment", "settings", "profdiff", "failures", "complete", "lines")}
        files["profdiff.json"] = (json.dumps(keep, indent=1) + "\n").encode()
        files["profdiff.md"] = profdiff_markdown(result).encode()
    for name, data in files.items():
        write_atomic(out / name, data)
    return [out / name for name in files]


# ---- rows -----------------------------------------------------------------------------------------------------


def _rows(result: dict[str, Any]):
    """(model, mode, its entry) in the order they ran."""
    for name, model in result["models"].items():
        for mode, entry in model["modes"].items():
            yield name, mode, entry, model


def _f(value: float | None, spec: str = ".3f") -> str:
    return "–" if value is None else format(value, spec)


def _ratio_cell(entry: dict[str, Any], judged: str) -> str:
    """The ratio where the A/A says the noise is below the bars (zoo_judge.py's AA_BAND); else why it is not judged."""
    if entry.get("judged", True):
        return judged
    return f"not judged: {entry['not_judged']} (raw {entry['ratio']:.3f})"


def _timed_cells(entry: dict[str, Any], arms: list[str]) -> list[str]:
    flagos, plain = arms[0], arms[1]
    ms = entry["ms"]

    def time_cell(a: str) -> str:
        cell = f"{ms[a]:.2f}"
        return cell + (f" ({entry['tokens_per_s'][a]:.0f} tok/s)" if "tokens_per_s" in entry else "")

    q = entry["ratio_quartiles"]
    peaks = entry["peak_gib"]
    return [
        time_cell(plain),
        time_cell(flagos),
        _ratio_cell(entry, f"**{entry['ratio']:.3f}** ({q[0]:.3f}–{q[1]:.3f})"),
        _f(entry.get("aa")) + (" ({:.3f}–{:.3f})".format(*entry["aa_quartiles"]) if "aa_quartiles" in entry else ""),
        f"{entry['bar']:.3f}",
        f"{_f(peaks[plain], '.2f')} / {_f(peaks[flagos], '.2f')}",
        _f(entry["memory_ratio"]),
        ("ok: " if entry["check"]["ok"] else "**FAIL**: ") + entry["check"]["detail"],
    ]


# ---- zoo.md -----------------------------------------------------------------------------------------------------


def zoo_markdown(result: dict[str, Any]) -> str:
    env, s = result["environment"], result["settings"]
    arms = s["arms"]
    plain = arms[1]
    lines = [f"# torch_fl model zoo: flagos on {env['flagos_runtime']} against plain {plain}", ""]
    if not result.get("complete", True):
        lines += ["**Partial report**: the run stopped before its end; below is what it had measured.", ""]
    lines += _table(["", ""], [[k, f"`{v}`"] for k, v in env.items() if v is not None])
    turn = f"{s.get('untimed', 0)} untimed step(s), then {s['turn']} timed"
    turn += f" (more where they fill less than {s['turn_ms']:g} ms)" if s.get("turn_ms") else ""
    lines += ["", f"Sizes `{s['size']}`, {s['rounds']} rounds per pair, each turn {turn}; arms {', '.join(arms)}."]
    lines += ["", result["method"], ""]
    if s["size"] == "tiny":
        lines += ["Tiny models on the emulation: the timings are a dry run, not judged; the checks are.", ""]
    header = [
        "model",
        "mode",
        f"{plain} ms/step",
        "flagos ms/step",
        f"flagos/{plain} (quartiles)",
        "A/A",
        "bar",
        f"peak GiB {plain} / flagos",
        "memory ratio",
        "check",
    ]
    rows = []
    for name, mode, entry, model in _rows(result):
        label = (
            f"{name} ({model.get('params_m', '?')}M, {model['dtype']}{', GradScaler' if model['grad_scaler'] else ''})"
        )
        if entry["status"] == "ok":
            rows.append([label, mode, *_timed_cells(entry, arms)])
        else:
            why = entry.get("reason") or "; ".join(
                f"{a}: {(e.strip().splitlines() or [''])[-1][:160]}" for a, e in entry.get("errors", {}).items()
            )
            rows.append([label, mode, entry["status"].upper(), "", "", "", "", "", "", why])
    lines += _table(header, rows)
    notes = [
        f"- {name} {mode}: experts `{entry['experts']}`" for name, mode, entry, _ in _rows(result) if "experts" in entry
    ] + [
        f"- {name} {mode}: flagos graphs {entry['graphs']}"
        for name, mode, entry, _ in _rows(result)
        if "graphs" in entry
    ]
    if notes:
        lines += ["", *notes]
    lines += ["", f"**Verdict**: {result.get('verdict', 'not finished')}"]
    if result.get("profdiff"):
        lines += ["", "## Profile diff", "", "profdiff.md has the tables.", ""]
        lines += ["- " + summary_line(item, plain) for item in result["profdiff"]]
    lines += ["", "## Log", "", "```", *result["lines"], "```", ""]
    return "\n".join(lines)


def summary_table(result: dict[str, Any]) -> str:
    """The plain-text table the node mode prints (zoo.txt)."""
    arms = result["settings"]["arms"]
    flagos, plain = arms[0], arms[1]
    head = f"{'model':16s} {'mode':24s} {plain + ' ms':>10s} {'flagos ms':>10s} {'ratio':>7s} {'A/A':>7s} {'mem':>7s}"
    head += "  check"
    lines = [head]
    for name, mode, entry, _ in _rows(result):
        if entry["status"] != "ok":
            lines.append(f"{name:16s} {mode:24s} {entry['status'].upper()}")
            continue
        lines.append(
            f"{name:16s} {mode:24s} {entry['ms'][plain]:10.2f} {entry['ms'][flagos]:10.2f} "
            f"{_ratio_cell(entry, format(entry['ratio'], '.3f')):>7s} "
            f"{_f(entry.get('aa')):>7s} {_f(entry['memory_ratio']):>7s}  "
            + ("ok" if entry["check"]["ok"] else "FAIL")
            + f" ({entry['check']['detail']})"
        )
    for item in result.get("profdiff") or []:
        lines.append(summary_line(item, plain))
    lines.append(f"zoo check: {result.get('verdict', 'not finished')}")
    if not result["settings"]["pairs"]:
        lines = lines[1:]  # a profile diff alone: no table
    return "\n".join(lines)


# ---- profdiff.md ------------------------------------------------------------------------------------------------


def _kernel_rows(items: list[dict[str, Any]], counts: bool = False) -> list[list[str]]:
    rows = []
    for k in items[:KERNEL_ROWS]:
        launches = f"{k['launches'][0]:g} / {k['launches'][1]:g}" if counts else f"{k['launches']:g}"
        ops = ", ".join(f"{op} {n:g}" for op, n in k["ops"].items())
        rows.append([f"`{k['kernel'][:KERNEL_CHARS]}`", launches, ops])
    return rows


def profdiff_markdown(result: dict[str, Any]) -> str:
    env = result["environment"]
    plain = result["settings"]["arms"][1]
    lines = [f"# Profile diff: flagos on {env['flagos_runtime']} against plain {plain}", ""]
    lines += [
        "Per step, the eager training step of each model, each arm in its own process (harness/profdiff.py, its "
        "docstring the method). Host and device µs are self times: an op's own, without the ops it called.",
        "",
    ]
    for item in result["profdiff"]:
        d = item["diff"]
        t = d["totals"]
        lines += [f"## {item['model']}", "", summary_line(item, plain), ""]
        if not d["device_time"]:
            lines += [
                f"No device time on either side: the plain arm runs on the host ({plain}), which records no device, "
                "and flagos is profiled with host activity only to compare like with like; kernels are therefore "
                "absent, and the ops and their host time are what differ.",
                "",
            ]
        keys = ("calls", "host_us", "device_us", "kernels")
        lines += _table(
            ["per step", plain, "flagos", "flagos − plain"],
            [[k, f"{t[k][0]:.1f}", f"{t[k][1]:.1f}", f"{t[k][2]:+.1f}"] for k in keys],
        )
        lines += ["", f"Ops sorted by the gap in {d['sorted_by']} (top {REPORT_OPS}; profdiff.json has all):", ""]
        rows = []
        for r in d["ops"][:REPORT_OPS]:
            rows.append([f"`{r['op']}`"] + [f"{r[k][0]:.1f} / {r[k][1]:.1f} ({r[k][2]:+.1f})" for k in keys])
        lines += _table(["op", *(f"{k} {plain} / flagos (Δ)" for k in keys)], rows)
        for side, title in (
            ("only_flagos", "Kernels only flagos launches"),
            ("only_plain", f"Kernels only {plain} launches"),
        ):
            lines += ["", f"{title}: {len(d[side])}", ""]
            if d[side]:
                lines += _table(["kernel", "launches per step", "launched by"], _kernel_rows(d[side]))
        lines += ["", f"Kernels both launch, a different number of times: {len(d['launch_counts_differ'])}", ""]
        if d["launch_counts_differ"]:
            rows = _kernel_rows(d["launch_counts_differ"], counts=True)
            lines += _table(["kernel", f"launches {plain} / flagos", "launched by (flagos)"], rows)
        timed = d.get("kernel_time_differs", [])
        if timed:
            top = timed[0]["device_us"][1] - timed[0]["device_us"][0]
            aa = (item.get("control") or {}).get("kernel_time_differs") or []
            noise = f"; the A/A's largest is {aa[0]['device_us'][1] - aa[0]['device_us'][0]:+.1f} µs" if aa else ""
            lines += ["", f"Kernels both launch, by the gap in device µs per step (largest {top:+.1f}{noise}):", ""]
            rows = [
                [f"`{k['kernel'][:KERNEL_CHARS]}`", f"{k['device_us'][0]:.1f} / {k['device_us'][1]:.1f}",
                 ", ".join(f"{op} {n:g}" for op, n in k["ops"].items())]
                for k in timed[:KERNEL_ROWS]
            ]  # fmt: skip
            lines += _table(["kernel", f"device µs {plain} / flagos", "launched by (flagos)"], rows)
        control = item.get("control")
        if control:
            ct = control["totals"]
            lines += [
                "",
                f"A/A control ({plain} again against {plain}): host µs {ct['host_us'][2]:+.1f}, device µs "
                f"{ct['device_us'][2]:+.1f}, calls {ct['calls'][2]:+.1f}; kernels of one side only "
                f"{len(control['only_flagos']) + len(control['only_plain'])}, launch counts differing "
                f"{len(control['launch_counts_differ'])}.",
            ]
        lines.append("")
    return "\n".join(lines)


# ---- zoo.png ------------------------------------------------------------------------------------------------------


def render_png(result: dict[str, Any]) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timed = [(f"{n}\n{m}", e) for n, m, e, _ in _rows(result) if e["status"] == "ok"]
    memory = [(label, e) for label, e in timed if e["memory_ratio"]]
    panels = 1 + bool(memory)
    fig, axes = plt.subplots(panels, 1, figsize=(max(8, 0.7 * len(timed) + 2), 4.2 * panels), squeeze=False)
    ax = axes[0, 0]
    xs = range(len(timed))
    if timed:
        ratios = [e["ratio"] for _, e in timed]
        low = [e["ratio"] - e["ratio_quartiles"][0] for _, e in timed]
        high = [e["ratio_quartiles"][1] - e["ratio"] for _, e in timed]
        ax.bar(xs, ratios, 0.6, yerr=[low, high], capsize=2, color="C0", label="flagos / plain (quartiles)")
        aa = [(i, e["aa"]) for i, (_, e) in enumerate(timed) if "aa" in e]
        if aa:
            ax.plot(*zip(*aa, strict=True), "k_", markersize=14, label="A/A: plain again / plain")
        ax.plot(xs, [e["bar"] for _, e in timed], "r.", label="the issue's bar")
        ax.set_xticks(list(xs))
        ax.set_xticklabels([label for label, _ in timed], fontsize=7, rotation=30, ha="right")
    ax.axhline(1.0, color="gray", lw=0.8)
    ax.set_ylabel("time ratio (lower: flagos faster)")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    if memory:
        ax = axes[1, 0]
        ax.bar(range(len(memory)), [e["memory_ratio"] for _, e in memory], 0.6, color="C1")
        ax.axhline(1.0, color="gray", lw=0.8)
        ax.set_xticks(range(len(memory)))
        ax.set_xticklabels([label for label, _ in memory], fontsize=7, rotation=30, ha="right")
        ax.set_ylabel("peak memory flagos / plain")
        ax.grid(axis="y", alpha=0.3)
    env = result["environment"]
    title = (
        f"torch_fl zoo: flagos on {env['flagos_runtime']} vs plain {env['plain']}  {env.get('gpu') or ''}  "
        f"torch {env.get('torch', '')}  {env['commit'][:12]}  {env['date']}"
    )
    return png(fig, title, dpi=100)
