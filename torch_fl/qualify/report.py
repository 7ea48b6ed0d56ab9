"""The qualification report: per operator a verdict per dtype, the first failing sample with a one-line
reproduction, and the provider/native time where it passed; as JSON (what the conf generator reads) and as a
markdown table people read. Its key is (vendor, torch line, provider, provider version)."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

from .._atomic import write_atomic
from .._chain import INPUT_CLASSES
from . import verdict
from .routes import SLOW, too_slow  # one bar: an operator the report marks slow is one the qualified conf keeps native


def torch_line(version: str) -> str:
    """``2.11.0+cu130`` -> ``2.11``."""
    return ".".join(version.split("+")[0].split(".")[:2])


def key(meta: dict) -> str:
    """``flaggems-5.0.2-cuda-torch2.11``: the file name of a committed report."""
    version = meta.get("version") or "unversioned"
    return f"{meta['provider']}-{version}-{meta['accelerator']}-torch{torch_line(meta['torch'])}"


def repro(meta: dict, op: str, index: int | None) -> str:
    extra = "".join(f" --import {m}" for m in meta.get("imports", []))
    sample = f" --sample {index}" if index is not None else ""
    samples = meta.get("samples", "SAMPLES")
    return f"python -m torch_fl qualify --provider {meta['provider']}{extra} --ops {op}{sample} --samples {samples}"


def build(meta: dict, events: list[dict]) -> dict:
    """The report of a run: every qualified operator with its verdict (``pending`` when the run has not reached
    it yet)."""
    samples: dict[tuple[str, int], dict] = {}
    ops: dict[str, dict[str, Any]] = {}
    speeds: dict[str, list[dict]] = {}
    tuning: dict[str, float] = {}
    carried: dict[str, dict] = {}  # op -> the record an extended report gave it (extend.py)
    standing: dict[str, dict] = {}  # op -> the record it keeps until this run finishes it again (--retime)
    for e in events:
        op = e.get("op")
        if e["event"] in ("carried", "standing"):
            kept = carried if e["event"] == "carried" else standing
            kept[op] = {**e["record"], "carried_from": e["record"].get("carried_from") or e.get("from")}
        elif e["event"] == "start":
            tuning.pop(op, None)  # a rerun of an operator (after a crash of its worker) measures it again
            carried.pop(op, None)  # an operator this run measures is this run's
        elif e["event"] == "tuned":
            tuning[op] = tuning.get(op, 0.0) + e["seconds"]
        elif e["event"] == "sample":
            samples[(op, e["index"])] = e
        elif e["event"] == "verdict":
            entry = {"dtypes": e["dtypes"], "no_sample": e.get("no_sample", {})}
            if e.get("unsupported"):
                entry["unsupported"] = e["unsupported"]
            ops[op] = entry
        elif e["event"] in (verdict.CRASH, verdict.TIMEOUT):
            s = samples.get((op, e.get("index")), {})
            dtype = e.get("dtype") or s.get("dtype") or "any"
            ops[op] = {
                "dtypes": {
                    dtype: {
                        "verdict": e["event"],
                        "samples": 1,
                        "bitwise": False,
                        "failure": {
                            "verdict": e["event"],
                            "index": e.get("index"),
                            "sample": s.get("sample", "?"),
                            "detail": e.get("detail", ""),
                            **({"classes": s["classes"]} if s.get("classes") else {}),
                        },
                    }
                }
            }
        elif e["event"] == "native-fault":
            ops[op] = {"dtypes": {}, "unsupported": f"the native reference faulted the device: {e.get('detail')}"}
        elif e["event"] == "speed":
            speeds.setdefault(op, []).append(
                {k: e[k] for k in ("sample", "source", "native_us", "ratio", "aa", "reps", "rounds")}
                | {"alone": bool(e.get("alone"))}  # timed with the device to itself (older runs' were not)
                | ({"at": e["at"]} if "at" in e else {})  # largest or smallest (older runs timed the two largest)
            )
    out_ops: dict[str, dict] = {}
    for op in meta["qualified_ops"]:
        entry = ops.get(op)
        if entry is None:
            out_ops[op] = carried.get(op) or standing.get(op) or {"verdict": "pending"}
            if "speed" in out_ops[op]:  # judged by this tree's bar, as the confs written from it are
                out_ops[op]["slow"] = too_slow(out_ops[op])
            continue
        dtypes = entry["dtypes"]
        no_sample = entry.get("no_sample", {})
        overall = verdict.worst([d["verdict"] for d in dtypes.values()])
        if not dtypes and no_sample:
            overall = verdict.NO_SAMPLE
        if entry.get("unsupported"):
            overall = verdict.UNSUPPORTED
        record: dict[str, Any] = {"verdict": overall, "dtypes": dtypes}
        if no_sample:
            record["no_sample"] = no_sample  # dtype -> why no sample of it can be made
        if entry.get("unsupported"):
            record["detail"] = entry["unsupported"]
        elif overall == verdict.NO_SAMPLE:
            record["detail"] = "; ".join(f"{d}: {why}" for d, why in sorted(no_sample.items()))
        if op in tuning:
            record["tuning_s"] = round(tuning[op], 3)  # its samples' first provider calls: autotuning, not a hang
        failing = [(d, v["failure"]) for d, v in dtypes.items() if "failure" in v]
        if failing:
            d, f = min(failing, key=lambda x: verdict.ORDER.index(x[1]["verdict"]))
            record["failure"] = {**f, "dtype": d, "repro": repro(meta, op, f.get("index"))}
        if op in speeds:
            ratios = [s["ratio"] for s in speeds[op]]
            record["speed"] = {
                "ratio": math.exp(sum(map(math.log, ratios)) / len(ratios)),
                "aa": math.exp(sum(math.log(s["aa"]) for s in speeds[op]) / len(ratios)),
                "samples": speeds[op],
                "alone": all(x["alone"] for x in speeds[op]),
            }
            record["slow"] = too_slow(record)
        out_ops[op] = record
    counts = Counter(r["verdict"] for r in out_ops.values())
    kept = [op for op in meta["qualified_ops"] if (op in carried or op in standing) and op not in ops]
    return {
        "key": key(meta),
        "vendor": meta["accelerator"],
        "torch": meta["torch"],
        "torch_line": torch_line(meta["torch"]),
        "provider": meta["provider"],
        "provider_version": meta.get("version"),
        "torch_fl": meta.get("torch_fl"),
        "dtypes": meta.get("dtypes", []),
        "input_classes": list(INPUT_CLASSES),  # what the verdicts' `except` and crash inference sorted by
        "counts": {v: counts.get(v, 0) for v in (*verdict.ORDER, "pending") if counts.get(v, 0) or v == verdict.PASS},
        "dtype_counts": dtype_counts(out_ops),
        "tuning_s": round(sum(tuning.values()) + sum(out_ops[op].get("tuning_s", 0.0) for op in kept), 3),
        "carried": len(kept),
        "ops": out_ops,
    }


def dtype_counts(ops: dict[str, dict]) -> dict[str, dict[str, int]]:
    """Per dtype, how many operators got each verdict in it (``no sample`` where none can be made)."""
    out: dict[str, Counter] = {}
    for r in ops.values():
        for d, v in r.get("dtypes", {}).items():
            out.setdefault(d, Counter())[v["verdict"]] += 1
        for d in r.get("no_sample", {}):
            if d not in r.get("dtypes", {}):
                out.setdefault(d, Counter())[verdict.NO_SAMPLE] += 1
    order = {v: i for i, v in enumerate(verdict.ORDER)}
    return {d: dict(sorted(c.items(), key=lambda kv: order.get(kv[0], 99))) for d, c in sorted(out.items())}


def markdown(report: dict) -> str:
    lines = [
        f"# Qualification of {report['provider']} {report['provider_version'] or ''} on {report['vendor']}, "
        f"torch {report['torch']}",
        "",
        "| verdict | operators |",
        "|---|---:|",
        *(f"| {v} | {n} |" for v, n in report["counts"].items()),
        "",
        "| dtype | " + " | ".join(verdict.ORDER) + " |",
        "|---|" + "---:|" * len(verdict.ORDER),
        *(
            f"| {d} | " + " | ".join(str(c.get(v, 0)) for v in verdict.ORDER) + " |"
            for d, c in report.get("dtype_counts", {}).items()
        ),
        "",
        *(
            [
                f"{report['carried']} operators' entries are carried from an earlier report of this key (`--extend`; "
                "each names the torch_fl that measured it in `carried_from`).",
                "",
            ]
            if report.get("carried")
            else []
        ),
        f"Tuning: {report.get('tuning_s', 0):.0f} s in all, the first provider call of each sample (autotuning "
        "counts against its own budget, not the hang timeout). `(3 of 12 samples)`: the run's `--tune-for` ended "
        "that operator's sampling after so much autotuning; its verdict stands on the samples that ran, the dtypes "
        "taking turns.",
        "",
        "Speed: provider time / native time (the geometric mean) at the largest and the smallest passing sample "
        "(real workloads' first), in-process pairs with the replay on and the device to itself (no other worker runs "
        "kernels while one times); A/A is native against native. `slow` marks an operator over "
        f"{SLOW:g}x at one of them by more than its A/A's distance from 1, which the qualified conf keeps native.",
        "",
        "`pass except strided` (or `0dim`, `broadcast`, `mixed`): every failing sample of that dtype falls in the "
        f"class and at least {verdict.MIN_SERVED} samples outside it pass; the qualified conf serves the calls outside "
        "it (`contiguous`, `no_0dim`, `same_shape`, `same_dtype` in the route's list) and sends the others native. "
        "A failing sample's classes follow it in parentheses.",
        "",
        "| operator | verdict | dtypes | provider/native (A/A) | tuning s | first failing sample | reproduction |",
        "|---|---|---|---|---|---|---|",
    ]
    for op, r in sorted(report["ops"].items()):
        dtypes = ", ".join(f"{d}: {_dtype_verdict(v)}" for d, v in r.get("dtypes", {}).items()) or "-"
        speed = r.get("speed")
        timing = f"{speed['ratio']:.2f}x ({speed['aa']:.2f}x){' slow' if r.get('slow') else ''}" if speed else "-"
        f = r.get("failure")
        classes = f" ({', '.join(f['classes'])})" if f and f.get("classes") else ""
        failing = (f"{f['sample']}{classes}: {f['detail']}" if f else r.get("detail", "-")).replace("|", "\\|")
        command = f"`{f['repro']}`" if f else "-"
        tuned = f"{r['tuning_s']:.1f}" if "tuning_s" in r else "-"
        lines.append(f"| `{op}` | {r['verdict']} | {dtypes} | {timing} | {tuned} | {failing} | {command} |")
    return "\n".join(lines) + "\n"


def _dtype_verdict(v: dict) -> str:
    """``pass``, ``wrong values``, ``pass except strided, 0dim``; ``(3 of 12 samples)`` where the tuning cut it."""
    text = f"{v['verdict']} {', '.join(v['except'])}" if v.get("except") else v["verdict"]
    return f"{text} ({v['samples']} of {v['samples'] + v['cut']} samples)" if v.get("cut") else text


def write(report: dict, out: Path) -> tuple[Path, Path]:
    paths = (out / "report.json", out / "report.md")
    texts = (json.dumps(report, indent=1, sort_keys=True) + "\n", markdown(report))
    for path, text in zip(paths, texts, strict=True):
        write_atomic(path, text.encode())
    return paths
