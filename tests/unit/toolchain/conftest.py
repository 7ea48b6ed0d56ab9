"""Unit tests of the host-side build tooling (build_tools/, docker/scripts/, noxfile.py).

No docker, no build, no ``import torch_fl``: the repository root goes on sys.path so ``build_tools`` imports from
the checkout (see buildtest_support.py), and the container-side scripts are loaded by file path.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from buildtest_support import REPO  # noqa: E402

from build_tools import matrix  # noqa: E402  (importable once buildtest_support put the root on sys.path)


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
