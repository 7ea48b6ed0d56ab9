"""Build-context staging, input hashing and atomic outputs."""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path

import pytest

from build_tools import cache, context, flow, matrix, outputs
from build_tools.state import State

SPEC = matrix.BuildSpec(
    inputs=("pyproject.toml", "csrc"),
    optional_inputs=("README.md",),
    test_suites=("routing",),
    test_excludes=("unit",),
)
PYPROJECT = """
[project]
name = "x"
[tool.pytest.ini_options]
markers = ["cuda: needs cuda", "dcu: needs dcu"]
addopts = "-ra --strict-markers"
testpaths = ["tests"]
xfail_strict = true
"""


def toolchain(repo: Path) -> matrix.Toolchain:
    return matrix.Toolchain(
        name="cpu",
        summary="s",
        dockerfile="docker/cpu/Dockerfile",
        builder_image="b",
        test_image="t",
        python="3.11",
        variant="cpu",
        torch=matrix.TorchSpec("torch"),
        auditwheel_exclude=("libtorch*.so*",),
        pytest_markers="",
        accelerator="cpu",
    )


@pytest.fixture
def fake_repo(tmp_path) -> Path:
    repo = tmp_path / "repo"
    (repo / "csrc" / "sub").mkdir(parents=True)
    (repo / "csrc" / "a.cpp").write_text("int a;\n")
    (repo / "csrc" / "sub" / "b.h").write_text("#pragma once\n")
    (repo / "csrc" / "__pycache__").mkdir()
    (repo / "csrc" / "__pycache__" / "x.pyc").write_bytes(b"junk")
    (repo / "csrc" / "stale_build.so").write_bytes(b"elf")
    (repo / "pyproject.toml").write_text(PYPROJECT)
    (repo / "docker" / "cpu").mkdir(parents=True)
    (repo / "docker" / "cpu" / "Dockerfile").write_text("FROM scratch\n")
    (repo / "docker" / "cpu" / "requirements-test.txt").write_text("pytest\n")
    (repo / "docker" / "scripts").mkdir()
    (repo / "docker" / "scripts" / "run_tests.py").write_text("print()\n")
    for d in ("unit", "routing", "bench"):
        (repo / "tests" / d).mkdir(parents=True)
        (repo / "tests" / d / f"test_{d}.py").write_text("def test(): pass\n")
    for tool in ("bench/harness/__main__.py", "node/step_ops.py", "matrix.py"):
        (repo / "build_tools" / tool).parent.mkdir(parents=True, exist_ok=True)
        (repo / "build_tools" / tool).write_text("print()\n")
    return repo


def wheelhouse(tmp_path: Path) -> Path:
    wh = tmp_path / "wh"
    wh.mkdir(exist_ok=True)
    (wh / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"w" * 100)
    (wh / "index.html").write_text("not a distribution")
    return wh


def test_stage_build_copies_exactly_the_inputs(fake_repo, tmp_path):
    shared = "# shared\nsympy==1.14.0 \\\n    --hash=sha256:aa\n"
    staged = context.stage_build(fake_repo, toolchain(fake_repo), SPEC, [wheelhouse(tmp_path)], shared)
    root = staged.root
    assert root == fake_repo / "build" / "docker" / "cpu" / "context"
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert (root / "shared-lock.txt").read_text() == shared
    assert files == [
        "scripts/run_tests.py",
        "shared-lock.txt",
        "src/csrc/a.cpp",
        "src/csrc/sub/b.h",
        "src/pyproject.toml",
        "vendor/requirements-test.txt",
        "wheelhouse/0/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
    ]
    staged_wheel = root / "wheelhouse/0/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    assert staged_wheel.stat().st_ino == (tmp_path / "wh" / staged_wheel.name).stat().st_ino  # hard link


def test_staging_is_a_sync_and_the_digest_tracks_content(fake_repo, tmp_path):
    wh = wheelhouse(tmp_path)
    first = context.stage_build(fake_repo, toolchain(fake_repo), SPEC, [wh])
    again = context.stage_build(fake_repo, toolchain(fake_repo), SPEC, [wh])
    assert first == again
    (fake_repo / "csrc" / "sub" / "b.h").unlink()
    (fake_repo / "csrc" / "a.cpp").write_text("int a = 1;\n")
    changed = context.stage_build(fake_repo, toolchain(fake_repo), SPEC, [wh])
    assert not (changed.root / "src/csrc/sub/b.h").exists()  # stale file removed
    assert changed.src_digest != first.src_digest
    assert changed.scripts_digest == first.scripts_digest
    assert changed.wheelhouse_digest == first.wheelhouse_digest


