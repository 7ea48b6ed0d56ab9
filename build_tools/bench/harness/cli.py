"""The benchmark harness: the node check's route A/B plus paired sets, host overhead per op class and the training
step, in readable reports (bench.json, bench.md, bench.png), with the project's goals, a comparison and a gate.

    python -m harness                              # from build_tools/bench; full: 2 runs, warm-up 30, repeat 200
    python -m harness --short --out /tmp/b         # CI: 1 run, few repeats
    python -m harness --compare reports/cpu/bench/bench.json --max-ratio 1.5

It runs against the installed torch_fl and builds on its node check (torch_fl/bench/run.py); docs/bench.md lists
every option and the report format.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from torch_fl._atomic import write_atomic
from torch_fl.bench import run as node

from . import command_line, markdown, measure, plot, report, workloads

FULL = {"step": [256], "step_procs": 5, "step_steps": 200}
SHORT = {"step": [64], "step_procs": 2, "step_steps": 3}


def _step_sizes(text: str) -> list[int]:
    if text == "none":
        return []
    try:
        sizes = [int(part) for part in node._csv(text)]
    except ValueError:
        sizes = []
    if not sizes or any(d < 4 or d % workloads.STEP_HEADS for d in sizes):
        raise argparse.ArgumentTypeError(
            f"{text!r}: d_model values must be multiples of {workloads.STEP_HEADS} "
            "(the heads), comma separated, or 'none'"
        )
    return sizes


def _paired_arms(text: str) -> list[str]:
    arms = list(dict.fromkeys(node._csv(text)))
    unknown = [a for a in arms if a not in workloads.PAIRED_ARMS]
    if not arms or unknown:
        raise argparse.ArgumentTypeError(
            f"{text!r}: paired arms are comma separated names among {', '.join(workloads.PAIRED_ARMS)}"
        )
    return arms


def build_parser() -> argparse.ArgumentParser:
    p = command_line.parser("", __doc__)
    node.add_options(p)
    p.add_argument("--out", type=Path, help="report directory (default reports/<accelerator>/bench)")
    p.add_argument(
        "--paired",
        type=int,
        default=0,
        metavar="PAIRS",
        help="also time plain and flagos native in one process per (case, run), PAIRS alternating "
        "batches each: differences smaller than the noise between processes (default 0: off)",
    )
    p.add_argument(
        "--paired-arms",
        type=_paired_arms,
        default=list(workloads.DEFAULT_PAIRED_ARMS),
        metavar="A[,A...]",
        help="the flagos arms of --paired, timed beside plain in the same process: "
        f"{', '.join(workloads.PAIRED_ARMS)} (flaggems: the replay off; default native)",
    )
    p.add_argument("--no-overhead", action="store_true", help="skip the dispatch-overhead part")
    p.add_argument(
        "--step",
        type=_step_sizes,
        metavar="D[,D...]|none",
        help="training-step part: the d_model values to time (default 256; --short 64; none: skip)",
    )
    p.add_argument(
        "--step-procs",
        type=node._positive,
        help="process sets (one process per arm, timed in turns) per d_model (default 5; --short 2)",
    )
    p.add_argument(
        "--step-steps",
        type=node._positive,
        help=f"timed steps per arm and set, in turns of {measure.STEP_TURN} (default 200; --short 3)",
    )
    p.add_argument(
        "--step-timeout",
        type=float,
        metavar="S",
        help="seconds allowed per lockstep set of the step part, start-up included (default --timeout)",
    )
    p.add_argument(
        "--step-profile",
        action="store_true",
        help="also profile each --step d_model's plain and all-native arms in its first lockstep set "
        "(torch's profiler): calls and self host µs per op and step, side by side",
    )
    p.add_argument(
        "--llm",
        type=int,
        default=0,
        metavar="SETS",
        help="also the compiled decoder LLM training step (harness/llm.py: an HF Llama of 155M "
        "parameters, seq 1024, bf16; on the emulation and under --short a 1-layer one, traced "
        "only) in SETS lockstep sets of compiled flagos, compiled plain and plain again: time and "
        "peak memory (default 0: off)",
    )
    p.add_argument(
        "--decode",
        type=int,
        default=0,
        metavar="SETS",
        help="also greedy decoding of a small HF Llama with a StaticCache (harness/decode.py), plain and "
        "flagos eager, compiled and reduce-overhead with an A/A, in SETS lockstep sets: tokens/s "
        "and identical tokens (on the emulation and under --short a 1-layer dry run; default 0: off)",
    )
    p.add_argument(
        "--zoo",
        action="store_true",
        help="also the model zoo (harness/zoo.py): eight architectures' training steps eager and compiled and the "
        "decoders' greedy decoding, flagos against plain and plain again (on the emulation and under --short "
        "tiny, compiled traced only)",
    )
    p.add_argument(
        "--profdiff",
        default="",
        metavar="MODEL[,MODEL]",
        help="also the profile diff of these zoo models' eager training steps (harness/profdiff.py): per ATen op "
        "and per kernel, flagos against plain (with --zoo, after its timing, in its processes)",
    )
    p.add_argument("--compare", type=Path, metavar="OLD.json", help="print the change per case against OLD.json")
    p.add_argument(
        "--max-ratio", type=float, metavar="R", help="exit 3 when a case's mean flagos native / plain ratio exceeds R"
    )
    p.add_argument(
        "--render",
        type=Path,
        metavar="BENCH.json",
        help="measure nothing: rewrite the reports from an existing bench.json",
    )
    return p


def options_from(args: argparse.Namespace) -> measure.Options:
    defaults = SHORT if args.short else FULL
    return measure.Options(
        **node.option_values(args),
        out=args.out,
        overhead=not args.no_overhead,
        step=tuple(defaults["step"] if args.step is None else args.step),
        step_procs=args.step_procs or defaults["step_procs"],
        step_steps=args.step_steps or defaults["step_steps"],
        step_timeout=args.step_timeout or args.timeout,
        step_profile=args.step_profile,
        paired=args.paired,
        paired_arms=tuple(args.paired_arms),
        llm=args.llm,
        decode=args.decode,
        zoo=args.zoo,
        profdiff=args.profdiff,
    )


def load_saved(path: Path) -> dict[str, Any]:
    result = json.loads(path.read_text())
    goal = report.goal_for(result["environment"]["vendor"])
    result["acceptance"] = report.acceptance(result["ab"], goal)  # derived data follows this version's rules
    result["acceptance"]["paired"] = report.paired_acceptance(result.get("paired"), goal)
    return result


def write_reports(result: dict[str, Any], out: Path) -> list[Path]:
    files = {
        "bench.json": (json.dumps(result, indent=2) + "\n").encode(),
        "bench.md": markdown.to_markdown(result).encode(),
        "bench.png": plot.render_png(result),
    }
    for name, data in files.items():
        write_atomic(out / name, data)
    return [out / name for name in files]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    plot.require_matplotlib()
    opts = options_from(args)

    def out_for(result: dict[str, Any]) -> Path:
        return opts.out or Path("reports") / result["environment"]["vendor"] / "bench"

    try:
        result = (
            load_saved(args.render) if args.render else measure.measure(opts, lambda r: write_reports(r, out_for(r)))
        )
    except node.BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for path in write_reports(result, out_for(result)):
        print(f"wrote {path}")
    if args.compare:
        print(report.compare(json.loads(args.compare.read_text()), result))
    print(report.short_table(result))
    if args.max_ratio is not None:
        failed = report.gate(result, args.max_ratio)
        for line in failed:
            print(f"gate failed: {line}", file=sys.stderr)
        if failed:
            return 3
    return 0
