"""What a test container's ``--gpus`` flag needs from the docker host, checked before anything is built.

A row with ``--gpus`` needs an NVIDIA GPU device node (``/dev/nvidia<N>``, ``/dev/dxg`` under WSL2) and the NVIDIA
Container Toolkit (an ``nvidia`` runtime in ``docker info``, or its hook on PATH). Without them test-/bench-<row>
stop at once with one line naming what is missing and the fix, instead of failing (or passing with every GPU test
skipped) after a long build. ``problem`` is pure; ``device_nodes`` and ``find_hook`` read this host.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

HOOKS = ("nvidia-container-runtime-hook", "nvidia-container-toolkit")
DRIVER_FIX = "install the NVIDIA driver so that `nvidia-smi` lists a GPU, or run on a GPU host"
TOOLKIT_FIX = (
    "install nvidia-container-toolkit, run `sudo nvidia-ctk runtime configure --runtime=docker`, restart docker"
)


def needs_nvidia(flags: Sequence[str]) -> bool:
    return any(f == "--gpus" or f.startswith("--gpus=") for f in flags)


def device_nodes(dev: Path = Path("/dev")) -> list[str]:
    """The GPU device nodes present: ``/dev/nvidia0``, ``/dev/nvidia1``, ... (``/dev/dxg`` on WSL2)."""
    try:
        names = sorted(p.name for p in dev.iterdir())
    except OSError:
        return []
    gpus = [n for n in names if n.startswith("nvidia") and n[len("nvidia") :].isdigit()]
    if not gpus and "dxg" in names:
        gpus = ["dxg"]
    return [str(dev / n) for n in gpus]


def find_hook(which: Callable[[str], str | None] = shutil.which) -> str | None:
    """Path of the NVIDIA Container Toolkit's hook, when it is on PATH (docker's ``--gpus`` runs it)."""
    return next((path for name in HOOKS if (path := which(name))), None)


def problem(
    session: str, *, devices: Sequence[str], runtimes: Sequence[str] | None, hook: str | None, build_session: str = ""
) -> str | None:
    """The one line to stop with, or None when GPU containers can run here (``runtimes`` is None when
    ``docker info`` could not be read)."""
    missing: dict[str, str] = {}  # what is wanted -> what was found instead
    if not devices:
        missing["an NVIDIA GPU"] = f"no /dev/nvidia<N> device ({DRIVER_FIX})"
    if hook is None and not (runtimes is not None and "nvidia" in runtimes):
        seen = "`docker info` unreadable" if runtimes is None else "runtimes: " + ", ".join(runtimes)
        missing["the NVIDIA Container Toolkit"] = f"no nvidia runtime in `docker info` ({seen}; {TOOLKIT_FIX})"
    if not missing:
        return None
    tail = f"; `nox -s {build_session}` builds the wheel without a GPU" if build_session else ""
    return f"{session} needs {' and '.join(missing)} on this host: {'; '.join(missing.values())}{tail}"


def describe(devices: Sequence[str], runtimes: Sequence[str] | None, hook: str | None) -> str:
    """One line for the log when the check passes."""
    via = "nvidia runtime" if runtimes and "nvidia" in runtimes else f"hook {hook}"
    return f"GPU containers: {', '.join(devices)}; NVIDIA Container Toolkit ({via})"
