"""torch_fl benchmark: route A/B per case, host overhead per op class and the training step, in readable reports.

    python -m torch_fl.bench                       # full: 2 runs, warm-up 30, repeat 200
    python -m torch_fl.bench --short --out /tmp/b  # CI: 1 run, few repeats
    python -m torch_fl.bench --compare reports/cpu/bench/bench.json --max-ratio 1.5

Each measurement runs in a process of its own (child.py): one per (case, arm, run) for the A/B, one per
run for the overhead ops (both arms in it), and for the training step sets of one process per arm, all alive
together and timed in turns (lockstep.py). This module only plans,
collects, checks routes and writes reports; it makes no tensor and touches no device (the package import that
``-m`` makes does load torch_fl here). docs/bench.md lists every option and the report format.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._atomic import write_atomic
from . import cases, lockstep, plot, report

# Started by its path, not with -m: `-m torch_fl.bench.child` would import the torch_fl package into every child,
# plain arms included, and before child.py pins its CPU.
CHILD = Path(__file__).resolve().with_name("child.py")
FULL = {"runs": 2, "warmup": 30, "repeat": 200, "step": [256], "step_procs": 5, "step_steps": 200}
SHORT = {"runs": 1, "warmup": 5, "repeat": 50, "step": [64], "step_procs": 2, "step_steps": 3}
ROUTE_ALIASES = {"cuda": "native"}  # as the router logs them


class BenchError(RuntimeError):
    """A measurement that cannot be trusted (a child failed, or took another route than its arm)."""


@dataclass(frozen=True)
class Options:
    vendor: str | None
    out: Path | None
    runs: int
    warmup: int
    repeat: int
    batches: int
    threads: int
    cpu: int | None
    routes: tuple[str, ...]
    cases: tuple[cases.Case, ...]
    overhead: bool
    step: tuple[int, ...]
    step_procs: int
    step_steps: int
    step_profile: bool
    control: bool
    paired: int
    paired_arms: tuple[str, ...]
    steady_malloc: bool
    timeout: float
    short: bool


AB_METHOD = (
    "One process per (case, arm, run). The plain arm runs the op on plain torch tensors of the vendor device "
    "in a process without torch_fl; a flagos arm forces the op's route with FLAGOS_OP_<op>=<route> and confirms "
    "it from the dispatch log on one call made before the timed loop (log off while timing). Inputs are built "
    "on the host and moved to the device. After the warm-up, a synchronized batch of `repeat` calls: µs per "
    "call = batch time / repeat ({batches}). Ratios are taken run against run. Only ratios carry over between "
    "machines."
)
PAIRED_METHOD = (
    "One process per (case, run) with torch_fl loaded. The same inputs are built on the plain vendor device and "
    "on flagos; the flagos arms ({arms}) share the flagos inputs and switch the op's route at run time "
    "(FLAGOS_OP_<op> and torch_fl.reload_routes, then torch_fl.replay.configure: `flaggems` runs FlagGems' Python "
    "path with the replay off, `flaggems/replay` the same route with the replay on). Each arm's route is confirmed "
    "from the dispatch log on one call after its warm-up; an arm whose route this machine lacks is reported "
    "unavailable with the reason. Then {pairs} rounds of synchronized batches of `repeat` calls, one batch per "
    "arm, the order rotated every round (P A B, A B P, ...), each batch after a few untimed calls of its arm. "
    "Each batch's ratio to the plain batch of its round is kept; a case's figure per arm is the median ratio over "
    "every round of every run. Calls on plain vendor tensors never reach torch_fl, so the plain arm is plain "
    "torch; what the process itself does to all arms (its memory layout, its core) cancels in each ratio."
)
OVERHEAD_METHOD = (
    "One process per run with torch_fl loaded and a conf that routes every op to native. For each op, the same "
    f"small inputs (16x16 float32; lists of {cases.LIST_LEN} such tensors) are built on the plain vendor device "
    f"and on flagos, and {cases.OVERHEAD_PAIRS} rounds of synchronized batches of `repeat` calls alternate between "
    "them. Calls on plain vendor tensors never reach torch_fl, so that arm is plain torch. µs per call is the "
    "median over the rounds; the host overhead is flagos minus plain, per round. A third arm in the same rotation "
    "runs the same flagos tensors with vendor aliases built anew on every call (alias reuse switched off): the "
    "overhead before that reuse, measured beside it. Bookkeeping ops are the device's own kernels (views, "
    "allocation, copies): they never reach the router and log nothing."
)
STEP_METHOD = (
    f"The training step of a {cases.STEP_LAYERS}-layer TransformerEncoder ({cases.STEP_HEADS} heads, ffn 4 x "
    f"d_model, sequence {cases.STEP_SEQ}, batch {cases.STEP_BATCH}), forward, backward and AdamW (foreach). Arms: "
    "plain {plain} without torch_fl, flagos with the shipped conf, flagos with every op native, and plain {plain} "
    "again (the A/A control). They cannot share a process (one accelerator per process), so each process set "
    "holds one process per arm, all alive at once: each sets its step up and takes {warmup} untimed steps (the "
    "first with the dispatch log on, to record the routes), then all are pinned to one CPU and take turns of "
    "{turn} synchronized steps, one arm at a time while the others wait, the order rotated every round, "
    "{rounds} rounds per set. A turn's figure is its median step; an arm's ratio to plain is taken within each "
    "round (the arms of a round ran within a fraction of a second of each other) and its median over every "
    "round of every set is the figure reported, beside the range of the per-set medians. The A/A arm's ratio is "
    "the noise floor: a ratio inside it is not a measured difference."
)
STEP_TURN = 5  # synchronized steps per turn: long enough to time, short enough to pair closely


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
        raise argparse.ArgumentTypeError(f"{text} is not a CPU this process may use ({allowed[0]}..{allowed[-1]}), "
                                         "'auto' or 'none'")
    return int(text)


def _step_sizes(text: str) -> list[int]:
    if text == "none":
        return []
    try:
        sizes = [int(part) for part in _csv(text)]
    except ValueError:
        sizes = []
    if not sizes or any(d < 4 or d % cases.STEP_HEADS for d in sizes):
        raise argparse.ArgumentTypeError(f"{text!r}: d_model values must be multiples of {cases.STEP_HEADS} "
                                         "(the heads), comma separated, or 'none'")
    return sizes


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _paired_arms(text: str) -> list[str]:
    arms = list(dict.fromkeys(_csv(text)))
    unknown = [a for a in arms if a not in cases.PAIRED_ARMS]
    if not arms or unknown:
        raise argparse.ArgumentTypeError(f"{text!r}: paired arms are comma separated names among "
                                         f"{', '.join(cases.PAIRED_ARMS)}")
    return arms


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m torch_fl.bench", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, help="report directory (default reports/<vendor>/bench)")
    p.add_argument("--vendor", choices=tuple(cases.PLAIN_DEVICE), help="default: torch_fl.accelerator()")
    p.add_argument("--short", action="store_true", help="CI mode: 1 run, warm-up 5, repeat 50 unless given")
    p.add_argument("--runs", type=_positive, help="independent runs, all reported (default 2)")
    p.add_argument("--warmup", type=int, help="calls before the timed batch (default 30)")
    p.add_argument("--repeat", type=_positive, help="calls in the timed batch (default 200)")
    p.add_argument("--batches", type=_positive, default=1,
                   help="A/B: timed batches per process, the median is kept (default 1: the seed's one batch)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads in every child, 0 = torch's default (default 1)")
    p.add_argument("--cpu", type=_cpu_choice, default="auto", metavar="N|auto|none",
                   help="pin every child to this CPU, so no arm pays for a migration the other did not "
                        "(default auto: the highest CPU this process may use; none: no pinning)")
    p.add_argument("--routes", type=_csv, default=list(cases.DEFAULT_ROUTES),
                   help=f"flagos arms, comma separated (default {','.join(cases.DEFAULT_ROUTES)})")
    p.add_argument("--cases", type=_csv, help="A/B cases to run, comma separated (default all)")
    p.add_argument("--control", action="store_true",
                   help="measure the plain arm twice per run (A/A): the ratio between the two is the noise floor")
    p.add_argument("--paired", type=int, default=0, metavar="PAIRS",
                   help="also time plain and flagos native in one process per (case, run), PAIRS alternating "
                        "batches each: differences smaller than the noise between processes (default 0: off)")
    p.add_argument("--paired-arms", type=_paired_arms, default=list(cases.DEFAULT_PAIRED_ARMS), metavar="A[,A...]",
                   help="the flagos arms of --paired, timed beside plain in the same process: "
                        f"{', '.join(cases.PAIRED_ARMS)} (flaggems: the replay off; default native)")
    p.add_argument("--malloc", choices=("steady", "default"), default="steady",
                   help="steady: the same fixed glibc malloc thresholds in every child (GLIBC_TUNABLES), so no "
                        "process pays page faults another does not; default: glibc's adaptive behaviour")
    p.add_argument("--no-overhead", action="store_true", help="skip the dispatch-overhead part")
    p.add_argument("--step", type=_step_sizes, metavar="D[,D...]|none",
                   help="training-step part: the d_model values to time (default 256; --short 64; none: skip)")
    p.add_argument("--step-procs", type=_positive,
                   help="process sets (one process per arm, timed in turns) per d_model (default 5; --short 2)")
    p.add_argument("--step-steps", type=_positive,
                   help=f"timed steps per arm and set, in turns of {STEP_TURN} (default 200; --short 3)")
    p.add_argument("--step-profile", action="store_true",
                   help="also profile each --step d_model's plain and all-native arms in its first lockstep set "
                        "(torch's profiler): calls and self host µs per op and step, side by side")
    p.add_argument("--timeout", type=float, default=600,
                   help="seconds allowed per child process (for the step: per lockstep set, start-up included)")
    p.add_argument("--compare", type=Path, metavar="OLD.json", help="print the change per case against OLD.json")
    p.add_argument("--max-ratio", type=float, metavar="R",
                   help="exit 3 when a case's mean flagos native / plain ratio exceeds R")
    p.add_argument("--render", type=Path, metavar="BENCH.json",
                   help="measure nothing: rewrite the reports from an existing bench.json")
    return p


def options_from(args: argparse.Namespace) -> Options:
    defaults = SHORT if args.short else FULL
    return Options(
        vendor=args.vendor,
        out=args.out,
        runs=args.runs or defaults["runs"],
        warmup=defaults["warmup"] if args.warmup is None else args.warmup,
        repeat=args.repeat or defaults["repeat"],
        batches=args.batches,
        threads=args.threads,
        cpu=args.cpu,
        routes=tuple(dict.fromkeys(args.routes)),
        cases=cases.find_cases(args.cases),
        overhead=not args.no_overhead,
        step=tuple(defaults["step"] if args.step is None else args.step),
        step_procs=args.step_procs or defaults["step_procs"],
        step_steps=args.step_steps or defaults["step_steps"],
        step_profile=args.step_profile,
        control=args.control,
        paired=args.paired,
        paired_arms=tuple(args.paired_arms),
        steady_malloc=args.malloc == "steady",
        timeout=args.timeout,
        short=args.short,
    )


# ---- child processes -------------------------------------------------------------------------------------


def _log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# glibc returns freed memory above its thresholds to the kernel and adapts the mmap threshold to each
# process's history of frees, so a ~1.5 MB result can cost ~30 page faults per call in one process and
# none in the next (seen for plain and flagos alike under emulation). Fixed thresholds, the same for
# every child of every arm, keep the allocator out of the comparison. A GLIBC_TUNABLES of the caller wins.
STEADY_MALLOC = "glibc.malloc.mmap_threshold=67108864:glibc.malloc.trim_threshold=134217728"


def child_env(vendor: str | None, arm: str | None, overrides: dict[str, str] | None = None,
              steady_malloc: bool = True) -> dict[str, str]:
    """The parent's environment without FLAGOS_OP_*/FLAGOS_LOG (they would change or slow every arm)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLAGOS_OP_") and k != "FLAGOS_LOG"}
    env.pop("PYTHONSAFEPATH", None)  # it would keep child.py's own folder, where its sibling is, off sys.path
    if steady_malloc:
        env.setdefault("GLIBC_TUNABLES", STEADY_MALLOC)
    if arm is not None and cases.is_plain(arm):
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"  # an installed torch_fl would load with torch otherwise
    elif vendor is not None:
        env["FLAGOS_ACCELERATOR"] = vendor
    env.update(overrides or {})
    return env


