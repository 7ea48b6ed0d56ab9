"""The release matrix: what `nox -s wheels -- --list` prints and README.md's table of the wheels that exist."""

from __future__ import annotations

import re

from buildtest_support import REPO

from build_tools import matrix, release

MATRIX = matrix.load(REPO / "configs" / "toolchains.toml")


def test_the_list_has_one_line_per_row_and_python_of_the_matrix():
    lines = release.listing(MATRIX).splitlines()
    expected = sum(len(row.release_pythons) for row in MATRIX.toolchains.values())
    assert len(lines) == expected == len(set(lines))
    assert all(re.fullmatch(r"[a-z0-9]+ torch-\d+\.\d+ cp3\d+", line) for line in lines), lines
    # every line of torch 2.9-2.15 on the emulation, for every Python that PyPI's torch of that line ships
    for minor in range(9, 16):
        pythons = range(11, 15) if minor == 15 else range(10, 15)
        for py in pythons:
            assert f"cpu torch-2.{minor} cp3{py}" in lines


def test_a_line_comes_from_the_requirement_or_the_images_torch_line():
    assert release.torch_line(MATRIX.toolchain("cpu29")) == "2.9"
    assert release.torch_line(MATRIX.toolchain("dcu")) == MATRIX.toolchain("dcu").torch.line


def test_the_readme_shows_the_table_of_the_matrix():
    assert release.wheel_table(MATRIX) in (REPO / "README.md").read_text(encoding="utf-8"), (
        "README.md's wheel table is not the matrix's: paste build_tools.release.wheel_table()'s output there"
    )


def test_the_release_refuses_an_unknown_row_by_name(tmp_path):
    import pytest

    from build_tools import flow, plan
    from build_tools.summary import Summary

    f = flow.Flow(tmp_path, MATRIX, plan.Options(dry_run=True), echo=lambda s: None, environ={})
    with pytest.raises(flow.UserError, match="takes --list or row names .*not cpu999"):
        release.build_all(f, Summary("wheels"), ["cpu999"])
