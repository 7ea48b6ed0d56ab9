"""Run Python children against the installed (or PYTHONPATH) torch_fl and read their dispatch logs.

Routing is decided once per process at ``import torch_fl`` (and again on ``reload_routes()``),
so every routing test runs a child interpreter with a clean FLAGOS_* environment. The child
marks the stretch of its stderr that belongs to one check with ``mark(label)``; the
``[flagos dispatch] op -> route`` lines between two marks are the calls that check made.
``report(key, value)`` sends JSON-able results (values computed on flagos and on CPU) back on
stdout. Nothing here imports the checkout: children run with ``cwd`` set to a temporary folder.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

DISPATCH_RE = re.compile(r"\[flagos dispatch\] (?P<op>\S+) -> (?P<route>\S+)")
MARK_PREFIX = "@@flagos-test "
JSON_PREFIX = "@@flagos-json "
START = "<start-up>"

PRELUDE = f'''
import json as _json, os as _os, sys as _sys

def mark(label):
    """Start a new log segment: later [flagos dispatch] lines belong to ``label``."""
    _sys.stdout.flush()
    _sys.stderr.flush()
    _os.write(2, ({MARK_PREFIX!r} + label + "\\n").encode())

def report(key, value):
    _sys.stdout.flush()
    _os.write(1, ({JSON_PREFIX!r} + _json.dumps({{key: value}}) + "\\n").encode())

def host(v):
    """A result as plain data (device, dtype, shape, values), for comparing with the CPU reference."""
    import torch as _torch
    if isinstance(v, _torch.Tensor):
        return {{"device": str(v.device), "dtype": str(v.dtype), "shape": list(v.shape), "values": v.cpu().tolist()}}
    if isinstance(v, (tuple, list)):
        return [host(x) for x in v]
    return v
'''


@dataclass
class Child:
    argv: list[str]
    env: dict[str, str]
    rc: int
    stdout: str
    stderr: str
    segments: dict[str, list[str]] = field(default_factory=dict)  # label -> stderr lines
    data: dict[str, object] = field(default_factory=dict)

    def describe(self) -> str:
        flagos_env = {k: v for k, v in self.env.items() if k.startswith("FLAGOS")}
        return (
            f"child {self.argv[1:]!r} env {flagos_env} exited {self.rc}\n"
            f"--- stdout ---\n{self.stdout[-6000:]}\n--- stderr ---\n{self.stderr[-6000:]}"
        )

    def dispatch(self, label: str = START) -> list[tuple[str, str]]:
        """(op, route) of every dispatch log line in the segment ``label``."""
        assert label in self.segments, f"no segment {label!r}; have {list(self.segments)}\n{self.describe()}"
        found = []
        for line in self.segments[label]:
            if line.startswith("[flagos dispatch]"):
                match = DISPATCH_RE.fullmatch(line)
                assert match, f"malformed dispatch log line {line!r}"
                found.append((match["op"], match["route"]))
        return found

    def routes_of(self, op: str, label: str = START) -> list[str]:
        return [route for name, route in self.dispatch(label) if name == op]

    def lines(self, prefix: str) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith(prefix)]


def _split(stderr: str) -> dict[str, list[str]]:
    segments: dict[str, list[str]] = {START: []}
    current = START
    for line in stderr.splitlines():
        if line.startswith(MARK_PREFIX):
            current = line[len(MARK_PREFIX) :]
            assert current not in segments, f"label {current!r} used twice"
            segments[current] = []
        else:
            segments[current].append(line)
    return segments


# Debug modes a test run sets for every child (CI runs the suites with the host-read trap on).
PASSED_THROUGH = ("FLAGOS_EMU_TRAP",)


def child_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """os.environ without any FLAGOS_* variable of the caller (except the debug modes of
    PASSED_THROUGH), emulation selected, plus ``env``."""
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("FLAGOS") or k in PASSED_THROUGH}
    clean["FLAGOS_ACCELERATOR"] = "cpu"  # routing semantics asserted here are those of the emulation
    clean["PYTHONFAULTHANDLER"] = "1"
    clean.update(env or {})
    return {k: v for k, v in clean.items() if v is not None}


def run_python(argv: list[str], cwd: Path, env: Mapping[str, str] | None = None, *, expect_ok: bool = True) -> Child:
    full_env = child_env(env)
    proc = subprocess.run([sys.executable, *argv], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=300)
    child = Child(list(proc.args), full_env, proc.returncode, proc.stdout, proc.stderr, _split(proc.stderr))
    for line in proc.stdout.splitlines():
        if line.startswith(JSON_PREFIX):
            child.data.update(json.loads(line[len(JSON_PREFIX) :]))
    if expect_ok and child.rc != 0:
        pytest.fail(f"child failed\n{child.describe()}", pytrace=False)
    if not expect_ok and child.rc == 0:
        pytest.fail(f"child succeeded but was expected to fail\n{child.describe()}", pytrace=False)
    return child


@pytest.fixture
def run_child(tmp_path: Path) -> Callable[..., Child]:
    """run_child(code, env=None, expect_ok=True): run ``code`` (dedented, after PRELUDE) in a child."""

    def run(code: str, env: Mapping[str, str] | None = None, *, expect_ok: bool = True) -> Child:
        return run_python(["-c", PRELUDE + textwrap.dedent(code)], tmp_path, env, expect_ok=expect_ok)

    return run


@pytest.fixture(scope="module")
def module_child(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Child]:
    """Like run_child, for module-scoped fixtures: one child whose results many tests read."""

    def run(code: str, env: Mapping[str, str] | None = None, *, expect_ok: bool = True) -> Child:
        cwd = tmp_path_factory.mktemp("child")
        return run_python(["-c", PRELUDE + textwrap.dedent(code)], cwd, env, expect_ok=expect_ok)

    return run


def _host_result(result: object, device: str) -> object:
    """A child's report of a flagos result with its device fields checked and set to "cpu",
    so it compares equal to the report of the CPU reference."""
    if isinstance(result, list):
        return [_host_result(r, device) for r in result]
    assert isinstance(result, dict) and "device" in result, result
    assert result["device"] == device, f"result on {result['device']}, expected {device}: {result}"
    return {**result, "device": "cpu"}


@pytest.fixture(scope="session")
def host_result() -> Callable[[object, str], object]:
    return _host_result


@pytest.fixture
def run_argv(tmp_path: Path) -> Callable[..., Child]:
    """run_argv(argv, env=None, expect_ok=True): ``python <argv>`` in a child, exactly as given."""

    def run(argv: list[str], env: Mapping[str, str] | None = None, *, expect_ok: bool = True) -> Child:
        return run_python(argv, tmp_path, env, expect_ok=expect_ok)

    return run


@pytest.fixture
def run_module(tmp_path: Path) -> Callable[..., Child]:
    """run_module(args, env=None, expect_ok=True): ``python -m torch_fl <args>`` in a child."""

    def run(args: list[str], env: Mapping[str, str] | None = None, *, expect_ok: bool = True) -> Child:
        return run_python(["-m", "torch_fl", *args], tmp_path, env, expect_ok=expect_ok)

    return run


def _write_conf(folder: Path, name: str, text: str) -> tuple[Path, dict[str, str]]:
    text = textwrap.dedent(text).lstrip("\n")
    path = folder / name
    path.write_text(text)
    tags = {}
    for number, line in enumerate(text.splitlines(), start=1):
        match = re.search(r"#@(\w+)\s*$", line)
        if match:
            tags[match[1]] = f"{path}:{number}"
    return path, tags


@pytest.fixture(scope="session")
def conf_writer() -> Callable[[Path, str, str], tuple[Path, dict[str, str]]]:
    """conf_writer(folder, name, text) -> (path, {tag: "path:line"}); a line ending in ``#@tag`` is
    found by its tag, so tests name conf lines without counting them."""
    return _write_conf


@pytest.fixture
def write_conf(tmp_path: Path) -> Callable[[str, str], tuple[Path, dict[str, str]]]:
    """write_conf(name, text): conf_writer in this test's tmp_path."""
    return lambda name, text: _write_conf(tmp_path, name, text)