def run_child(spec: dict[str, Any], env: dict[str, str], timeout: float) -> dict[str, Any]:
    what = " ".join(str(spec[k]) for k in ("mode", "case", "arm") if k in spec)
    try:
        proc = subprocess.run([sys.executable, str(CHILD), json.dumps(spec)], capture_output=True, text=True,
                              env=env, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise BenchError(f"{what}: no result within {timeout:.0f} s") from exc
    for line in proc.stdout.splitlines():
        if line.startswith("BENCH-RESULT "):
            return json.loads(line[len("BENCH-RESULT "):])
    tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-25:])
    raise BenchError(f"{what}: no result (exit {proc.returncode}):\n{tail}")


def confirm_route(what: str, logged: list[list[str]], op: str | None, arm: str) -> str:
    """The route the dispatch log shows for ``op`` (every routed op when None); it must be ``arm``."""
    routes = {ROUTE_ALIASES.get(r, r) for o, r in logged if op is None or o == op}
    expected = ROUTE_ALIASES.get(arm, arm)
    if op is not None and not routes:
        raise BenchError(f"{what}: the dispatch log shows no '{op} -> <route>' line; the route is unconfirmed")
    if routes - {expected}:
        raise BenchError(f"{what}: arm {arm!r} but the dispatch log shows {sorted(routes)}; "
                         "the measurement would be of another route")
    return expected


