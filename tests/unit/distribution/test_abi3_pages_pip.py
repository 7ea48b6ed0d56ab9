"""Real pip against a line's page of the matrix's own wheel tags (file://, no network): the one cp3X-abi3 wheel of a
row is what pip takes on every CPython the row serves, and pip refuses a CPython older than the tag."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from build_tools import index, matrix, release

REPO = Path(__file__).resolve().parents[3]
MATRIX = matrix.load(REPO / matrix.DEFAULT_PATH)
PLATFORM = "manylinux_2_28_x86_64"  # the synthetic wheels' platform, named so the host's glibc plays no part
# one row of each (wheel tag, served Pythons) among the emulation's rows: what differs between their pages
CPU_ROWS = [row for row in MATRIX.toolchains.values() if row.variant == "cpu"]
CASES = list({(row.wheel_tag, row.served_pythons): row for row in CPU_ROWS}.values())
pytestmark = pytest.mark.skipif(platform.machine() != "x86_64", reason="the synthetic wheels are x86_64")


def _label(row: matrix.Toolchain) -> str:
    major, minor = release.torch_line(row).split(".")
    return f"pt{major}{int(minor):02d}{row.variant}"


@pytest.fixture
def cpu_index(tmp_path, wheel_factory) -> Path:
    """wheels/cpu/ as `nox -s wheels` leaves it: every emulation row's one wheel, tagged as the matrix says."""
    d = tmp_path / "wheels" / "cpu"
    for row in CPU_ROWS:
        wheel_factory(d, _label(row), py=row.wheel_python, abi="abi3")
    index.build(d, "cpu")
    return d


def _download(page: Path, python: str, dest: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        python,
        "--implementation",
        "cp",
        "--platform",
        PLATFORM,
        "--index-url",
        (page / "simple").as_uri() + "/",
        "-d",
        str(dest),
        "torch-fl",
    ]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, cwd="/tmp")


def test_the_emulation_rows_cover_both_wheel_tags_of_the_matrix():
    assert {row.wheel_tag for row in CASES} >= {"cp310-abi3", "cp311-abi3"}


@pytest.mark.parametrize("row", CASES, ids=lambda row: f"{row.name}-{row.wheel_tag}")
def test_the_lines_page_serves_its_one_abi3_wheel_to_every_python_of_the_row(row, cpu_index, tmp_path, pip_env):
    page = cpu_index / f"torch-{release.torch_line(row)}"
    (wheel,) = (p.name for p in cpu_index.glob(f"torch_fl-*+{_label(row)}-*.whl"))
    assert f"-{row.wheel_tag}-" in wheel
    for python in row.served_pythons:
        dest = tmp_path / python
        res = _download(page, python, dest, pip_env)
        assert res.returncode == 0, f"Python {python}: {res.stderr[-1500:]}"
        assert [p.name for p in dest.iterdir()] == [wheel], python


@pytest.mark.parametrize("row", CASES, ids=lambda row: f"{row.name}-{row.wheel_tag}")
def test_the_lines_page_refuses_a_python_older_than_the_tag(row, cpu_index, tmp_path, pip_env):
    oldest = row.served_pythons[0]
    older = f"3.{int(oldest.split('.')[1]) - 1}"
    page = cpu_index / f"torch-{release.torch_line(row)}"
    res = _download(page, older, tmp_path / "dest", pip_env)
    assert res.returncode != 0 and "No matching distribution found for torch-fl" in res.stderr, res.stderr[-1500:]
    assert not (tmp_path / "dest").exists() or not any((tmp_path / "dest").iterdir())
    # the same page and command serve the tag's own Python: the refusal is the older Python's
    assert _download(page, oldest, tmp_path / "control", pip_env).returncode == 0


def test_the_tag_alone_refuses_python_3_10_on_the_2_15_line(cpu_index, tmp_path, pip_env):
    """The wheels say Requires-Python >=3.10 (pyproject.toml), so 3.10 is turned away by cp311-abi3 alone."""
    row = next(r for r in CPU_ROWS if r.wheel_tag == "cp311-abi3")
    page = cpu_index / f"torch-{release.torch_line(row)}"
    dist = index.read_dist(next(cpu_index.glob(f"torch_fl-*+{_label(row)}-*.whl")))
    assert "3.10" in SpecifierSet(dist.requires_python or "")
    res = _download(page, "3.10", tmp_path / "dest", pip_env)
    assert res.returncode != 0 and "No matching distribution found for torch-fl" in res.stderr
    assert _download(page, "3.11", tmp_path / "control", pip_env).returncode == 0
