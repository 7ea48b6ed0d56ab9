"""The install check's wheel of another torch line: pip picks it from the other lines' pages by its tags, as a node's
pip would (docker/scripts/install_smoke.py, run here with this interpreter's real pip against file pages)."""

from __future__ import annotations

import platform
import sys

import pytest

from build_tools import index

HERE = sys.version_info[1]
pytestmark = pytest.mark.skipif(platform.machine() != "x86_64", reason="the synthetic wheels are x86_64")


def test_the_newest_other_line_that_this_python_takes_is_forced_in(tmp_path, wheel_factory, smoke):
    d = tmp_path / "cpu"
    wheel_factory(d, "pt209cpu", py="cp310")
    wheel_factory(d, "pt213cpu", py="cp310")
    newest = wheel_factory(d, "pt215cpu", py=f"cp3{HERE}")
    index.build(d, "cpu")
    got = smoke.wheel_of_another_line(d, 2, 13, tmp_path / "dl")
    assert got is not None and got.name == newest.name and got.read_bytes() == newest.read_bytes()


def test_a_line_whose_wheel_is_for_newer_pythons_only_is_passed_over(tmp_path, wheel_factory, smoke):
    d = tmp_path / "cpu"
    older = wheel_factory(d, "pt209cpu", py="cp310")
    wheel_factory(d, "pt213cpu", py="cp310")
    wheel_factory(d, "pt215cpu", py=f"cp3{HERE + 1}")  # as cp311-abi3 is to a Python 3.10 node
    index.build(d, "cpu")
    assert smoke.wheel_of_another_line(d, 2, 13, tmp_path / "dl").name == older.name
    (d / "torch-2.9").rename(tmp_path / "aside")  # now no other line has a wheel for this Python
    assert smoke.wheel_of_another_line(d, 2, 13, tmp_path / "dl2") is None


def test_no_other_line_and_a_broken_page_are_told_apart(tmp_path, wheel_factory, smoke):
    d = tmp_path / "cpu"
    wheel_factory(d, "pt213cpu", py="cp310")
    other = wheel_factory(d, "pt214cpu", py="cp310")
    index.build(d, "cpu")
    (d / "torch-2.14").rename(tmp_path / "aside")
    assert smoke.wheel_of_another_line(d, 2, 13, tmp_path / "dl") is None  # the variant holds one line
    (tmp_path / "aside").rename(d / "torch-2.14")
    other.write_bytes(b"not the file the page's hash names")
    with pytest.raises(SystemExit, match="pip download from the other lines' pages failed"):
        smoke.wheel_of_another_line(d, 2, 13, tmp_path / "dl2")