# ---- the two parts ------------------------------------------------------------------------------------------


def probe(opts: Options) -> dict[str, Any]:
    spec = {"mode": "probe", "routes": list(opts.routes), "threads": opts.threads, "cpu": opts.cpu}
    return run_child(spec, child_env(opts.vendor, None, steady_malloc=opts.steady_malloc), opts.timeout)


def device_of(arm: str, vendor: str) -> str:
    return cases.PLAIN_DEVICE[vendor] if cases.is_plain(arm) else cases.FLAGOS_DEVICE


def measure_case(opts: Options, vendor: str, case: cases.Case, arm: str, run: int) -> dict[str, Any]:
    spec = {"mode": "case", "case": case.name, "arm": arm, "device": device_of(arm, vendor),
            "warmup": opts.warmup, "repeat": opts.repeat, "batches": opts.batches, "threads": opts.threads,
            "cpu": opts.cpu}
    overrides = {} if cases.is_plain(arm) else {cases.override_var(case.op): arm}
    result = run_child(spec, child_env(vendor, arm, overrides, opts.steady_malloc), opts.timeout)
    what = f"run {run + 1} {case.name} {arm}"
    result["route"] = None if cases.is_plain(arm) else confirm_route(what, result["logged"], case.op, arm)
    confirmed = f" (route {result['route']} confirmed)" if result["route"] else ""
    _log(f"{what}: {result['us']:.2f} µs/call{confirmed}")
    return result


