"""docker/scripts/run_tests.py's --workers: how many pytest-xdist workers the test container's suites run on."""

from __future__ import annotations

import argparse
import importlib.util
import os
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "docker" / "scripts" / "run_tests.py"


@pytest.fixture(scope="module")
def run_tests():
    spec = importlib.util.spec_from_file_location("run_tests_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_auto_is_the_cpus_this_process_may_use(run_tests) -> None:
    assert run_tests.worker_count("auto") == len(os.sched_getaffinity(0))


def test_a_count_is_taken_as_given(run_tests) -> None:
    assert run_tests.worker_count("3") == 3


@pytest.mark.parametrize("bad", ["0", "-2", "two", ""])
def test_a_bad_count_names_itself_and_the_choices(run_tests, bad: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=rf"--workers '{bad}'.*'auto'"):
        run_tests.worker_count(bad)
