"""The release matrix: what `nox -s wheels -- --list` prints and README.md's table of the wheels that exist."""

from __future__ import annotations

import re

from buildtest_support import REPO

from build_tools import matrix, options, release

MATRIX = matrix.load(REPO / "configs" / "toolchains.toml")


def test_the_list_has_one_abi3_wheel_per_row_of_the_matrix():
    lines = release.listing(MATRIX).splitlines()
    assert len(lines) == len(MATRIX.toolchains) == len(set(lines))
    assert all(re.fullmatch(r"[a-z0-9]+ torch-\d+\.\d+ cp3\d+-abi3", line) for line in lines), lines
    # every line of torch 2.9-2.15 on the emulation, tagged for the oldest Python that PyPI's torch of that line ships
    for minor in range(9, 16):
        assert f"cpu torch-2.{minor} {'cp311' if minor == 15 else 'cp310'}-abi3" in lines


def test_a_rows_wheel_is_tagged_for_the_oldest_python_it_serves():
    cpu, cuda215 = MATRIX.toolchain("cpu"), MATRIX.toolchain("cuda215")
    assert cpu.served_pythons == ("3.11", "3.12", "3.13", "3.14") and cpu.wheel_tag == "cp311-abi3"
    assert cuda215.wheel_tag == "cp311-abi3"
    assert MATRIX.toolchain("cpu213").wheel_tag == "cp310-abi3"
    assert MATRIX.toolchain("dcu").wheel_tag == "cp310-abi3"  # the DTK image's own Python
    entry = next(e for e in release.entries(MATRIX) if e.toolchain.name == "cuda215")
    assert entry.describe() == "cu132 torch-2.15 cp311-abi3"


def test_the_list_prints_its_count_and_one_line_per_wheel(tmp_path, capsys):
    from build_tools import flow
    from build_tools.summary import Summary

    said: list[str] = []
    f = flow.Flow(tmp_path, MATRIX, options.Options(dry_run=True, environ={}), echo=said.append)
    assert release.build_all(f, Summary("wheels"), ["--list"]) == []
    assert said == [f"the wheel matrix of {MATRIX.path}, {len(MATRIX.toolchains)} wheels:"]
    assert capsys.readouterr().out.splitlines() == release.listing(MATRIX).splitlines()


def test_a_line_comes_from_the_requirement_or_the_images_torch_line():
    assert release.torch_line(MATRIX.toolchain("cpu29")) == "2.9"
    assert release.torch_line(MATRIX.toolchain("dcu")) == MATRIX.toolchain("dcu").torch.line


def test_the_readme_shows_the_table_of_the_matrix():
    assert release.wheel_table(MATRIX) in (REPO / "README.md").read_text(encoding="utf-8"), (
        "README.md's wheel table is not the matrix's: paste build_tools.release.wheel_table()'s output there"
    )


def test_the_release_refuses_an_unknown_row_by_name(tmp_path):
    import pytest

    from build_tools import flow
    from build_tools.summary import Summary

    f = flow.Flow(tmp_path, MATRIX, options.Options(dry_run=True, environ={}), echo=lambda s: None)
    with pytest.raises(flow.UserError, match="takes --list or row names .*not cpu999"):
        release.build_all(f, Summary("wheels"), ["cpu999"])
