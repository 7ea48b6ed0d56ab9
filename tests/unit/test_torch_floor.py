"""torch_fl/_torch_floor.py: the torch>=2.9 floor that ``import torch_fl`` checks before loading its extension."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch_fl_torch_floor as floor  # registered by conftest (loaded by path)

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "version",
    ["2.9.0", "2.9.1+cu128", "2.9.0+das.opt1.dtk2604", "2.10.0", "2.10.0a0+git1a2b3c", "2.14.1+cpu", "3.0.0"],
)
def test_the_floor_and_newer_lines_pass(version: str) -> None:
    assert floor.refusal(version) is None


@pytest.mark.parametrize("version", ["2.8.0", "2.8.0+cpu", "2.1.2+rocm5.6", "1.13.1", "1.99.0"])
def test_older_lines_are_refused(version: str) -> None:
    error = floor.refusal(version, "/venv/lib/python3.11/site-packages/torch")
    assert isinstance(error, ImportError)
    message = str(error)
    assert "torch>=2.9" in message
    assert f"torch {version} (/venv/lib/python3.11/site-packages/torch)" in message
    assert "pip show torch-fl" in message  # says what to do


def test_lines_compare_as_numbers_not_text() -> None:
    # "2.10" sorts before "2.9" as text; as a line it is newer.
    assert floor.torch_line("2.10.0") == (2, 10)
    assert floor.torch_line("2.10.0") > floor.torch_line(floor.FLOOR)  # type: ignore[operator]
    assert floor.refusal("2.10.0") is None


def test_an_unreadable_version_passes() -> None:
    assert floor.torch_line("nightly") is None
    assert floor.refusal("nightly") is None


def test_cmake_reads_the_same_floor() -> None:
    cmake = (ROOT / "CMakeLists.txt").read_text(encoding="utf-8")
    assert "torch_fl/_torch_floor.py" in cmake
    assert re.search(r'^FLOOR = "(\d+\.\d+)"$', (ROOT / "torch_fl" / "_torch_floor.py").read_text(), re.M)


def test_the_package_checks_before_loading_its_extension() -> None:
    source = (ROOT / "torch_fl" / "__init__.py").read_text(encoding="utf-8")
    check = source.index("_torch_floor.refusal(torch.__version__")
    assert 0 <= check < source.index("raise _too_old") < source.index("from . import _core")
