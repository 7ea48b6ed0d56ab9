"""A process that used autograd on flagos always exits cleanly, also when the CPUs are busy.

torch's autograd engine runs flagos backward work on a thread per device; such a thread can still hold work that
needs the GIL just after backward() returns. torch_fl settles those threads at exit (csrc/ops/runtime.cpp),
so a short train-then-exit script never aborts in interpreter shutdown.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

DRIVER = Path(__file__).with_name("exit_driver.py")
# Each run is a fork that trains and exits (about 0.25 s of CPU). On two cores the control without the settling
# (exit_driver.py --no-settle) exits cleanly in every run too, so more runs buy no power here; the node script's
# `checks` mode runs 200 of each, control included, on a node's cores beside its suites.
RUNS = 60


@pytest.mark.stress
def test_short_backward_then_exit_runs_always_exit_cleanly(run_argv) -> None:
    # twice as many runs at once as there are CPUs to run them: every exit competes for a CPU
    parallel = 2 * len(os.sched_getaffinity(0))
    child = run_argv([str(DRIVER), "--runs", str(RUNS), "--parallel", str(parallel)])
    result = json.loads(child.stdout.strip().splitlines()[-1])
    assert result["runs"] == RUNS
    assert result["failures"] == 0, f"{result['failures']} of {RUNS} runs did not exit cleanly: {result['first']}"
