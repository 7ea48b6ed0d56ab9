"""``python -m torch_fl`` under a bad configuration: ``info`` lists the problems as findings (exit 1) where
``import torch_fl`` raises them, and the commands that need the device say why they cannot run (exit 2)."""

from __future__ import annotations

import json

BAD = {"FLAGOS_OP_add__Tensor": "bogus", "FLAGOS_EMU_DEVICES": "many"}


def test_info_reports_a_bad_configuration_as_findings(run_module):
    child = run_module(["info"], env=BAD, expect_ok=False)
    assert child.rc == 1 and "Traceback" not in child.stdout + child.stderr, child.describe()
    lines = child.stdout.splitlines()
    assert any(line.startswith("configuration") and "2 problem(s)" in line for line in lines), child.stdout
    assert "FLAGOS_OP_add__Tensor" in child.stdout and "FLAGOS_EMU_DEVICES" in child.stdout
    assert any(line.startswith("variant") for line in lines)  # what does not need the device is still reported


def test_other_programs_still_stop_at_import(run_child):
    # only `python -m torch_fl` defers the error; for every other program the same variables stop the import
    child = run_child("import torch_fl", env=BAD, expect_ok=False)
    assert "ConfigError" in child.stderr and "FLAGOS_OP_add__Tensor" in child.stderr


def test_route_under_a_bad_configuration_says_why_it_cannot_run(run_module):
    child = run_module(["route", "mm"], env=BAD, expect_ok=False)
    assert child.rc == 2 and "Traceback" not in child.stderr, child.describe()
    assert child.stderr.startswith("error: torch_fl cannot start") and "FLAGOS_EMU_DEVICES" in child.stderr


def test_info_json_lists_the_problems(run_module):
    child = run_module(["info", "--json"], env=BAD, expect_ok=False)
    info = json.loads(child.stdout)
    assert child.rc == 1 and len(info["configuration"]) == 2 and "accelerator" not in info
