"""The model zoo: eight architectures' training steps, eager and compiled, and the decoders' greedy decoding, eager
and reduce-overhead, on flagos against the plain vendor device, with an A/A arm (issue 52).

    python -m harness.zoo [--models all] [--modes all] [--rounds 8] [--turn-ms 300] [--profdiff MODEL,...] [--out DIR]
    python -m harness.zoo --tiny                   the emulation's dry run (the default where the plain device is cpu)
    python -m harness.profdiff --models MODEL      the profile diff alone (profdiff.py)

The models (zoo_models.py): a Llama-style decoder with grouped-query attention, a Qwen2-style decoder with a 152k
tied vocabulary, a Mistral-style sliding-window decoder (fp16 autocast with GradScaler; every other model bf16
autocast), a Mixtral-style mixture of experts, BERT, T5, torchvision's ViT-B/16 and ResNet-50, built from configs.

Arms, one process each, alive together for the whole zoo (lockstep.py): flagos, plain and plain again (the A/A
control; the plain arms never import torch_fl). Each serves every (model, mode) pair in turn (zoo_arm.py): the
parent asks all arms to set a pair up at once (build, checked steps, warm-up, peak memory over 2 steps), then
times it in --rounds rounds of synchronized steps, one arm at a time, the order rotated per round. Each turn
starts with --untimed steps that are not timed (the first step after another process had the device pays for the
switch), then at least --turn timed steps, more where steps are short: as many as fill --turn-ms, sized from one
step of each arm before the rounds. A ratio is taken within each round; the figures are medians over the rounds
with their quartiles. A pair whose A/A (plain again / plain) lies outside [0.98, 1.02], or whose A/A quartiles lie
further apart than that band is wide, is not judged: its ratio is
reported as the noise it is ("not judged: A/A too wide"), as is a pair timed with no A/A arm. Modes: train-eager
and train-compiled (torch.compile's default mode; the optimizer eager), decode-eager and decode-reduce-overhead
(decode.py's method: bf16 weights, a StaticCache, a 32-token prompt and 32 greedy tokens per step; decoders
only). The checks, judged: flagos' first 3 training losses within a dtype's tolerance of plain's, its decoded
tokens identical to plain's in the same mode, and no arm failing a pair. Time and memory against the issue's bars
are reported, not judged: they are what point 3 of the issue works towards.

A pair that fails in any arm is reported with the arm's error and not timed; an arm process that dies is
restarted for the next pair. --budget S stops setting pairs up after S seconds (what was measured is reported).
--tiny (beside the emulation): tiny models, compiled mode traced only (Dynamo and AOTAutograd, as llm.py's dry
run), reduce-overhead not run (the emulation refuses graphs: decode.py asserts that); timings not judged.

Writes zoo.json, zoo.md and zoo.png (and, with --profdiff, profdiff.json and profdiff.md) to --out (default
reports/<accelerator>/zoo), again after every pair, so a run cut from outside leaves what it measured.
Exits 1 when a check fails or an arm fails.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from . import arms, command_line, failure, lockstep, opdiff, zoo_arm, zoo_judge, zoo_models

ROUNDS, TURN = 8, 3
TINY_ROUNDS, TINY_TURN = 2, 1
UNTIMED = 1  # steps run, not timed, at the start of every turn
TURN_MS, TINY_TURN_MS = 300.0, 0.0  # a turn's timed steps fill this much (CI's tiny run: --turn steps, no more)
MAX_TURN = 50
PROFILE_STEPS = opdiff.STEPS
COMPILED = ("train-compiled", "decode-reduce-overhead")
GROUP_TIMEOUT_S = 3600  # the whole zoo's; --budget is the knob that bounds a run


class Zoo:
    """The parent's state: the arms' group (restarted when a process dies), the plan and the result so far."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.runtime, self.plain = arms.devices()
        self.tiny = args.tiny or self.plain == "cpu"
        self.names = {"flagos": "flagos", "plain": self.plain, "plain-again": f"{self.plain}-again"}
        self.arms = [self.names[a] for a in args.arms]
        # mode by mode, eager first: a run cut by --budget loses compiled pairs of the last models, not whole models
        pairs = [[m, mode] for mode in args.modes for m in args.models] + args.also
        self.pairs = [
            pair
            for i, pair in enumerate(pairs)
            if pair not in pairs[:i]
            if zoo_models.ARCHS[pair[0]].decoder or not pair[1].startswith("decode")
            if not (self.tiny and pair[1] == "decode-reduce-overhead")  # the emulation refuses graphs
        ]
        self.profiled = [[m, "train-eager"] for m in args.profdiff]
        self.args = args
        self.group: lockstep.Group | None = None
        self.started = time.monotonic()
        self.result: dict[str, Any] = {
            "schema": 1,
            "environment": _environment(self.runtime, self.plain),
            "settings": {
                "size": zoo_models.size_of(self.tiny),
                "pairs": len(self.pairs),
                "models": args.models,
                "modes": args.modes,
                "arms": self.arms,
                "rounds": args.rounds,
                "turn": args.turn,
                "turn_ms": args.turn_ms,
                "untimed": args.untimed,
                "turn_cpu": args.cpu,
                "aa_band": list(zoo_judge.AA_BAND),
                "budget_s": args.budget,
                "profdiff": args.profdiff,
                "profile_steps": args.profile_steps,
            },
            "method": " ".join(__doc__.split("\n\n")[2:4]).replace("\n", " "),
            "bars": {"time": zoo_judge.BARS, "memory": zoo_judge.MEMORY_BAR},
            "models": {},
            "profdiff": [] if args.profdiff else None,
            "failures": [],
            "complete": False,
        }
        self.say = arms.sayer(self.result)

    # ---- the arms' processes ----

    def _commands(self) -> dict[str, tuple[list[str], dict[str, str]]]:
        plan = json.dumps(self.pairs + self.profiled)
        out = {}
        for name in self.arms:
            kind = "flagos" if name == "flagos" else "plain"
            args = ["--arm", kind, "--device", self.plain, "--plan", plan] + ["--tiny"] * self.tiny
            args += ["--turn-cpu", str(self.args.cpu)] if self.args.cpu is not None else []
            argv, env = arms.command("zoo_arm", kind == "flagos", args)
            env.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/torch-fl-zoo-inductor")
            # every arm compiles at once: Inductor's worker pool per arm would oversubscribe the node's cores
            env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", str(max(1, (os.cpu_count() or 2) // len(self.arms))))
            out[name] = (argv, env)
        return out

    def _ensure_group(self) -> lockstep.Group:
        if self.group is None:
            self.group = lockstep.Group(self._commands(), GROUP_TIMEOUT_S)
            info = self.group.info
            gpu = next((i["gpu"] for i in info.values() if i.get("gpu")), None)
            self.result["environment"].update(torch=info[self.arms[0]]["torch"], gpu=gpu)
        return self.group

    def _restart(self, at_once: bool = True) -> None:
        """Close the arms (at once after a failure, where one may hang); the next pair starts them anew."""
        if self.group is not None:
            self.group.close(at_once=at_once)
            self.group = None

    def _ask_all(self, request: str, n: int, stagger: bool = False) -> dict[str, Any]:
        """``request n`` to flagos and plain at once (they set up side by side), then each arm's reply. ``stagger``:
        plain again is asked once plain has answered, so that it finds plain's compiled graphs in Inductor's cache
        (the same graphs): two compilations share the node's cores instead of three."""
        group = self._ensure_group()
        first, rest = (self.arms[:2], self.arms[2:]) if stagger else (self.arms, [])
        replies = {}
        for names in (first, rest):
            for name in names:
                group.arms[name].send(f"{request} {n}")
            for name in names:
                replies[name] = group.arms[name].answer(lockstep.REPLY, group.deadline)
        return replies

    # ---- the run ----

    def run(self, write) -> dict[str, Any]:
        size = zoo_models.size_of(self.tiny)
        what = f"{len(self.result['settings']['models'])} models, {len(self.pairs)} (model, mode) pairs"
        if not self.pairs:  # python -m harness.profdiff
            what = "the profile diff of " + ", ".join(m for m, _ in self.profiled)
        self.say(
            f"zoo: {what}, {size} sizes, arms {', '.join(self.arms)}; flagos on {self.runtime} against plain "
            f"{self.plain}"
        )
        try:
            for index, pair in enumerate(self.pairs):
                entry = self._pair(index, pair)
                model = self.result["models"].setdefault(pair[0], _model_entry(pair[0]))
                model["modes"][pair[1]] = entry
                if entry.get("params_m") is not None:
                    model["params_m"] = entry["params_m"]
                write(self.result)
            for index, pair in enumerate(self.profiled, start=len(self.pairs)):
                self._profile(index, pair)
                write(self.result)
        except BaseException:
            self._restart()
            raise
        self._restart(at_once=False)
        self.result["complete"] = True
        failures = self.result["failures"]
        self.result["verdict"] = "PASS" if not failures else "FAIL (" + "; ".join(failures) + ")"
        self.say(f"zoo check: {self.result['verdict']} ({time.monotonic() - self.started:.0f} s)")
        if self.tiny:
            self.say("(tiny: a dry run of the zoo; the timings are not judged)")
        return self.result

    def _over_budget(self) -> bool:
        return self.args.budget is not None and time.monotonic() - self.started > self.args.budget

    def _pair(self, index: int, pair: list[str]) -> dict[str, Any]:
        model, mode = pair
        what = f"{model} {mode}"
        if self._over_budget():
            self.say(f"  {what}: skipped (past the budget of {self.args.budget:g} s)")
            return {"status": "skipped", "reason": "budget"}
        try:
            replies = self._ask_all("prepare", index, stagger=mode in COMPILED)
        except lockstep.LockstepError as exc:
            self._restart()
            return self._failed(what, {"process": str(exc)})
        errors = {a: r["error"] for a, r in replies.items() if not r["ok"]}
        if errors:
            return self._failed(what, errors, {a: replies[a].get("traceback", "") for a in errors})
        try:
            turn = self._turn_size()
            measured = self._ensure_group().rounds(self.args.rounds, turn, order=self.arms, untimed=self.args.untimed)
        except lockstep.LockstepError as exc:
            self._restart()
            return self._failed(what, {"process": str(exc)})
        entry = zoo_judge.timed_entry(mode, self.arms, replies, measured, decode_tokens=zoo_judge.decode_tokens(mode))
        entry["turn"] = turn
        entry["check"] = zoo_judge.check(zoo_models.ARCHS[model], mode, self.arms, replies)
        if not entry["check"]["ok"]:
            self.result["failures"].append(f"{what}: {entry['check']['detail']}")
        self.say(zoo_judge.pair_line(what, entry, self.arms, time.monotonic() - self.started))
        return entry

    def _turn_size(self) -> int:
        """Timed steps per turn: --turn, or as many as fill --turn-ms by the slowest arm's step, up to MAX_TURN."""
        if self.args.turn_ms <= 0:
            return self.args.turn
        group = self._ensure_group()
        step_ms = max(min(group.turn(a, 2, self.args.untimed)) for a in self.arms)
        return max(self.args.turn, min(MAX_TURN, math.ceil(self.args.turn_ms / max(step_ms, 1e-3))))

    def _failed(self, what: str, errors: dict[str, str], tracebacks: dict[str, str] | None = None) -> dict[str, Any]:
        """A failed pair: each arm's error named by its cause (failure.py), the traceback's tail kept for zoo.json."""
        self.result["failures"].append(f"{what}: failed in {', '.join(errors)}")
        causes = {a: failure.cause(e) for a, e in errors.items()}
        self.say(f"  {what}: FAILED in {', '.join(errors)}: {next(iter(causes.values()))}")
        tails = {a: failure.tail(t) for a, t in {**errors, **(tracebacks or {})}.items()}
        return {"status": "failed", "errors": causes, "tracebacks": tails}

    def _profile(self, index: int, pair: list[str]) -> None:
        model = pair[0]
        if self._over_budget():
            self.say(f"  profdiff {model}: skipped (past the budget)")
            return
        try:
            replies = self._ask_all("prepare", index)
            errors = {a: r["error"] for a, r in replies.items() if not r["ok"]}
            if errors:
                self._failed(f"profdiff {model}", errors, {a: replies[a].get("traceback", "") for a in errors})
                return
            group = self._ensure_group()
            profiles = {a: group.ask(a, "profile", self.args.profile_steps) for a in self.arms}
        except lockstep.LockstepError as exc:
            self._restart()
            self._failed(f"profdiff {model}", {"process": str(exc)})
            return
        item = opdiff.entry(model, profiles, self.plain)
        self.result["profdiff"].append(item)
        self.say(opdiff.summary_line(item, self.plain))


