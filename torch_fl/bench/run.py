"""The node check: the seed's route A/B against the installed wheel, each arm's route confirmed from the log.

    python -m torch_fl.bench                              # 2 runs, warm-up 30, repeat 200
    python -m torch_fl.bench --short --json /tmp/ab.json  # 1 run, few repeats, the figures kept as JSON

Each measurement runs in a process of its own (child.py), one per (case, arm, run): the plain arm on plain
tensors of the accelerator's torch device without torch_fl, each flagos arm with the op forced onto its route,
which the dispatch log confirms on one call outside the timed loop. This module only plans, collects, checks
routes and prints; it makes no tensor and touches no device (the package import that ``-m`` makes does load
torch_fl here). The research harness (paired sets, overhead, the training step, reports, goals) builds on these
functions from build_tools/bench/harness/; docs/bench.md describes both.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._atomic import write_atomic
from . import cases, stats

# Started by its path, not with -m: `-m torch_fl.bench.child` would import the torch_fl package into every child,
# plain arms included, and before child.py pins its CPU.
CHILD = Path(__file__).resolve().with_name("child.py")
FULL = {"runs": 2, "warmup": 30, "repeat": 200}
SHORT = {"runs": 1, "warmup": 5, "repeat": 50}
ROUTE_ALIASES = {"cuda": "native"}  # as the router logs them


class BenchError(RuntimeError):
    """A measurement that cannot be trusted (a child failed, or took another route than its arm)."""


@dataclass(frozen=True)
class Options:
    accelerator: str | None
    runs: int
    warmup: int
    repeat: int
    batches: int
    threads: int
    cpu: int | None
    routes: tuple[str, ...]
    cases: tuple[cases.Case, ...]
    control: bool
    steady_malloc: bool
    timeout: float
    short: bool


# ---- command line --------------------------------------------------------------------------------------


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def _cpu_choice(text: str) -> int | None:
    if text == "none":
        return None
    allowed = sorted(os.sched_getaffinity(0))
    if text == "auto":
        return allowed[-1]
    if not text.isdigit() or int(text) not in allowed:
        raise argparse.ArgumentTypeError(
            f"{text} is not a CPU this process may use ({allowed[0]}..{allowed[-1]}), 'auto' or 'none'"
        )
    return int(text)


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def add_options(p: argparse.ArgumentParser) -> None:
    """The A/B's options, shared with the harness's command line."""
    p.add_argument("--accelerator", choices=tuple(cases.PLAIN_DEVICE), help="default: torch_fl.accelerator()")
    p.add_argument("--short", action="store_true", help="CI mode: 1 run, warm-up 5, repeat 50 unless given")
    p.add_argument("--runs", type=_positive, help="independent runs, all reported (default 2)")
    p.add_argument("--warmup", type=int, help="calls before the timed batch (default 30)")
    p.add_argument("--repeat", type=_positive, help="calls in the timed batch (default 200)")
    p.add_argument(
        "--batches",
        type=_positive,
        default=1,
        help="A/B: timed batches per process, the median is kept (default 1: the seed's one batch)",
    )
    p.add_argument(
        "--threads", type=int, default=1, help="torch intra-op threads in every child, 0 = torch's default (default 1)"
    )
    p.add_argument(
        "--cpu",
        type=_cpu_choice,
        default="auto",
        metavar="N|auto|none",
        help="pin every child to this CPU, so no arm pays for a migration the other did not "
        "(default auto: the highest CPU this process may use; none: no pinning)",
    )
    p.add_argument(
        "--routes",
        type=_csv,
        default=list(cases.DEFAULT_ROUTES),
        help=f"flagos arms, comma separated (default {','.join(cases.DEFAULT_ROUTES)})",
    )
    p.add_argument("--cases", type=_csv, help="A/B cases to run, comma separated (default all)")
    p.add_argument(
        "--control",
        action="store_true",
        help="measure the plain arm twice per run (A/A): the ratio between the two is the noise floor",
    )
    p.add_argument(
        "--malloc",
        choices=("steady", "default"),
        default="steady",
        help="steady: the same fixed glibc malloc thresholds in every child (GLIBC_TUNABLES), so no "
        "process pays page faults another does not; default: glibc's adaptive behaviour",
    )
    p.add_argument("--timeout", type=float, default=600, help="seconds allowed per child process")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m torch_fl.bench",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_options(p)
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the A/B's figures to FILE")
    return p


def option_values(args: argparse.Namespace) -> dict[str, Any]:
    """The A/B's settings from parsed arguments, as keyword arguments of Options (and of the harness's)."""
    defaults = SHORT if args.short else FULL
    return {
        "accelerator": args.accelerator,
        "runs": args.runs or defaults["runs"],
        "warmup": defaults["warmup"] if args.warmup is None else args.warmup,
        "repeat": args.repeat or defaults["repeat"],
        "batches": args.batches,
        "threads": args.threads,
        "cpu": args.cpu,
        "routes": tuple(dict.fromkeys(args.routes)),
        "cases": cases.find_cases(args.cases),
        "control": args.control,
        "steady_malloc": args.malloc == "steady",
        "timeout": args.timeout,
        "short": args.short,
    }


# ---- child processes -------------------------------------------------------------------------------------


def _log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# glibc returns freed memory above its thresholds to the kernel and adapts the mmap threshold to each
# process's history of frees, so a ~1.5 MB result can cost ~30 page faults per call in one process and
# none in the next (seen for plain and flagos alike under emulation). Fixed thresholds, the same for
# every child of every arm, keep the allocator out of the comparison. A GLIBC_TUNABLES of the caller wins.
STEADY_MALLOC = "glibc.malloc.mmap_threshold=67108864:glibc.malloc.trim_threshold=134217728"


def child_env(
    accelerator: str | None, arm: str | None, overrides: dict[str, str] | None = None, steady_malloc: bool = True
) -> dict[str, str]:
    """The parent's environment without FLAGOS_OP_*/FLAGOS_LOG (they would change or slow every arm)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLAGOS_OP_") and k != "FLAGOS_LOG"}
    env.pop("PYTHONSAFEPATH", None)  # it would keep child.py's own folder, where its sibling is, off sys.path
    if steady_malloc:
        env.setdefault("GLIBC_TUNABLES", STEADY_MALLOC)
    if arm is not None and cases.is_plain(arm):
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"  # an installed torch_fl would load with torch otherwise
    elif accelerator is not None:
        env["FLAGOS_ACCELERATOR"] = accelerator
    env.update(overrides or {})
    return env


