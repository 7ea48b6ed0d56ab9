"""A process ends cleanly right after a collective, however late Gloo's worker thread runs.

Gloo's worker thread drops its reference to a work after waking the caller; exit_after_collective.py heads for
exit as soon as the result is written, keeping the GIL. torch_fl keeps every Gloo work until no other thread holds it
(torch_fl/_gloo_works.py, csrc/comm/work_keeper.cpp), so the worker never destroys the tensors and never needs the
GIL while the interpreter finalises. Without that the program aborts at exit ("terminate called without an active
exception"), the way the README's FSDP2 example did at times on a loaded machine: in most runs on an idle host,
less often on a loaded one (the worker thread then arrives after the interpreter has stopped taking new GIL
holders), so each device gets RUNS runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import torch_fl

PROGRAM = Path(__file__).with_name("exit_after_collective.py")

# host tensors take Gloo on every vendor; flagos tensors take it under the emulation only
DEVICES = ["cpu"] + (["flagos"] if torch_fl.accelerator() == "cpu" else [])
RUNS = 5


@pytest.mark.stress
@pytest.mark.parametrize("run", range(RUNS))
@pytest.mark.parametrize("device", DEVICES)
def test_exit_right_after_a_collective_is_clean(device: str, run: int, tmp_path: Path) -> None:
    res = subprocess.run(
        [sys.executable, str(PROGRAM), device],
        cwd=tmp_path,
        env={**os.environ, "TORCH_CPP_LOG_LEVEL": "ERROR"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, f"exited {res.returncode}:\n{res.stdout[-2000:]}\n{res.stderr[-4000:]}"
    assert f"gathered on {device}" in res.stdout
