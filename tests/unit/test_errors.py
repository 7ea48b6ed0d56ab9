"""torch_fl/_errors.py: the one error every configuration problem is raised as."""

from __future__ import annotations

import torch_fl_errors as errors  # registered by conftest

ConfigError = errors.ConfigError


def test_one_problem_reads_as_itself() -> None:
    error = ConfigError("FLAGOS_LOG='x' has unknown category x")
    assert str(error) == "FLAGOS_LOG='x' has unknown category x"
    assert error.problems == ("FLAGOS_LOG='x' has unknown category x",)
    assert isinstance(error, ValueError)


def test_several_problems_read_as_a_count_and_the_list() -> None:
    error = ConfigError(["a.conf:1: first", "env FLAGOS_OP_relu: second"])
    assert str(error).splitlines() == [
        "2 problems in the flagos route configuration:",
        "  a.conf:1: first",
        "  env FLAGOS_OP_relu: second",
    ]


def test_a_conf_line_carries_its_location() -> None:
    error = ConfigError.at("a.conf", 3, "no '='")
    assert str(error) == "a.conf:3: no '='" and (error.path, error.line) == ("a.conf", 3)
    assert (ConfigError("elsewhere").path, ConfigError("elsewhere").line) == (None, None)


def test_merged_keeps_a_single_error_and_joins_several_in_order() -> None:
    assert errors.merged([]) is None
    single = ConfigError.at("a.conf", 1, "bad")
    assert errors.merged([single]) is single
    joined = errors.merged([single, ConfigError(["x", "y"])])
    assert joined is not None and joined.problems == ("a.conf:1: bad", "x", "y")


def test_the_other_names_are_the_same_type() -> None:
    assert errors.ConfError is errors.EnvError is errors.RouteError is ConfigError