def _arm_summary(results: list[dict[str, Any]], label: str, reason: str | None) -> dict[str, Any]:
    route = results[0]["route"] if results else None
    entry = report.arm_entry(label, [r["us"] for r in results] or None, reason, route)
    if results and len(results[0]["batches"]) > 1:
        entry["batches_us"] = [r["batches"] for r in results]
    return entry


def measure_ab(opts: Options, vendor: str, unavailable: dict[str, dict[str, str | None]]) -> list[dict[str, Any]]:
    arms = (cases.PLAIN, *opts.routes, *((cases.CONTROL,) if opts.control else ()))
    unavailable = {**unavailable, cases.CONTROL: unavailable[cases.PLAIN]}
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for run in range(opts.runs):
        for case in opts.cases:
            for arm in arms:
                if unavailable[arm][case.op] is None:
                    runs.setdefault((case.name, arm), []).append(measure_case(opts, vendor, case, arm, run))
    summary = []
    for case in opts.cases:
        entries = {arm: _arm_summary(runs.get((case.name, arm), []), cases.arm_label(arm, vendor),
                                     unavailable[arm][case.op]) for arm in arms}
        report.add_ratios(entries, cases.PLAIN, "native")
        summary.append({"case": case.name, "op": case.op, "note": case.note, "arms": entries})
    return summary


