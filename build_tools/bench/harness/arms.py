"""What the model cases of the harness (llm.py, decode.py) share: one process per arm, plain arms that never load
torch_fl, and lockstep sets timed in turns (lockstep.py). Imports nothing of torch: a plain arm loads it."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Mapping

from . import lockstep


def import_torchvision() -> None:
    """transformers imports torchvision where it is installed; the test images need tests/models/vision_import.py
    first (it says why). A copy of the harness without tests/ beside build_tools/ goes without."""
    tree = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    path = os.path.join(tree, "tests", "models")
    if os.path.exists(os.path.join(path, "vision_import.py")):
        sys.path.insert(0, path)
        import vision_import

        vision_import.load()


def devices() -> tuple[str, str]:
    """(the flagos runtime of this run, the plain device it is compared with): HIP builds of torch call their GPUs
    cuda too, and beside the emulation the plain device is the host."""
    runtime = os.environ.get("FLAGOS_ACCELERATOR", "cpu").strip() or "cpu"
    return runtime, "cuda" if runtime in ("cuda", "dcu") else "cpu"


def command(module: str, flagos: bool, args: list[str]) -> tuple[list[str], dict[str, str]]:
    """``python -m harness.<module> <args>`` from build_tools/bench; a plain arm's environment never loads torch_fl."""
    env = dict(os.environ)
    if not flagos:
        env.pop("FLAGOS_AUTOLOAD", None)
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # build_tools/bench: -m finds harness
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    return [sys.executable, "-m", f"harness.{module}", *args], env


def timed_sets(
    commands: Mapping[str, tuple[list[str], dict[str, str]]],
    sets: int,
    turns: tuple[int, int],
    timeout: float,
    say: Callable[[str], None],
) -> tuple[list[dict[str, float]], dict]:
    """``sets`` lockstep sets of one process per arm (``commands``), ``turns`` = (rounds, steps per turn): the
    median ms of each arm per round, every round of every set, and the arms' READY info of the last set.
    Raises LockstepError naming a failed arm."""
    rounds_ms: list[dict[str, float]] = []
    info: dict = {}
    start = time.perf_counter()
    for number in range(sets):
        with lockstep.Group(commands, timeout) as group:
            info = group.info
            rounds = group.rounds(*turns)
        med = [{arm: statistics.median(t) for arm, t in r.items()} for r in rounds]
        rounds_ms += med
        say(
            f"  set {number + 1} ({time.perf_counter() - start:.0f} s): "
            + ", ".join(f"{arm} {statistics.median(m[arm] for m in med):.2f} ms" for arm in commands)
        )
    return rounds_ms, info


def case_args(doc: str, sets: int, per_set: str, modes: tuple[str, ...] = ()) -> argparse.Namespace:
    """The command line of a model case: ``run`` (one arm's process, serving lockstep.py) or ``all`` (the case)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--arm", required=True, choices=["flagos", "plain"])
    if modes:
        r.add_argument("--mode", required=True, choices=modes)
    r.add_argument("--device", default="cuda", help="the plain arm's device (cuda, or cpu beside the emulation)")
    r.add_argument("--tiny", action="store_true")
    r.add_argument("--serve-cpu", type=int, help="pin the timed steps to this CPU (the CPU emulation's arms)")
    a = sub.add_parser("all")
    a.add_argument("--sets", type=int, default=sets, help=f"lockstep sets ({per_set} processes in each)")
    a.add_argument("--tiny", action="store_true", help="a small model: a CPU-emulation dry run of this case")
    args = p.parse_args()
    if args.cmd == "all" and args.sets < 1:
        p.error("--sets must be at least 1")
    return args


def sayer(result: dict) -> Callable[[str], None]:
    """``say(line)``: print a case's line as it comes and keep it in ``result["lines"]`` for the report."""
    result.setdefault("lines", [])

    def say(line: str) -> None:
        print(line, flush=True)
        result["lines"].append(line)

    return say
