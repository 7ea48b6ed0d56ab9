"""Runs the benchmark's two command lines as their callers do: the node check from the installed wheel
(``python -m torch_fl.bench``) and the harness of the tooling tree (``python -m harness`` from build_tools/bench).

The harness's folder goes on sys.path here, once for every test of this folder that imports it: it holds the
harness alone, never torch_fl, so the installed wheel stays the torch_fl these tests import."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

# build_tools/ stands beside tests/ in a checkout and in the test image's copy of both
HARNESS_HOME = Path(__file__).resolve().parents[2] / "build_tools" / "bench"
if str(HARNESS_HOME) not in sys.path:
    sys.path.insert(0, str(HARNESS_HOME))
Run = Callable[..., subprocess.CompletedProcess[str]]


def _runner(module: str, env: dict[str, str] | None = None) -> Run:
    def run(*args: str | Path, check: bool = True) -> subprocess.CompletedProcess[str]:
        # from the harness's folder, where -m finds it; torch_fl is the installed one either way (none is there)
        proc = subprocess.run(
            [sys.executable, "-m", module, *map(str, args)],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=HARNESS_HOME,
            env=env,
            check=False,
        )
        if check and proc.returncode != 0:
            pytest.fail(f"{module} {' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        return proc

    return run


@pytest.fixture(scope="session")
def harness_cli() -> Run:
    return _runner("harness")


@pytest.fixture(scope="session")
def node_check_cli() -> Run:
    return _runner("torch_fl.bench")


@pytest.fixture(scope="session")
def emulation_cli() -> Callable[[str], Run]:
    """``python -m MODULE`` of the harness on the CPU emulation: the caller's FLAGOS_ settings (routes, logs) are
    dropped, so the dry runs see the product's defaults."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("FLAGOS")}
    env["FLAGOS_ACCELERATOR"] = "cpu"
    return lambda module: _runner(module, env)
