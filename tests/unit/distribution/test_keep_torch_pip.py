"""Real pip in a fresh venv, offline: the pip line the README and ``info`` print (``keep_torch_line``) never changes
the node's torch, where the same line without the pin does.

The node has a fake torch 2.15.0; its default index (PIP_INDEX_URL, standing for PyPI or a vendor's torch index)
offers a fake torch 2.14.1, and the torch-fl index has the pages of 2.14 and 2.15 with one fake wheel each.
"""

from __future__ import annotations

import platform
import re
import subprocess
import sys
import venv
from importlib import metadata
from pathlib import Path

import pytest

from build_tools import index
from torch_fl import _torch_line, _variant

REPO = Path(__file__).resolve().parents[3]
PY = f"cp{sys.version_info[0]}{sys.version_info[1]}"
OTHER = "2.14.1"  # the torch the default index offers
pytestmark = [
    pytest.mark.skipif(platform.machine() != "x86_64", reason="the synthetic wheels are x86_64"),
    pytest.mark.skipif(
        tuple(int(x) for x in metadata.version("pip").split(".")[:2]) < (22, 3), reason="pip --python is pip>=22.3"
    ),
]


class Node:
    """A venv with a fake torch, and a pip on its PATH that sees only the test's indexes.

    That pip is this interpreter's, run on the venv (``--python``): the same resolver and installer, without the
    seconds that a pip of the venv's own would cost per test.
    """

    def __init__(self, root: Path, torch_index: Path, torch_fl_index: Path, env: dict) -> None:
        venv.create(root / "venv", with_pip=False)
        self.bin = root / "venv" / "bin"
        (self.bin / "pip").write_text(
            f'#!/bin/sh\nexec "{sys.executable}" -m pip --python "{self.bin / "python"}" "$@"\n'
        )
        (self.bin / "pip").chmod(0o755)
        self.env = {**env, "PATH": f"{self.bin}:{env['PATH']}", "VIRTUAL_ENV": str(root / "venv")}
        self.env.update(PIP_INDEX_URL=(torch_index / "simple").as_uri() + "/", TORCH_FL_INDEX=torch_fl_index.as_uri())
        self.root = root

    def pip(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.shell(" ".join(["pip", *args]))

    def shell(self, script: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-ec", script], env=self.env, cwd=self.root, capture_output=True, text=True)

    def version(self, dist: str) -> str | None:
        code = (
            f"from importlib import metadata as m\ntry: print(m.version({dist!r}))\nexcept m.PackageNotFoundError: pass"
        )
        out = subprocess.run([str(self.bin / "python"), "-c", code], capture_output=True, text=True, check=True)
        return out.stdout.strip() or None


@pytest.fixture
def indexes(tmp_path, smoke, wheel_factory) -> tuple[Path, Path]:
    """(the default index with torch 2.14.1, the torch-fl index base with its cpu/torch-2.14 and 2.15 pages)."""
    torch_index = smoke.stub_torch_index(tmp_path / "torch-index", OTHER)
    base = tmp_path / "torch-fl-index"
    for label in ("pt214cpu", "pt215cpu"):
        wheel_factory(base / "cpu", label, py=PY)
    index.build(base / "cpu", "cpu")
    return torch_index, base


@pytest.fixture
def node(request, tmp_path, indexes, smoke, pip_env) -> Node:
    """A node with torch 2.15.0 (``request.param``: PyPI's spelling or the CPU index's, with a local label)."""
    own = smoke.stub_torch_index(tmp_path / "own-torch", request.param)
    n = Node(tmp_path / "node", *indexes, pip_env)
    res = n.pip("install", "--no-index", "--find-links", str(own / "wheels"), "torch")
    assert res.returncode == 0, res.stderr
    assert n.version("torch") == request.param
    return n


def _readme_block(anchor: str) -> str:
    """The README's bash block that holds ``anchor``."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", readme, re.S)
    (block,) = [b for b in blocks if anchor in b]
    return block


README_KEEP = _variant.keep_torch_line(_torch_line.INDEX_BASE, "cpu/torch-$LINE", "$TORCH")


def test_the_readme_shows_the_generated_lines() -> None:
    """The README's two lines are the code's, so what the tests below run is what the README says."""
    assert (
        README_KEEP
        == 'pip install "torch==$TORCH" torch-fl --extra-index-url "$TORCH_FL_INDEX/cpu/torch-$LINE/simple/"'
    )
    assert README_KEEP in _readme_block(README_KEEP)
    new_env = _variant.pip_line(_torch_line.INDEX_BASE, "cpu", (2, 13))
    assert new_env + " \\\n    --index-url https://download.pytorch.org/whl/cpu" in _readme_block(new_env)


@pytest.mark.parametrize("node", ["2.15.0"], indirect=True)
def test_without_the_pin_pip_swaps_the_nodes_torch(node, indexes) -> None:
    """The danger is real: a torch-fl page of another line, no pin, and pip replaces torch to fit the wheel."""
    page = f"{_torch_line.INDEX_BASE}/cpu/torch-2.14/simple/"
    res = node.pip("install", "torch-fl", "--extra-index-url", f'"{page}"')
    assert res.returncode == 0, res.stderr
    assert node.version("torch") == OTHER
    assert node.version("torch-fl") == "0.1.0+pt214cpu"


@pytest.mark.parametrize("node", ["2.15.0+cpu"], indirect=True)
def test_the_pinned_line_on_a_page_of_another_line_makes_pip_refuse(node) -> None:
    torch = node.version("torch")
    line = _variant.keep_torch_line(_torch_line.INDEX_BASE, "cpu/torch-2.14", torch)
    res = node.shell(line)
    assert res.returncode != 0 and "torch-fl" in res.stderr  # no torch-fl fits this torch on that page
    assert node.version("torch") == torch
    assert node.version("torch-fl") is None


def _installed_its_lines_build(node, res, torch: str) -> None:
    """pip succeeded, installed the build of the node's torch line (2.15) and left that torch as it was."""
    assert res.returncode == 0, res.stderr
    assert node.version("torch") == torch
    assert node.version("torch-fl") == "0.1.0+pt215cpu"


@pytest.mark.parametrize("node", ["2.15.0", "2.15.0+cpu"], indirect=True)
def test_the_readme_block_installs_the_build_of_the_nodes_line_and_keeps_torch(node) -> None:
    torch = node.version("torch")
    block = _readme_block(README_KEEP)
    install = block[: block.index(README_KEEP) + len(README_KEEP)]  # the info check after it needs the real build
    res = node.shell(install)
    _installed_its_lines_build(node, res, torch)


@pytest.mark.parametrize("node", ["2.15.0+cpu"], indirect=True)
def test_the_line_import_torch_fl_prints_replaces_a_wrong_wheel(node) -> None:
    """After ``pip install -U torch``: the pt214 wheel beside torch 2.15; the refusal's pip line fixes it."""
    torch = node.version("torch")
    assert (
        node.pip(
            "install",
            "--no-deps",
            "torch-fl==0.1.0+pt214cpu",
            "--index-url",
            '"$TORCH_FL_INDEX/cpu/torch-2.14/simple/"',
        ).returncode
        == 0
    )
    error = _torch_line.refusal(node.version("torch-fl"), torch, "/venv/torch", "cpu")
    assert error is not None
    (line,) = [x.strip() for x in str(error).splitlines() if x.strip().startswith("pip install")]
    res = node.shell(line)
    _installed_its_lines_build(node, res, torch)
