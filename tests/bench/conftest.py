"""Runs the benchmark's two command lines as their callers do: the node check from the installed wheel
(``python -m torch_fl.bench``) and the harness beside these tests (``python -m harness`` from this folder)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
Run = Callable[..., subprocess.CompletedProcess[str]]


def _runner(module: str) -> Run:
    def run(*args: str | Path, check: bool = True) -> subprocess.CompletedProcess[str]:
        # from this folder, where -m finds the harness; torch_fl is the installed one either way (none is here)
        proc = subprocess.run(
            [sys.executable, "-m", module, *map(str, args)],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=HERE,
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
