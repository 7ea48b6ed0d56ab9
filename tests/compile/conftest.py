"""Shared by the compile suite: torch.compile on flagos against eager flagos, and children for what needs a fresh
process (routes set by the environment, the host-read trap, import-time laziness).

The in-process tests run on the accelerator of the process (the CPU emulation in CI; a GPU node runs them with
FLAGOS_ACCELERATOR=cuda, build_tools/node/cuda_node.sh compile); the children always run the emulation.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

import torch_fl  # noqa: F401  (registers the flagos device)

RESULT = "@@result "


@dataclass
class Child:
    rc: int
    stdout: str
    stderr: str
    data: dict

    def describe(self) -> str:
        return f"rc={self.rc}\n--- stdout\n{self.stdout[-3000:]}\n--- stderr\n{self.stderr[-6000:]}"


PRELUDE = f"""
import json
def report(key, value):
    print({RESULT!r} + json.dumps({{key: value}}), flush=True)
"""


@pytest.fixture
def run_child(tmp_path: Path) -> Callable[..., Child]:
    """run_child(code, env=None, expect_ok=True): ``code`` in a fresh interpreter on the CPU emulation, with no
    FLAGOS_* variable of the caller; ``report(key, value)`` in the code fills ``Child.data``."""

    def run(code: str, env: Mapping[str, str] | None = None, *, expect_ok: bool = True) -> Child:
        full = {k: v for k, v in os.environ.items() if not k.upper().startswith("FLAGOS")}
        full.update({"FLAGOS_ACCELERATOR": "cpu", "PYTHONFAULTHANDLER": "1", **(env or {})})
        proc = subprocess.run(
            [sys.executable, "-c", PRELUDE + textwrap.dedent(code)],
            cwd=tmp_path,
            env=full,
            capture_output=True,
            text=True,
            timeout=600,
        )
        data: dict = {}
        for line in proc.stdout.splitlines():
            if line.startswith(RESULT):
                data.update(json.loads(line[len(RESULT) :]))
        child = Child(proc.returncode, proc.stdout, proc.stderr, data)
        if expect_ok and child.rc != 0:
            pytest.fail(f"child failed\n{child.describe()}", pytrace=False)
        if not expect_ok and child.rc == 0:
            pytest.fail(f"child succeeded but was expected to fail\n{child.describe()}", pytrace=False)
        return child

    return run


@pytest.fixture(autouse=True)
def fresh_dynamo():
    """Each test compiles from scratch (Dynamo's in-memory caches; Inductor's on-disk cache stays)."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture
def runners(monkeypatch):
    """The graph runners made for compiled flagos graphs in this test."""
    from torch_fl.compile import graph_runner

    made: list[graph_runner.GraphRunner] = []
    original = graph_runner.make_runner

    def spy(*args, **kwargs):
        made.append(original(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(graph_runner, "make_runner", spy)
    return made