def run_child(
    spec: dict[str, Any], env: dict[str, str], timeout: float, command: Sequence[str] = (sys.executable, str(CHILD))
) -> dict[str, Any]:
    """Run one measurement process (``command`` and the spec as its last argument); its BENCH-RESULT."""
    what = " ".join(str(spec[k]) for k in ("mode", "case", "arm") if k in spec)
    try:
        proc = subprocess.run(
            [*command, json.dumps(spec)], capture_output=True, text=True, env=env, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise BenchError(f"{what}: no result within {timeout:.0f} s") from exc
    for line in proc.stdout.splitlines():
        if line.startswith("BENCH-RESULT "):
            return json.loads(line[len("BENCH-RESULT ") :])
    tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-25:])
    raise BenchError(f"{what}: no result (exit {proc.returncode}):\n{tail}")


def confirm_route(what: str, logged: list[list[str]], op: str | None, arm: str) -> str:
    """The route the dispatch log shows for ``op`` (every routed op when None); it must be ``arm``."""
    routes = {ROUTE_ALIASES.get(r, r) for o, r in logged if op is None or o == op}
    expected = ROUTE_ALIASES.get(arm, arm)
    if op is not None and not routes:
        raise BenchError(f"{what}: the dispatch log shows no '{op} -> <route>' line; the route is unconfirmed")
    if routes - {expected}:
        raise BenchError(
            f"{what}: arm {arm!r} but the dispatch log shows {sorted(routes)}; "
            "the measurement would be of another route"
        )
    return expected


