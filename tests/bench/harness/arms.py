"""What the model cases of the harness (llm.py, decode.py) share: one process per arm, plain arms that never load
torch_fl, and lockstep sets timed in turns (lockstep.py). Imports nothing of torch: a plain arm loads it."""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable, Mapping

from . import lockstep


def import_torchvision() -> None:
    """transformers imports torchvision where it is installed; the test images need tests/models/vision_import.py
    first (it says why). A copy of the harness without the model suite beside it goes without."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "models")
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
    """``python -m harness.<module> <args>`` from tests/bench; a plain arm's environment never loads torch_fl."""
    env = dict(os.environ)
    if not flagos:
        env.pop("FLAGOS_AUTOLOAD", None)
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/bench: -m finds harness
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    return [sys.executable, "-m", f"harness.{module}", *args], env


def timed_sets(commands: Mapping[str, tuple[list[str], dict[str, str]]], sets: int, turns: tuple[int, int],
               timeout: float, say: Callable[[str], None]) -> tuple[list[dict[str, float]], dict]:
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
        say(f"  set {number + 1} ({time.perf_counter() - start:.0f} s): "
            + ", ".join(f"{arm} {statistics.median(m[arm] for m in med):.2f} ms" for arm in commands))
    return rounds_ms, info