def _confirm_paired(what: str, op: str, result: dict[str, Any]) -> None:
    """Every measured arm of one paired process took its own route (the log's route string is the arm's name)."""
    for arm, got in result["arms"].items():
        if "reason" not in got:
            got["route"] = confirm_route(f"{what} {arm}", got["logged"], op, arm)


def _paired_log(what: str, result: dict[str, Any], pairs: int) -> None:
    for arm, got in result["arms"].items():
        if "reason" in got:
            _log(f"{what}: flagos {arm} unavailable: {got['reason']}")
        else:
            _log(f"{what}: median flagos {arm} / plain {report.median(got['ratios']):.3f}x over {pairs} pairs "
                 f"(route {got['route']} confirmed)")


def _check_availability(case: str, runs: list[dict[str, Any]]) -> None:
    """An arm is measured in every run or in none: a route that comes and goes is not a measurement."""
    for arm in runs[0]["arms"]:
        unavailable = ["reason" in run["arms"][arm] for run in runs]
        if any(unavailable) and not all(unavailable):
            reason = next(run["arms"][arm]["reason"] for run in runs if "reason" in run["arms"][arm])
            raise BenchError(f"paired {case} {arm}: measured in some runs, unavailable in others ({reason})")


def measure_paired(opts: Options, vendor: str) -> dict[str, Any]:
    per_case: dict[str, list[dict[str, Any]]] = {case.name: [] for case in opts.cases}
    for run in range(opts.runs):
        for case in opts.cases:
            spec = {"mode": "paired", "case": case.name, "arm": "native", "arms": list(opts.paired_arms),
                    "device": cases.FLAGOS_DEVICE, "plain_device": cases.PLAIN_DEVICE[vendor],
                    "warmup": opts.warmup, "repeat": opts.repeat, "pairs": opts.paired, "threads": opts.threads,
                    "cpu": opts.cpu}
            # The process starts on native, a route every vendor loads; the child switches arms itself.
            env = child_env(vendor, "native", {cases.override_var(case.op): "native"}, opts.steady_malloc)
            result = run_child(spec, env, opts.timeout)
            what = f"paired run {run + 1} {case.name}"
            _confirm_paired(what, case.op, result)
            _paired_log(what, result, opts.paired)
            per_case[case.name].append(result)
    labels = {arm: cases.arm_label(arm, vendor) for arm in opts.paired_arms}
    for case in opts.cases:
        _check_availability(case.name, per_case[case.name])
    return {"method": PAIRED_METHOD.format(pairs=opts.paired, arms=", ".join(opts.paired_arms)),
            "arms": list(opts.paired_arms),
            "cases": [report.paired_entry(case.name, per_case[case.name], labels) for case in opts.cases]}


def _all_native_conf(tmp: str) -> Path:
    conf = Path(tmp, "all_native.conf")
    conf.write_text(cases.OVERHEAD_CONF)
    return conf


def measure_overhead(opts: Options, vendor: str) -> dict[str, Any]:
    per_run: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="torch_fl_bench_") as tmp:
        env = child_env(vendor, "native", {"FLAGOS_BACKEND_CONFIG": str(_all_native_conf(tmp))}, opts.steady_malloc)
        for run in range(opts.runs):
            spec = {"mode": "overhead", "arm": "native", "device": cases.FLAGOS_DEVICE,
                    "plain_device": cases.PLAIN_DEVICE[vendor], "warmup": opts.warmup, "repeat": opts.repeat,
                    "threads": opts.threads, "cpu": opts.cpu}
            per_run.append(run_child(spec, env, opts.timeout)["ops"])
            _log(f"run {run + 1} overhead: done")
    ops = []
    for item in cases.OVERHEAD_OPS:
        runs = [r[item.name] for r in per_run]
        for run in runs:
            confirm_route(f"overhead {item.name}", run["logged"], None, "native")
        ops.append(report.overhead_entry(item.name, item.kind, item.note, runs, cases.arm_label(cases.PLAIN, vendor)))
    return {"method": OVERHEAD_METHOD, "ops": ops}