# ---- the A/B ----------------------------------------------------------------------------------------------


def probe(opts: Options) -> dict[str, Any]:
    spec = {"mode": "probe", "routes": list(opts.routes), "threads": opts.threads, "cpu": opts.cpu}
    return run_child(spec, child_env(opts.accelerator, None, steady_malloc=opts.steady_malloc), opts.timeout)


def device_of(arm: str, accelerator: str) -> str:
    return cases.PLAIN_DEVICE[accelerator] if cases.is_plain(arm) else cases.FLAGOS_DEVICE


def measure_case(opts: Options, accelerator: str, case: cases.Case, arm: str, run: int) -> dict[str, Any]:
    spec = {
        "mode": "case",
        "case": case.name,
        "arm": arm,
        "device": device_of(arm, accelerator),
        "warmup": opts.warmup,
        "repeat": opts.repeat,
        "batches": opts.batches,
        "threads": opts.threads,
        "cpu": opts.cpu,
    }
    overrides = {} if cases.is_plain(arm) else {cases.override_var(case.op): arm}
    result = run_child(spec, child_env(accelerator, arm, overrides, opts.steady_malloc), opts.timeout)
    what = f"run {run + 1} {case.name} {arm}"
    result["route"] = None if cases.is_plain(arm) else confirm_route(what, result["logged"], case.op, arm)
    confirmed = f" (route {result['route']} confirmed)" if result["route"] else ""
    _log(f"{what}: {result['us']:.2f} µs/call{confirmed}")
    return result


def _arm_summary(results: list[dict[str, Any]], label: str, reason: str | None) -> dict[str, Any]:
    route = results[0]["route"] if results else None
    entry = stats.arm_entry(label, [r["us"] for r in results] or None, reason, route)
    if results and len(results[0]["batches"]) > 1:
        entry["batches_us"] = [r["batches"] for r in results]
    return entry


def measure_ab(opts: Options, accelerator: str, unavailable: dict[str, dict[str, str | None]]) -> list[dict[str, Any]]:
    arms = (cases.PLAIN, *opts.routes, *((cases.CONTROL,) if opts.control else ()))
    unavailable = {**unavailable, cases.CONTROL: unavailable[cases.PLAIN]}
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for run in range(opts.runs):
        for case in opts.cases:
            for arm in arms:
                if unavailable[arm][case.op] is None:
                    runs.setdefault((case.name, arm), []).append(measure_case(opts, accelerator, case, arm, run))
    summary = []
    for case in opts.cases:
        entries = {
            arm: _arm_summary(
                runs.get((case.name, arm), []), cases.arm_label(arm, accelerator), unavailable[arm][case.op]
            )
            for arm in arms
        }
        stats.add_ratios(entries, cases.PLAIN, "native")
        summary.append({"case": case.name, "op": case.op, "note": case.note, "arms": entries})
    return summary


def report_unavailable(facts: dict[str, Any]) -> None:
    """One log line per arm and op that this machine cannot measure, with the reason."""
    accelerator = facts["environment"]["vendor"]
    for arm, reasons in facts["unavailable"].items():
        for op, reason in reasons.items():
            if reason is not None:
                _log(f"{cases.arm_label(arm, accelerator)} unavailable for {op}: {reason}")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    opts = Options(**option_values(args))
    try:
        facts = probe(opts)
        report_unavailable(facts)
        env = facts["environment"]
        _log(
            f"accelerator {env['vendor']}, device {env['device']}, {opts.runs} run(s), warm-up {opts.warmup}, "
            f"repeat {opts.repeat}"
        )
        ab = measure_ab(opts, env["vendor"], facts["unavailable"])
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        write_atomic(args.json, (json.dumps({"environment": env, "ab": ab}, indent=2) + "\n").encode())
        print(f"wrote {args.json}")
    print("\n".join(stats.ab_table(ab)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