def test_sources_digest_tracks_the_inputs_and_the_row_only(fake_repo, tmp_path):
    row = toolchain(fake_repo)
    first = context.sources_digest(fake_repo, row, SPEC)
    (fake_repo / "tests" / "routing" / "test_routing.py").write_text("def test(): assert 1\n")  # not an input
    (fake_repo / "csrc" / "other.so").write_bytes(b"a build product")  # never an input
    assert context.sources_digest(fake_repo, row, SPEC) == first
    (fake_repo / "csrc" / "a.cpp").write_text("int a = 2;\n")
    edited = context.sources_digest(fake_repo, row, SPEC)
    assert edited != first
    (fake_repo / "csrc" / "a.cpp").write_text("int a;\n")
    assert context.sources_digest(fake_repo, row, SPEC) == first
    (fake_repo / "csrc" / "a.cpp").rename(fake_repo / "csrc" / "c.cpp")  # same content, another path
    assert context.sources_digest(fake_repo, row, SPEC) != first
    (fake_repo / "csrc" / "c.cpp").rename(fake_repo / "csrc" / "a.cpp")
    other_torch = dataclasses.replace(row, torch=matrix.TorchSpec("torch==2.14.1"))
    assert context.sources_digest(fake_repo, other_torch, SPEC) != first


def _record_build(repo: Path, row: matrix.Toolchain, data: bytes = b"a repaired wheel") -> Path:
    """What build-<toolchain> leaves: the wheel under wheels/<variant>/ and its state."""
    wheel = repo / "wheels" / row.wheel_dir / "torch_fl-0.1.0+pt213cpu-cp311-cp311-manylinux_2_34_x86_64.whl"
    wheel.parent.mkdir(parents=True, exist_ok=True)
    wheel.write_bytes(data)
    State(repo / "build" / "state").write(
        row.name, wheel=wheel.name, sha256=context.file_sha256(wheel), sources=context.sources_digest(repo, row, SPEC)
    )
    return wheel


def test_built_wheel_is_the_checkouts_build_or_names_the_session_that_makes_it(fake_repo):
    row = toolchain(fake_repo)
    with pytest.raises(flow.UserError, match=r"names no repaired wheel.*run `nox -s test-cpu` first"):
        cache.built_wheel(fake_repo, row, SPEC)
    wheel = _record_build(fake_repo, row)
    assert cache.built_wheel(fake_repo, row, SPEC) == wheel

    (fake_repo / "csrc" / "a.cpp").write_text("int a = 3;\n")  # a source edited after the build
    with pytest.raises(flow.UserError, match=r"built from other sources.*run `nox -s test-cpu` first"):
        cache.built_wheel(fake_repo, row, SPEC)
    _record_build(fake_repo, row)  # rebuilt from the edited source
    assert cache.built_wheel(fake_repo, row, SPEC) == wheel

    wheel.write_bytes(b"another file under the recorded name")
    with pytest.raises(flow.UserError, match=r"sha256 differs.*run `nox -s test-cpu` first"):
        cache.built_wheel(fake_repo, row, SPEC)
    wheel.unlink()
    with pytest.raises(flow.UserError, match=r"names no repaired wheel"):
        cache.built_wheel(fake_repo, row, SPEC)


def test_missing_required_input_is_a_clear_error(fake_repo):
    spec = matrix.BuildSpec(inputs=("pyproject.toml", "CMakeLists.txt"), test_suites=("routing",))
    with pytest.raises(FileNotFoundError, match="build input 'CMakeLists.txt'"):
        context.input_files(fake_repo, spec)


def test_pytest_ini_comes_from_pyproject_without_source_tree_keys(fake_repo):
    ini = context.pytest_ini(fake_repo / "pyproject.toml")
    assert "[pytest]" in ini
    assert "markers =\n    cuda: needs cuda\n    dcu: needs dcu" in ini
    assert "addopts = -ra --strict-markers" in ini
    assert "xfail_strict = true" in ini
    assert "testpaths" not in ini
    assert context.pytest_ini(fake_repo / "missing.toml").splitlines()[1:] == ["[pytest]"]


def test_stage_tests_leaves_out_host_only_suites(fake_repo, tmp_path):
    wheel = tmp_path / "torch_fl-0.1.0+pt213cpu-cp311-cp311-manylinux_2_36_x86_64.whl"
    wheel.write_bytes(b"zip")
    context.stage_tests(fake_repo, "cpu", SPEC, wheel)
    root = context.context_dir(fake_repo, "cpu")
    tree = root / "tree"
    assert (tree / "tests" / "routing" / "test_routing.py").is_file()
    assert (tree / "tests" / "bench" / "test_bench.py").is_file()
    assert (tree / "tests" / "pytest.ini").is_file()
    assert not (tree / "tests" / "unit").exists()
    assert [p.name for p in (root / "dist").iterdir()] == [wheel.name]


def test_a_rebuilt_wheel_changes_the_test_images_key(fake_repo, tmp_path):
    """The same name with other bytes (a rebuild after a source change) is another test image."""
    wheel = tmp_path / "torch_fl-0.1.0+pt213cpu-cp311-cp311-manylinux_2_36_x86_64.whl"
    wheel.write_bytes(b"zip one")
    tests, first = context.stage_tests(fake_repo, "cpu", SPEC, wheel)
    assert context.stage_tests(fake_repo, "cpu", SPEC, wheel) == (tests, first)
    wheel.unlink()  # as a build writes its output: a new file under the old name
    wheel.write_bytes(b"zip two")
    again, second = context.stage_tests(fake_repo, "cpu", SPEC, wheel)
    assert again == tests and second != first
    # a staged wheelhouse is hashed by sizes: a wheel in it counts as any other file
    house = tmp_path / "house"
    house.mkdir()
    (house / "torch-2.13.0-cp311-cp311-linux_x86_64.whl").write_bytes(b"1")
    before = context.tree_digest(house, content=False)
    (house / "torch-2.13.0-cp311-cp311-linux_x86_64.whl").write_bytes(b"12")
    assert context.tree_digest(house, content=False) != before


