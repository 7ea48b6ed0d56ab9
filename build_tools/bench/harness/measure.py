"""The harness's measurements beyond the node check's A/B, and the report that holds them all.

The A/B itself is the installed node check's (torch_fl/bench/run.py: one process per (case, arm, run), routes
confirmed from the dispatch log); here are the paired in-process sets, the host overhead per op and the training
step in lockstep sets (lockstep.py), each process a worker.py. This module plans and collects; it makes no tensor.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch_fl.bench import cases
from torch_fl.bench import run as node

from . import lockstep, report, workloads

BenchError = node.BenchError
_log = node._log
HERE = Path(__file__).resolve().parent
# Started with -m, the folder above on PYTHONPATH (worker_env), so its relative imports work; it loads the node
# check's child.py by its folder, without the torch_fl package (a plain arm must run without it).
WORKER = (sys.executable, "-m", "harness.worker")


@dataclass(frozen=True)
class Options(node.Options):
    """The node check's options and the harness's own parts."""

    out: Path | None
    overhead: bool
    step: tuple[int, ...]
    step_procs: int
    step_steps: int
    step_timeout: float
    step_profile: bool
    paired: int
    paired_arms: tuple[str, ...]
    llm: int = 0
    decode: int = 0
    zoo: bool = False
    profdiff: str = ""


def worker_env(
    accelerator: str | None, arm: str | None, overrides: dict[str, str] | None = None, steady_malloc: bool = True
) -> dict[str, str]:
    """node.child_env, with the harness's parent folder on PYTHONPATH for ``-m harness.worker``."""
    env = node.child_env(accelerator, arm, overrides, steady_malloc)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(HERE.parent), env.get("PYTHONPATH"))))
    return env


def run_worker(spec: dict[str, Any], env: dict[str, str], timeout: float) -> dict[str, Any]:
    return node.run_child(spec, env, timeout, WORKER)


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
    f"small inputs (16x16 float32; lists of {workloads.LIST_LEN} such tensors) are built on the plain vendor device "
    f"and on flagos, and {workloads.OVERHEAD_PAIRS} rounds of synchronized batches of `repeat` calls alternate between "
    "them. Calls on plain vendor tensors never reach torch_fl, so that arm is plain torch. µs per call is the "
    "median over the rounds; the host overhead is flagos minus plain, per round. A third arm in the same rotation "
    "runs the same flagos tensors with vendor aliases built anew on every call (alias reuse switched off): the "
    "overhead before that reuse, measured beside it. Bookkeeping ops are the device's own kernels (views, "
    "allocation, copies): they never reach the router and log nothing."
)
STEP_METHOD = (
    f"The training step of a {workloads.STEP_LAYERS}-layer TransformerEncoder ({workloads.STEP_HEADS} heads, ffn 4 x "
    f"d_model, sequence {workloads.STEP_SEQ}, batch {workloads.STEP_BATCH}), forward, backward and AdamW "
    "(foreach). Arms: "
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


def _confirm_paired(what: str, op: str, result: dict[str, Any]) -> None:
    """Every measured arm of one paired process took its own route (the log's route string is the arm's name)."""
    for arm, got in result["arms"].items():
        if "reason" not in got:
            got["route"] = node.confirm_route(f"{what} {arm}", got["logged"], op, arm)


def _paired_log(what: str, result: dict[str, Any], pairs: int) -> None:
    for arm, got in result["arms"].items():
        if "reason" in got:
            _log(f"{what}: flagos {arm} unavailable: {got['reason']}")
        else:
            _log(
                f"{what}: median flagos {arm} / plain {report.median(got['ratios']):.3f}x over {pairs} pairs "
                f"(route {got['route']} confirmed)"
            )


def _check_availability(case: str, runs: list[dict[str, Any]]) -> None:
    """An arm is measured in every run or in none: a route that comes and goes is not a measurement."""
    for arm in runs[0]["arms"]:
        unavailable = ["reason" in run["arms"][arm] for run in runs]
        if any(unavailable) and not all(unavailable):
            reason = next(run["arms"][arm]["reason"] for run in runs if "reason" in run["arms"][arm])
            raise BenchError(f"paired {case} {arm}: measured in some runs, unavailable in others ({reason})")


def measure_paired(opts: Options, accelerator: str) -> dict[str, Any]:
    per_case: dict[str, list[dict[str, Any]]] = {case.name: [] for case in opts.cases}
    for run in range(opts.runs):
        for case in opts.cases:
            spec = {
                "mode": "paired",
                "case": case.name,
                "arm": "native",
                "arms": list(opts.paired_arms),
                "device": cases.FLAGOS_DEVICE,
                "plain_device": cases.PLAIN_DEVICE[accelerator],
                "warmup": opts.warmup,
                "repeat": opts.repeat,
                "pairs": opts.paired,
                "threads": opts.threads,
                "cpu": opts.cpu,
            }
            # The process starts on native, a route every accelerator loads; the child switches arms itself.
            env = worker_env(accelerator, "native", {cases.override_var(case.op): "native"}, opts.steady_malloc)
            result = run_worker(spec, env, opts.timeout)
            what = f"paired run {run + 1} {case.name}"
            _confirm_paired(what, case.op, result)
            _paired_log(what, result, opts.paired)
            per_case[case.name].append(result)
    labels = {arm: cases.arm_label(arm, accelerator) for arm in opts.paired_arms}
    for case in opts.cases:
        _check_availability(case.name, per_case[case.name])
    return {
        "method": PAIRED_METHOD.format(pairs=opts.paired, arms=", ".join(opts.paired_arms)),
        "arms": list(opts.paired_arms),
        "cases": [report.paired_entry(case.name, per_case[case.name], labels) for case in opts.cases],
    }


def _all_native_conf(tmp: str) -> Path:
    conf = Path(tmp, "all_native.conf")
    conf.write_text(workloads.OVERHEAD_CONF)
    return conf


def measure_overhead(opts: Options, accelerator: str) -> dict[str, Any]:
    per_run: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="torch_fl_bench_") as tmp:
        conf = {"FLAGOS_BACKEND_CONFIG": str(_all_native_conf(tmp))}
        env = worker_env(accelerator, "native", conf, opts.steady_malloc)
        for run in range(opts.runs):
            spec = {
                "mode": "overhead",
                "arm": "native",
                "device": cases.FLAGOS_DEVICE,
                "plain_device": cases.PLAIN_DEVICE[accelerator],
                "warmup": opts.warmup,
                "repeat": opts.repeat,
                "threads": opts.threads,
                "cpu": opts.cpu,
            }
            per_run.append(run_worker(spec, env, opts.timeout)["ops"])
            _log(f"run {run + 1} overhead: done")
    ops = []
    for item in workloads.OVERHEAD_OPS:
        runs = [r[item.name] for r in per_run]
        for run in runs:
            node.confirm_route(f"overhead {item.name}", run["logged"], None, "native")
        plain = cases.arm_label(cases.PLAIN, accelerator)
        ops.append(report.overhead_entry(item.name, item.kind, item.note, runs, plain))
    return {"method": OVERHEAD_METHOD, "ops": ops}


