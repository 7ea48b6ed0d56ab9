"""Real pip against the per-line pages (file://, no network): a torch 2.13 environment gets the +pt213 build and
keeps its torch, with a torch index that offers torch 2.14 beside it, as in the README's pip line."""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

from build_tools import index

torch = pytest.importorskip("torch")
LINE = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
PY = f"cp{sys.version_info[0]}{sys.version_info[1]}"
pytestmark = pytest.mark.skipif(platform.machine() != "x86_64", reason="the synthetic wheels are x86_64")


def _label(line):
    return f"pt{line[0]}{line[1]:02d}cpu"


def _dry_run(env: dict[str, str], *args: str) -> list[dict]:
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--report", "-", *args]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd="/tmp")
    assert res.returncode == 0, res.stderr[-2000:]
    return [x["metadata"] for x in json.loads(res.stdout)["install"]]


@pytest.fixture
def variant_index(tmp_path, wheel_factory):
    d = tmp_path / "cpu"
    for line in (LINE, (LINE[0], LINE[1] + 1), (LINE[0], LINE[1] - 1)):
        wheel_factory(d, _label(line), py=PY)
    index.build(d, "cpu")
    return d


def test_the_page_of_this_torch_line_never_offers_the_next_lines_build(variant_index, pip_env):
    page = variant_index / index.variants.line_page(LINE)
    installs = _dry_run(pip_env, "--index-url", (page / "simple").as_uri() + "/", "torch-fl")
    assert [(x["name"], x["version"]) for x in installs] == [("torch-fl", f"0.1.0+{_label(LINE)}")]


def test_find_links_on_the_flat_page_of_the_line(variant_index, pip_env):
    page = variant_index / index.variants.line_page(LINE)
    installs = _dry_run(pip_env, "--no-index", "--find-links", str(page / "index.html"), "torch-fl")
    assert [x["version"] for x in installs] == [f"0.1.0+{_label(LINE)}"]


def test_a_torch_index_with_a_newer_torch_beside_the_page_leaves_torch_alone(variant_index, tmp_path, smoke, pip_env):
    newer = f"{LINE[0]}.{LINE[1] + 1}.0"
    stub = smoke.stub_torch_index(tmp_path / "torch-index", newer)
    torch_index = (stub / "simple").as_uri() + "/"
    page = (variant_index / index.variants.line_page(LINE) / "simple").as_uri() + "/"
    # the stub is a valid candidate: asked for, pip takes it
    assert [x["version"] for x in _dry_run(pip_env, "--index-url", torch_index, f"torch=={newer}")] == [newer]
    for args in (
        ["--index-url", page, "--extra-index-url", torch_index, "torch-fl"],
        [f"torch=={LINE[0]}.{LINE[1]}.*", "torch-fl", "--index-url", torch_index, "--extra-index-url", page],
    ):
        installs = _dry_run(pip_env, *args)
        assert [(x["name"], x["version"]) for x in installs] == [("torch-fl", f"0.1.0+{_label(LINE)}")], args


def test_every_line_in_one_place_is_the_trap_the_pages_avoid(variant_index, tmp_path, smoke, pip_env):
    """The same wheels and torch index without the per-line page: pip takes the next line's build and its torch."""
    newer = f"{LINE[0]}.{LINE[1] + 1}.0"
    stub = smoke.stub_torch_index(tmp_path / "torch-index", newer)
    args = ["--index-url", (stub / "simple").as_uri() + "/", "--find-links", str(variant_index), "torch-fl"]
    installs = {x["name"]: x["version"] for x in _dry_run(pip_env, *args)}
    assert installs == {"torch-fl": f"0.1.0+{_label((LINE[0], LINE[1] + 1))}", "torch": newer}