def test_stage_tests_puts_the_tools_the_image_runs_beside_the_tests(fake_repo, tmp_path):
    """The harness and the node programs keep the checkout's layout (build_tools/ beside tests/), which they use to
    reach the suites' helpers; the rest of build_tools stays out of the test image."""
    wheel = tmp_path / "torch_fl-0.1.0+pt213cpu-cp311-cp311-manylinux_2_36_x86_64.whl"
    wheel.write_bytes(b"zip")
    before, _ = context.stage_tests(fake_repo, "cpu", SPEC, wheel)
    tree = context.context_dir(fake_repo, "cpu") / "tree"
    assert (tree / "build_tools" / "bench" / "harness" / "__main__.py").is_file()
    assert (tree / "build_tools" / "node" / "step_ops.py").is_file()
    assert not (tree / "build_tools" / "matrix.py").exists()
    (fake_repo / "build_tools" / "bench" / "harness" / "__main__.py").write_text("print('changed')\n")
    after, _ = context.stage_tests(fake_repo, "cpu", SPEC, wheel)
    assert after != before, "a change of the harness changes the test image's key"


def test_atomic_write_replaces_whole_files_and_cleans_up_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "out" / "bench.json"
    outputs.atomic_write_text(target, "old")
    assert target.read_text() == "old"

    def boom(src, dst):
        raise KeyboardInterrupt  # an interrupted run

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        outputs.atomic_write_text(target, "new")
    monkeypatch.undo()
    assert target.read_text() == "old"
    assert sorted(p.name for p in target.parent.iterdir()) == ["bench.json"]


def test_atomic_copy(tmp_path):
    src = tmp_path / "a.whl"
    src.write_bytes(b"x" * 10)
    dst = outputs.atomic_copy(src, tmp_path / "wheels" / "cpu" / "a.whl")
    assert dst.read_bytes() == b"x" * 10
    assert [p.name for p in dst.parent.iterdir()] == ["a.whl"]


def test_atomic_copy_links_or_keeps_the_metadata_for_staging(tmp_path):
    src = tmp_path / "tool.sh"
    src.write_text("echo")
    src.chmod(0o755)
    os.utime(src, ns=(1_000_000_000, 1_000_000_000))
    linked = outputs.atomic_copy(src, tmp_path / "ctx" / "linked.sh", link=True)
    copied = outputs.atomic_copy(src, tmp_path / "ctx" / "copied.sh", keep_metadata=True)
    assert linked.stat().st_ino == src.stat().st_ino  # a hard link: the torch wheel is never copied
    assert copied.stat().st_ino != src.stat().st_ino
    assert (copied.stat().st_mode & 0o777, copied.stat().st_mtime_ns) == (0o755, 1_000_000_000)
    assert sorted(p.name for p in linked.parent.iterdir()) == ["copied.sh", "linked.sh"]


def test_publish_dir_swaps_a_complete_directory_in(tmp_path):
    final = tmp_path / "reports" / "cpu"
    final.mkdir(parents=True)
    (final / "junit.xml").write_text("old")
    (final / "stale.txt").write_text("old")
    tmp = outputs.temp_dir_beside(final)
    assert tmp.parent == final.parent and tmp.name.startswith(".cpu.tmp-")
    (tmp / "junit.xml").write_text("new")
    outputs.publish_dir(tmp, final)
    assert sorted(p.name for p in final.iterdir()) == ["junit.xml"]
    assert (final / "junit.xml").read_text() == "new"
    assert sorted(p.name for p in final.parent.iterdir()) == ["cpu"]


def test_sweep_removes_leftovers_of_interrupted_runs(tmp_path):
    (tmp_path / ".cpu.tmp-abc").mkdir()
    (tmp_path / ".cpu.old-abc").mkdir()
    (tmp_path / ".x.whl.tmp-1").write_text("")
    (tmp_path / "cpu").mkdir()
    removed = outputs.sweep_temporaries(tmp_path)
    assert len(removed) == 3
    assert [p.name for p in tmp_path.iterdir()] == ["cpu"]


def test_git_ignored_files_are_not_build_inputs(fake_repo, tmp_path):
    subprocess.run(["git", "init", "-q", str(fake_repo)], check=True)
    (fake_repo / ".gitignore").write_text("/csrc/generated.h\n")
    (fake_repo / "csrc" / "generated.h").write_text("// local build product\n")
    staged = context.stage_build(fake_repo, toolchain(fake_repo), SPEC, [])
    assert (staged.root / "src/csrc/a.cpp").is_file()  # untracked but not ignored: a new source file counts
    assert not (staged.root / "src/csrc/generated.h").exists()