def measure_step(
    opts: Options,
    accelerator: str,
    done: Callable[[dict[str, Any]], None],
    profiles: dict[int, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The step part in lockstep sets (lockstep.py); ``done`` gets the part after every d_model (a partial
    report's). With ``profiles``, the first set of each d_model also profiles its plain and all-native arms."""
    arms = (*workloads.STEP_ARMS, cases.CONTROL)
    turn = min(STEP_TURN, opts.step_steps)
    rounds = -(-opts.step_steps // turn)
    method = STEP_METHOD.format(plain=cases.PLAIN_DEVICE[accelerator], warmup=3, turn=turn, rounds=rounds)
    labels = {
        arm: cases.arm_label(arm, accelerator) if arm != workloads.STEP_SHIPPED else "flagos shipped conf"
        for arm in arms
    }
    sizes: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="torch_fl_bench_") as tmp:
        conf = _all_native_conf(tmp)
        for d_model in opts.step:
            sets = []
            for number in range(opts.step_procs):
                children = {}
                for arm in arms:
                    spec = {
                        "mode": "step_lockstep",
                        "arm": arm,
                        "device": node.device_of(arm, accelerator),
                        "d_model": d_model,
                        "warmup": 3,
                        "threads": opts.threads,
                        "cpu": None,
                        "time_cpu": opts.cpu,
                    }
                    overrides = {"FLAGOS_BACKEND_CONFIG": str(conf)} if arm == "native" else {}
                    children[arm] = (
                        [*WORKER, json.dumps(spec)],
                        worker_env(accelerator, arm, overrides, opts.steady_malloc),
                    )
                what = f"step d_model {d_model} set {number + 1}"
                try:
                    with lockstep.Group(children, opts.step_timeout) as group:
                        node.confirm_route(f"{what} native", group.info["native"]["logged"], None, "native")
                        first = number % len(arms)  # each set starts its rotation one arm later
                        measured = group.rounds(rounds, turn, order=arms[first:] + arms[:first])
                        if profiles is not None and number == 0:
                            profiles[d_model] = {
                                arm: group.ask(arm, "profile", workloads.STEP_PROFILE_STEPS)["ops"]
                                for arm in (cases.PLAIN, "native")
                            }
                except lockstep.LockstepError as exc:
                    raise BenchError(f"{what}: {exc} (no result within {opts.step_timeout:g} s for the set)") from exc
                sets.append({"info": group.info, "rounds": measured})
                entry = report.step_set_summary(measured)
                _log(
                    f"{what}: "
                    + ", ".join(f"{arm} {entry[arm]['ms']:.2f} ms ({entry[arm]['vs_plain']:.3f}x)" for arm in arms)
                )
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


def step_profile_part(accelerator: str, profiles: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """The step profile from what measure_step collected: per d_model, the plain and the all-native arm's ops."""
    sizes = []
    for d_model, ops in profiles.items():
        sizes.append(report.step_profile_entry(d_model, ops[cases.PLAIN], ops["native"]))
        _log(
            f"step profile d_model {d_model}: self host µs per step, plain {sizes[-1]['plain_us']:.0f}, "
            f"flagos {sizes[-1]['flagos_us']:.0f}"
        )
    method = STEP_PROFILE_METHOD.format(plain=cases.PLAIN_DEVICE[accelerator], steps=workloads.STEP_PROFILE_STEPS)
    return {"method": method, "sizes": sizes}


def _batches_text(batches: int) -> str:
    return "one batch per process" if batches == 1 else f"median of {batches} batches per process"


def measure(opts: Options, checkpoint: Callable[[dict[str, Any]], None] = lambda result: None) -> dict[str, Any]:
    """Every part in turn. ``checkpoint`` gets the report after each part (``complete`` false until the end), so a
    run stopped from outside (a node's time limit) still leaves what it measured."""
    facts = node.probe(opts)
    node.report_unavailable(facts)
    env = facts["environment"]
    accelerator = env["vendor"]
    # the caller's checkout HEAD (plan.py, cuda_node.sh pass it): the installed package is no checkout to ask
    env["commit"] = os.environ.get("TORCH_FL_COMMIT") or "unknown"
    _log(
        f"accelerator {accelerator}, device {env['device']}, {opts.runs} run(s), warm-up {opts.warmup}, "
        f"repeat {opts.repeat}"
    )
    ab = node.measure_ab(opts, accelerator, facts["unavailable"])
    result: dict[str, Any] = {
        "schema": report.SCHEMA,
        "environment": env,
        "settings": {
            "runs": opts.runs,
            "warmup": opts.warmup,
            "repeat": opts.repeat,
            "batches": opts.batches,
            "threads": opts.threads,
            "cpu": opts.cpu,
            "short": opts.short,
            "routes": list(opts.routes),
            "cases": [c.name for c in opts.cases],
            "overhead_pairs": workloads.OVERHEAD_PAIRS,
            "paired": opts.paired,
            "paired_arms": list(opts.paired_arms),
            "step": list(opts.step),
            "step_procs": opts.step_procs,
            "step_steps": opts.step_steps,
            "step_profile": opts.step_profile,
            "llm": opts.llm,
            "decode": opts.decode,
            "zoo": opts.zoo,
            "profdiff": opts.profdiff,
            "glibc_tunables": os.environ.get("GLIBC_TUNABLES", node.STEADY_MALLOC if opts.steady_malloc else None),
        },
        "method": {"ab": AB_METHOD.format(batches=_batches_text(opts.batches)), "overhead": OVERHEAD_METHOD},
        "ab": ab,
        "acceptance": report.acceptance(ab, report.goal_for(accelerator)),
        "complete": False,
        "paired": None,
        "overhead": None,
        "step": None,
        "step_profile": None,
        "llm": None,
        "decode": None,
        "zoo": None,
    }
    result["acceptance"]["paired"] = None
    checkpoint(result)
    if opts.paired:
        result["paired"] = measure_paired(opts, accelerator)
        result["acceptance"]["paired"] = report.paired_acceptance(result["paired"], report.goal_for(accelerator))
        checkpoint(result)
    if opts.overhead:
        result["overhead"] = measure_overhead(opts, accelerator)
        checkpoint(result)
    if opts.step:
        profiles: dict[int, dict[str, Any]] | None = {} if opts.step_profile else None
        result["step"] = measure_step(opts, accelerator, lambda step: checkpoint({**result, "step": step}), profiles)
        if profiles is not None:
            result["step_profile"] = step_profile_part(accelerator, profiles)
    if opts.llm:
        checkpoint(result)
        from . import llm  # the compiled decoder LLM step: its own arms and lockstep sets (llm.py)

        result["llm"] = llm.case(opts.llm, tiny=opts.short)  # --short: its dry run, on any device
    if opts.decode:
        checkpoint(result)
        from . import decode  # greedy decoding, eager / compiled / reduce-overhead (decode.py)

        result["decode"] = decode.case(opts.decode, tiny=opts.short)
    if opts.zoo or opts.profdiff:
        checkpoint(result)
        from . import zoo  # the model zoo and the profile diff: their own arms (zoo.py, profdiff.py)

        argv = ([] if opts.zoo else ["--modes", "none"]) + ["--profdiff", opts.profdiff] + ["--tiny"] * opts.short
        result["zoo"] = zoo.case(argv)
    result["complete"] = True
    return result