# ---- figures ------------------------------------------------------------------------------------------------


def _model_entry(name: str) -> dict[str, Any]:
    arch = zoo_models.ARCHS[name]
    return {"family": arch.family, "dtype": arch.dtype, "grad_scaler": arch.scaler, "modes": {}}


def _environment(runtime: str, plain: str) -> dict[str, Any]:
    def version(dist: str) -> str | None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    return {
        "flagos_runtime": runtime,
        "plain": plain,
        "torch_fl": version("torch-fl"),
        "transformers": version("transformers"),
        "torchvision": version("torchvision"),
        "commit": os.environ.get("TORCH_FL_COMMIT") or "unknown",
        "host": platform.node(),
        "python": platform.python_version(),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


# ---- command line -------------------------------------------------------------------------------------------


def _names(text: str, known: tuple[str, ...], what: str) -> list[str]:
    if text == "all":
        return list(known)
    if text == "none":
        return []
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown {what} {', '.join(unknown)}; known: {', '.join(known)}")
    return names


def _pairs(text: str) -> list[list[str]]:
    pairs = [part.split(":") for part in text.split(",") if part.strip()]
    for pair in pairs:
        if len(pair) != 2 or pair[0] not in zoo_models.ARCHS or pair[1] not in zoo_arm.MODES:
            raise argparse.ArgumentTypeError(f"{':'.join(pair)!r}: MODEL:MODE with a zoo model and mode")
    return pairs


def _cpu(text: str) -> int | None:
    """--cpu's value: a CPU of this process, the highest of them (auto), or none. The node check's --cpu reads the
    same words (torch_fl/bench/run.py); the zoo's parent loads no torch, so it cannot import that one."""
    allowed = sorted(os.sched_getaffinity(0))
    if text == "none":
        return None
    if text == "auto":
        return allowed[-1]
    if not text.isdigit() or int(text) not in allowed:
        raise argparse.ArgumentTypeError(f"{text}: expected auto, none or one of this process's CPUs {allowed}")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    p = command_line.parser("zoo", __doc__)
    archs = tuple(zoo_models.ARCHS)
    p.add_argument("--models", type=lambda t: _names(t, archs, "model"), default=list(archs), help="all, or a,b")
    p.add_argument(
        "--modes",
        type=lambda t: _names(t, zoo_arm.MODES, "mode"),
        default=list(zoo_arm.MODES),
        help=f"all, none or some of {', '.join(zoo_arm.MODES)}",
    )
    p.add_argument(
        "--arms",
        type=lambda t: _names(t, ("flagos", "plain", "plain-again"), "arm"),
        default=["flagos", "plain", "plain-again"],
        help="flagos,plain[,plain-again] (plain-again: the A/A control; default all three)",
    )
    p.add_argument(
        "--also",
        type=_pairs,
        default=[],
        metavar="MODEL:MODE[,...]",
        help="pairs to run beside --models x --modes (CI: every model eager, one compiled)",
    )
    p.add_argument("--rounds", type=int, help=f"timed rounds per pair (default {ROUNDS}; --tiny {TINY_ROUNDS})")
    p.add_argument("--turn", type=int, help=f"least timed steps per turn (default {TURN}; --tiny {TINY_TURN})")
    p.add_argument(
        "--turn-ms",
        type=float,
        help=f"timed steps per turn fill this many ms, up to {MAX_TURN} steps (default {TURN_MS:g}; --tiny: off)",
    )
    p.add_argument("--untimed", type=int, default=UNTIMED, help="steps run, not timed, first in every turn")
    p.add_argument(
        "--cpu",
        type=_cpu,
        default="none",
        metavar="N|auto|none",
        help="every arm's threads run on CPU N during its timed turns (auto: the highest CPU this process may use), "
        "on all of its CPUs in between; none (the default): the scheduler places them",
    )
    p.add_argument("--budget", type=float, metavar="S", help="set no pair up after S seconds (default: no limit)")
    p.add_argument(
        "--profdiff",
        type=lambda t: _names(t, archs, "model"),
        default=[],
        metavar="MODEL[,MODEL]",
        help="after the timing, the profile diff of these models' eager training steps (profdiff.py)",
    )
    p.add_argument("--profile-steps", type=int, default=PROFILE_STEPS, help="profiled steps per arm")
    p.add_argument("--tiny", action="store_true", help="tiny models: the emulation's dry run (default beside it)")
    p.add_argument("--out", type=Path, help="report directory (default reports/<accelerator>/zoo)")
    return p


def _parse(argv: list[str] | None) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    if list(args.arms[:2]) != ["flagos", "plain"]:
        raise SystemExit("--arms: flagos and plain come first (plain-again, the control, may follow)")
    tiny = args.tiny or arms.devices()[1] == "cpu"
    args.rounds = args.rounds or (TINY_ROUNDS if tiny else ROUNDS)
    args.turn = args.turn or (TINY_TURN if tiny else TURN)
    args.turn_ms = args.turn_ms if args.turn_ms is not None else (TINY_TURN_MS if tiny else TURN_MS)
    return args


def case(argv: list[str]) -> dict[str, Any]:
    """The zoo as a part of the bench (python -m harness --zoo): its result, for bench.json; its lines for bench.md."""
    return Zoo(_parse(argv)).run(lambda result: None)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    from . import zoo_report  # the reports need matplotlib for zoo.png: stop before measuring without it

    zoo_report.require_plot()
    zoo = Zoo(args)
    out = args.out or Path("reports") / zoo.runtime / "zoo"
    result = zoo.run(lambda r: zoo_report.write(r, out))
    for path in zoo_report.write(result, out, plot=True):
        print(f"wrote {path}")
    print(zoo_report.summary_table(result))
    return int(bool(result["failures"]))


if __name__ == "__main__":
    sys.exit(main())
