"""The node check that ships in the wheel, ``python -m torch_fl.bench``: the seed's A/B with every flagos arm's
route confirmed from the dispatch log, against the installed package."""

from __future__ import annotations

import importlib
import importlib.util
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Run = Callable[..., subprocess.CompletedProcess[str]]  # conftest.py's node_check_cli
# What the wheel's torch_fl/bench holds: the node check alone; the harness is a tool of build_tools/bench.
NODE_CHECK_FILES = {"__init__.py", "__main__.py", "cases.py", "child.py", "run.py", "stats.py"}


def _load_run() -> Any:
    return importlib.import_module("torch_fl.bench.run")  # on first use: importing it loads torch_fl


def test_the_wheel_holds_the_node_check_only() -> None:
    package = Path(importlib.util.find_spec("torch_fl").submodule_search_locations[0]) / "bench"
    assert {p.name for p in package.glob("*.py")} == NODE_CHECK_FILES


def test_the_node_check_confirms_each_route(node_check_cli: Run, tmp_path: Path) -> None:
    out = tmp_path / "ab.json"
    proc = node_check_cli("--short", "--cases", "bias_3x101x33", "--routes", "native,cpu", "--json", out)
    saved = json.loads(out.read_text())
    (case,) = saved["ab"]
    assert case["case"] == "bias_3x101x33" and list(case["arms"]) == ["plain", "native", "cpu"]
    assert case["arms"]["native"]["route"] == "native" and case["arms"]["cpu"]["route"] == "cpu"
    assert case["arms"]["plain"]["route"] is None and len(case["arms"]["native"]["vs_plain"]) == 1
    assert saved["environment"]["vendor"] in ("cpu", "cuda", "dcu")
    assert "route native confirmed" in proc.stderr and "route cpu confirmed" in proc.stderr
    header, row = proc.stdout.splitlines()[-2:]
    assert header.startswith("case") and "cpu/native" in header and row.startswith("bias_3x101x33")


def test_a_route_other_than_the_arm_fails_the_run() -> None:
    run = _load_run()
    assert run.confirm_route("x", [["add.Tensor", "native"]], "add.Tensor", "native") == "native"
    assert run.confirm_route("x", [["add.Tensor", "native"]], "add.Tensor", "cuda") == "native"  # the alias
    with pytest.raises(run.BenchError, match="shows \\['cpu'\\]"):
        run.confirm_route("x", [["add.Tensor", "cpu"]], "add.Tensor", "native")
    with pytest.raises(run.BenchError, match="unconfirmed"):
        run.confirm_route("x", [["mul.Tensor", "native"]], "add.Tensor", "native")


def test_children_get_steady_malloc_unless_the_caller_chose(monkeypatch: pytest.MonkeyPatch) -> None:
    run = _load_run()
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    assert run.child_env("cpu", "native")["GLIBC_TUNABLES"] == run.STEADY_MALLOC
    assert run.child_env("cpu", "plain")["GLIBC_TUNABLES"] == run.STEADY_MALLOC  # every arm alike
    assert "GLIBC_TUNABLES" not in run.child_env("cpu", "native", steady_malloc=False)
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=1")
    assert run.child_env("cpu", "native")["GLIBC_TUNABLES"] == "glibc.malloc.arena_max=1"


def test_a_child_is_the_installed_file_and_needs_no_package_import(monkeypatch: pytest.MonkeyPatch) -> None:
    """Children start child.py by its path (a plain arm must not import torch_fl); PYTHONSAFEPATH cannot stop them."""
    run = _load_run()
    monkeypatch.setenv("PYTHONSAFEPATH", "1")
    assert run.CHILD.parent == Path(run.__file__).resolve().parent
    spec = {"mode": "probe", "routes": ["native"], "threads": 1, "cpu": None}
    facts = run.run_child(spec, run.child_env(None, None), 300)
    assert facts["environment"]["torch_fl_path"] == str(Path(run.__file__).resolve().parents[1])
