"""Unit tests of the host-side build tooling (build_tools/, docker/scripts/, noxfile.py).

No docker, no build, no ``import torch_fl``: ``build_tools`` imports from the checkout (tests/unit/conftest.py puts
the root on sys.path), and the container-side scripts, which are no package, are loaded by file path.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
from buildtest_support import REPO

from build_tools import matrix


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture(scope="module")
def m() -> matrix.Matrix:
    return matrix.load(REPO / "configs" / "toolchains.toml")


@pytest.fixture
def fake_repo(tmp_path, m) -> tuple[Path, matrix.Matrix]:
    """A throw-away repository: the real docker/ tree and matrix, one small build input."""
    repo = tmp_path / "repo"
    shutil.copytree(REPO / "docker", repo / "docker")
    (repo / "configs").mkdir(parents=True)
    shutil.copy(REPO / "configs" / "toolchains.toml", repo / "configs" / "toolchains.toml")
    (repo / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    small = dataclasses.replace(m.build, inputs=("pyproject.toml",), optional_inputs=())
    return repo, dataclasses.replace(m, build=small)
