"""A build makes the row's one wheel: what it accepts from the export, what it replaces, which Pythons it stages."""

from __future__ import annotations

import dataclasses
import json
import zipfile
from pathlib import Path

import pytest
from buildtest_support import REPO

from build_tools import cache, context, flow, locks, matrix, options, plan, wheel
from build_tools.summary import ImageRef, Summary

MATRIX = matrix.load(REPO / "configs" / "toolchains.toml")
ROW = MATRIX.toolchain("cpu213")
PLATFORMS = "manylinux_2_34_x86_64.manylinux_2_36_x86_64"


def _wheel(directory: Path, tag: str, members=("torch_fl/__init__.py", "torch_fl/libtorch_fl_core.so")) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"torch_fl-0.1.0+pt213cpu-{tag}-{PLATFORMS}.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for m in members:
            zf.writestr(m, b"\x7fELF" if m.endswith(".so") else b"")
    return path


def _flow(repo: Path, **opts) -> flow.Flow:
    return flow.Flow(repo, MATRIX, options.Options(**opts, environ={}), echo=lambda s: None)


def _built(repo: Path, record: dict | None = None) -> wheel.Built:
    wheel_dir, base = repo / "wheels" / ROW.wheel_dir, ImageRef("torch-fl/debian:bookworm", "sha256:1")
    return wheel.Built(
        ROW, None, None, [], base, base, "key1", "sources1", wheel_dir, "0", "", record or {}, locks.lock_args(ROW)
    )


def test_the_export_must_hold_the_rows_one_abi3_wheel(tmp_path):
    f, dest = _flow(tmp_path), tmp_path / "wheels" / "cpu"
    export = tmp_path / "export"
    good = _wheel(export, ROW.wheel_tag)
    (export / "build-info.json").write_text("{}")
    second = _wheel(export, "cp311-abi3")
    with pytest.raises(flow.UserError, match="exported 2 wheels .*not the row's one"):
        wheel.check(f, ROW, export, dest)
    second.unlink()
    cp311 = _wheel(tmp_path / "other", "cp311-cp311", ("torch_fl/_C.cpython-311-x86_64-linux-gnu.so",))
    good.rename(tmp_path / "aside.whl")
    cp311.rename(export / cp311.name)
    with pytest.raises(flow.UserError, match="tagged cp311-cp311, not cp310-abi3.*one CPython's ABI"):
        wheel.check(f, ROW, export, dest)
    (export / cp311.name).unlink()
    (tmp_path / "aside.whl").rename(good)
    assert wheel.check(f, ROW, export, dest) == dest / good.name and not good.exists()
    assert (tmp_path / "build" / "state" / ROW.name / "build-info.json").is_file()


def test_a_new_wheel_replaces_the_rows_last_wheels_and_record(tmp_path):
    f, built = _flow(tmp_path), _built(tmp_path)
    f.images.prune_old = lambda repo_name, keep: None  # no docker here: the image steps are not under test
    f.images.image_id = lambda ref: None
    # what a build of the per-Python layout left: its test Python's wheel, and the others it split off
    old = _wheel(built.wheel_dir, "cp311-cp311")
    other = _wheel(built.wheel_dir, "cp312-cp312")
    neighbour = built.wheel_dir / "torch_fl-0.1.0+pt214cpu-cp310-abi3-linux_x86_64.whl"
    neighbour.write_bytes(b"another row's wheel")
    edited = _wheel(built.wheel_dir, "cp313-cp313")
    sha = {p.name: context.file_sha256(p) for p in (old, other)}
    f.state.write(
        ROW.name,
        key="key0",
        wheel=old.name,
        sha256=sha[old.name],
        pythons=["3.11", "3.12"],
        others={other.name: sha[other.name], edited.name: "not its hash"},
    )
    new = _wheel(built.wheel_dir, ROW.wheel_tag)
    built.record = f.state.read(ROW.name)
    cache.wheel(f, built, Summary(ROW.name), lambda flow_, built_: new)
    assert not old.exists() and not other.exists()
    assert neighbour.exists() and edited.exists()  # not the row's record of them: never removed
    state = json.loads(f.state.path(ROW.name).read_text())
    assert state == {
        "key": "key1",
        "wheel": new.name,
        "sha256": context.file_sha256(new),
        "builder_image": built.builder_tag,
        "sources": "sources1",
    }
    assert cache._up_to_date(built, state, rebuild=False) == new
    assert cache._up_to_date(built, state, rebuild=True) is None
    new.write_bytes(b"changed")
    assert cache._up_to_date(built, state, rebuild=False) is None


def test_only_the_images_pythons_are_staged_and_no_builder_python(tmp_path):
    row = MATRIX.toolchain("cpu29")  # serves 3.10-3.14, tests on 3.11, install-checks 3.10
    assert wheel.image_pythons(row) == ("3.10", "3.11")
    assert wheel.image_pythons(row, all_pythons=True) == row.served_pythons
    assert wheel.image_pythons(MATRIX.toolchain("dcu")) == ()


def test_the_builder_gets_the_rows_py_api_and_no_python_headers(tmp_path):
    from build_tools import env

    inp = plan.BuildInputs(
        Path("ctx"), Path("Dockerfile"), "b", "t", Path("pip.conf"), env.from_environ({}), "k", python_source="bookworm"
    )
    for name, api in (("cpu213", "cp310"), ("cpu", "cp311"), ("cuda215", "cp311")):
        row = MATRIX.toolchain(name)
        argv = plan.build_args(row, dataclasses.replace(inp, locks=locks.lock_args(row)))
        args = dict(a.split("=", 1) for a in argv if "=" in a and not a.startswith("-"))
        assert args["WHEEL_PY_API"] == api, name
        assert not {"PYTHONS", "PYTHON_HEADER_SOURCES"} & set(args), name
    for dockerfile in ("docker/Dockerfile", "docker/dcu/Dockerfile"):
        text = (REPO / dockerfile).read_text()
        assert "ARG WHEEL_PY_API" in text and "python-headers" not in text and "split_wheel" not in text, dockerfile
