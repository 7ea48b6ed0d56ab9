"""bench.png: the A/B cases and the overhead ops as grouped bars (mean µs, whiskers min..max over runs)."""

from __future__ import annotations

import importlib.util
import io
import sys
from typing import Any

PIP_HINT = "pip install matplotlib   (the test images have it: docker/<vendor>/requirements-test.txt)"


def require_matplotlib(chart: str = "bench.png") -> None:
    """Fail before measuring anything when ``chart`` cannot be drawn."""
    if importlib.util.find_spec("matplotlib") is None:
        print(f"error: {chart} needs matplotlib, which is not installed here.\n  {PIP_HINT}", file=sys.stderr)
        raise SystemExit(2)


def png(fig: Any, title: str, dpi: int) -> bytes:
    """``fig`` under ``title``, laid out, as PNG bytes; the figure is closed, since pyplot keeps every open one."""
    import matplotlib.pyplot as plt

    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return buf.getvalue()


def _bars(ax: Any, groups: list[str], series: list[tuple[str, list[dict[str, Any] | None]]], title: str) -> None:
    from matplotlib.patches import Patch

    width = 0.8 / max(len(series), 1)
    handles = []
    for i, (label, entries) in enumerate(series):
        xs, heights, low, high = [], [], [], []
        for g, entry in enumerate(entries):
            if entry is None or not entry.get("us"):
                continue
            xs.append(g - 0.4 + width * (i + 0.5))
            heights.append(entry["mean_us"])
            low.append(entry["mean_us"] - entry["min_us"])
            high.append(entry["max_us"] - entry["mean_us"])
        ax.bar(xs, heights, width, yerr=[low, high], capsize=2, color=f"C{i}")
        handles.append(Patch(color=f"C{i}", alpha=1.0 if xs else 0.3, label=label if xs else f"{label} (unavailable)"))
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, rotation=20, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("µs per call (log)")
    ax.set_title(title, fontsize=10)
    ax.legend(handles=handles, fontsize=8)
    ax.grid(axis="y", which="both", alpha=0.3)


def _summary(us: list[float]) -> dict[str, Any]:
    return {"us": us, "mean_us": sum(us) / len(us), "min_us": min(us), "max_us": max(us)}


def render_png(report: dict[str, Any]) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    env = report["environment"]
    panels = [p for p in ("ab", "overhead") if report.get(p)]
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 4.5 * len(panels)), squeeze=False)
    for ax, panel in zip(axes[:, 0], panels, strict=True):
        if panel == "ab":
            ab = report["ab"]
            arms = list(ab[0]["arms"])
            series = [(ab[0]["arms"][a]["label"], [c["arms"][a] for c in ab]) for a in arms]
            _bars(ax, [c["case"] for c in ab], series, f"route A/B ({ab[0]['op']}), {env['device']}")
        else:
            ops = report["overhead"]["ops"]
            series = [
                (label, [_summary([u for run in o["runs"] for u in run[key]]) for o in ops])
                for label, key in ((ops[0]["plain_label"], "plain_us"), ("flagos native", "flagos_us"))
            ]
            _bars(ax, [o["op"] for o in ops], series, "host overhead per op, small inputs, in-process pairs")
    title = (
        f"torch_fl bench: {env['vendor']}  torch {env['torch']}  torch_fl {env['torch_fl']}  "
        f"{env.get('commit', '')[:12]}  {env['date']}"
    )
    return png(fig, title, dpi=110)
