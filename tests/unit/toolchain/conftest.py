"""Unit tests of the host-side build tooling (build_tools/, docker/scripts/, noxfile.py).

No docker, no build, no ``import torch_fl``: the repository root goes on sys.path so ``build_tools`` imports from
the checkout (see buildtest_support.py), and the container-side scripts are loaded by file path.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from buildtest_support import REPO  # noqa: E402


@pytest.fixture
def repo() -> Path:
    return REPO