def measure_step(opts: Options, vendor: str, done: Callable[[dict[str, Any]], None],
                 profiles: dict[int, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The step part in lockstep sets (lockstep.py); ``done`` gets the part after every d_model (a partial
    report's). With ``profiles``, the first set of each d_model also profiles its plain and all-native arms."""
    arms = (*cases.STEP_ARMS, cases.CONTROL)
    turn = min(STEP_TURN, opts.step_steps)
    rounds = -(-opts.step_steps // turn)
    method = STEP_METHOD.format(plain=cases.PLAIN_DEVICE[vendor], warmup=3, turn=turn, rounds=rounds)
    labels = {arm: cases.arm_label(arm, vendor) if arm != cases.STEP_SHIPPED else "flagos shipped conf"
              for arm in arms}
    sizes: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="torch_fl_bench_") as tmp:
        conf = _all_native_conf(tmp)
        for d_model in opts.step:
            sets = []
            for number in range(opts.step_procs):
                children = {}
                for arm in arms:
                    spec = {"mode": "step_lockstep", "arm": arm, "device": device_of(arm, vendor), "d_model": d_model,
                            "warmup": 3, "threads": opts.threads, "cpu": None, "time_cpu": opts.cpu}
                    overrides = {"FLAGOS_BACKEND_CONFIG": str(conf)} if arm == "native" else {}
                    children[arm] = ([sys.executable, str(CHILD), json.dumps(spec)],
                                     child_env(vendor, arm, overrides, opts.steady_malloc))
                what = f"step d_model {d_model} set {number + 1}"
                try:
                    with lockstep.Group(children, opts.timeout) as group:
                        confirm_route(f"{what} native", group.info["native"]["logged"], None, "native")
                        first = number % len(arms)  # each set starts its rotation one arm later
                        measured = group.rounds(rounds, turn, order=arms[first:] + arms[:first])
                        if profiles is not None and number == 0:
                            profiles[d_model] = {arm: group.ask(arm, "profile", cases.STEP_PROFILE_STEPS)["ops"]
                                                 for arm in (cases.PLAIN, "native")}
                except lockstep.LockstepError as exc:
                    raise BenchError(f"{what}: {exc} (no result within {opts.timeout:.0f} s for the set)") from exc
                sets.append({"info": group.info, "rounds": measured})
                entry = report.step_set_summary(measured)
                _log(f"{what}: " + ", ".join(f"{arm} {entry[arm]['ms']:.2f} ms ({entry[arm]['vs_plain']:.3f}x)"
                                              for arm in arms))
            sizes.append(report.step_entry(d_model, labels, sets))
            done({"method": method, "sizes": list(sizes)})
    return {"method": method, "sizes": sizes}


STEP_PROFILE_METHOD = (
    "In the first lockstep set of each d_model, after its timed rounds, the plain {plain} process and the flagos "
    "one with every op native each run {steps} steps under torch.profiler with host activity only, one right "
    "after the other while the other arms wait. Per op name (what the dispatcher saw), calls and self host µs "
    "per step; flagos minus plain, largest first. The profiler adds its own cost to every op it records, so "
    "these are leads to where time goes, larger than the step times' difference; ops only one arm runs show as "
    "0 calls in the other."
)


def step_profile_part(vendor: str, profiles: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """The step profile from what measure_step collected: per d_model, the plain and the all-native arm's ops."""
    sizes = []
    for d_model, ops in profiles.items():
        sizes.append(report.step_profile_entry(d_model, ops[cases.PLAIN], ops["native"]))
        _log(f"step profile d_model {d_model}: self host µs per step, plain {sizes[-1]['plain_us']:.0f}, "
             f"flagos {sizes[-1]['flagos_us']:.0f}")
    method = STEP_PROFILE_METHOD.format(plain=cases.PLAIN_DEVICE[vendor], steps=cases.STEP_PROFILE_STEPS)
    return {"method": method, "sizes": sizes}


# ---- environment and assembly ---------------------------------------------------------------------------------


def git_commit(package_dir: str) -> str:
    """TORCH_FL_COMMIT, else HEAD of the checkout torch_fl was imported from, else "unknown"."""
    if os.environ.get("TORCH_FL_COMMIT"):
        return os.environ["TORCH_FL_COMMIT"]
    try:
        # Only when torch_fl's own files are tracked there: a venv inside some checkout is not a source tree.
        tracked = subprocess.run(["git", "-C", package_dir, "ls-files", "--error-unmatch", "__init__.py"],
                                 capture_output=True, check=False, timeout=10)
        if tracked.returncode != 0:
            return "unknown"
        head = subprocess.run(["git", "-C", package_dir, "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=False, timeout=10)
        return head.stdout.strip() if head.returncode == 0 else "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def _batches_text(batches: int) -> str:
    return "one batch per process" if batches == 1 else f"median of {batches} batches per process"


def measure(opts: Options, checkpoint: Callable[[dict[str, Any]], None] = lambda result: None) -> dict[str, Any]:
    """Every part in turn. ``checkpoint`` gets the report after each part (``complete`` false until the end), so a
    run stopped from outside (a node's time limit) still leaves what it measured."""
    facts = probe(opts)
    env = facts["environment"]
    vendor = env["vendor"]
    env["commit"] = git_commit(env["torch_fl_path"])
    for arm, reasons in facts["unavailable"].items():
        for op, reason in reasons.items():
            if reason is not None:
                _log(f"{cases.arm_label(arm, vendor)} unavailable for {op}: {reason}")
    _log(f"vendor {vendor}, device {env['device']}, {opts.runs} run(s), warm-up {opts.warmup}, repeat {opts.repeat}")
    ab = measure_ab(opts, vendor, facts["unavailable"])
    result: dict[str, Any] = {
        "schema": report.SCHEMA,
        "environment": env,
        "settings": {"runs": opts.runs, "warmup": opts.warmup, "repeat": opts.repeat, "batches": opts.batches,
                     "threads": opts.threads, "cpu": opts.cpu,
                     "short": opts.short, "routes": list(opts.routes), "cases": [c.name for c in opts.cases],
                     "overhead_pairs": cases.OVERHEAD_PAIRS, "paired": opts.paired,
                     "paired_arms": list(opts.paired_arms),
                     "step": list(opts.step), "step_procs": opts.step_procs, "step_steps": opts.step_steps,
                     "step_profile": opts.step_profile,
                     "glibc_tunables": os.environ.get("GLIBC_TUNABLES", STEADY_MALLOC if opts.steady_malloc else None)},
        "method": {"ab": AB_METHOD.format(batches=_batches_text(opts.batches)), "overhead": OVERHEAD_METHOD},
        "ab": ab,
        "acceptance": report.acceptance(ab, report.goal_for(vendor)),
        "complete": False,
        "paired": None, "overhead": None, "step": None, "step_profile": None,
    }
    result["acceptance"]["paired"] = None
    checkpoint(result)
    if opts.paired:
        result["paired"] = measure_paired(opts, vendor)
        result["acceptance"]["paired"] = report.paired_acceptance(result["paired"], report.goal_for(vendor))
        checkpoint(result)
    if opts.overhead:
        result["overhead"] = measure_overhead(opts, vendor)
        checkpoint(result)
    if opts.step:
        profiles: dict[int, dict[str, Any]] | None = {} if opts.step_profile else None
        result["step"] = measure_step(opts, vendor, lambda step: checkpoint({**result, "step": step}), profiles)
        if profiles is not None:
            result["step_profile"] = step_profile_part(vendor, profiles)
    result["complete"] = True
    return result


def load_saved(path: Path) -> dict[str, Any]:
    result = json.loads(path.read_text())
    goal = report.goal_for(result["environment"]["vendor"])
    result["acceptance"] = report.acceptance(result["ab"], goal)  # derived data follows this version's rules
    result["acceptance"]["paired"] = report.paired_acceptance(result.get("paired"), goal)
    return result


def write_reports(result: dict[str, Any], out: Path) -> list[Path]:
    files = {
        "bench.json": (json.dumps(result, indent=2) + "\n").encode(),
        "bench.md": report.to_markdown(result).encode(),
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
        result = load_saved(args.render) if args.render else measure(opts, lambda r: write_reports(r, out_for(r)))
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    out = out_for(result)
    for path in write_reports(result, out):
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


if __name__ == "__main__":
    sys.exit(main())
