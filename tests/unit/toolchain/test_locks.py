"""The images' lock files (build_tools/locks.py): what each is made from, and the check that fails a stale one.

The first test runs the check on the real tree, so a requirement changed without `nox -s lock` fails CI here,
naming the package, before any image is built.
"""

from __future__ import annotations

import dataclasses
import sys
import textwrap
from pathlib import Path

import pytest

from build_tools import locks, matrix

REPO = Path(__file__).resolve().parents[3]
MATRIX = matrix.load(REPO / matrix.DEFAULT_PATH)


def test_every_lock_of_the_tree_agrees_with_its_requirements():
    every = locks.all_locks(MATRIX, REPO)
    assert {lock.row for lock in every} >= {"cpu", "cuda", "dcu"}
    problems = [p for lock in every for p in locks.check(lock, REPO)]
    assert problems == []


def test_each_row_locks_builder_and_test_and_install_unless_torch_comes_with_the_image():
    by_name = {lock.name: lock for lock in locks.all_locks(MATRIX, REPO)}
    assert {"cpu-builder", "cpu-test", "cpu-install", "cuda-builder", "cuda-test", "cuda-install"} <= set(by_name)
    assert "dcu-install" not in by_name  # the DTK image brings torch
    assert not any(r.startswith("torch") for r, _ in by_name["dcu-builder"].resolved)
    # the CUDA builder resolves torch together with the toolkit wheels of its CUDA release
    assert any(r.startswith("cuda-toolkit[") and "nvvm" in r for r, _ in by_name["cuda-builder"].resolved)


def _row(**torch) -> matrix.Toolchain:
    cpu = MATRIX.toolchain("cpu")
    return dataclasses.replace(cpu, name="demo", torch=dataclasses.replace(cpu.torch, **torch))


def test_a_torch_builder_without_dependencies_pins_torch_alone():
    builder = {lock.stage: lock for lock in locks.locks_of(_row(builder_no_deps=True), REPO, "m.toml", ("routing",))}
    assert [r for r, _ in builder["builder"].pinned] == [MATRIX.toolchain("cpu").torch.requirement]
    assert not any(r.startswith("torch") for r, _ in builder["builder"].resolved)
    # no model suite: torchvision (which pins torch exactly) stays out of the test image
    assert builder["test"].pinned == ()
    with_models = {lock.stage: lock for lock in locks.locks_of(_row(), REPO, "m.toml", ("models",))}
    assert any(r.startswith("torchvision") for r, _ in with_models["test"].pinned)


@pytest.fixture
def tiny(tmp_path: Path) -> tuple[locks.Lock, Path]:
    (tmp_path / "requirements-build.txt").write_text("pytest==9.0.3  # the runner\npackaging>=24\n")
    lock = locks.Lock(
        "demo",
        "builder",
        "3.11",
        Path("demo-builder-py311.txt"),
        tuple(locks.requirement_lines(tmp_path / "requirements-build.txt", tmp_path)),
        (),
    )
    body = "pytest==9.0.3 \\\n    --hash=sha256:aa\npackaging==26.4 \\\n    --hash=sha256:bb\n"
    (tmp_path / lock.path).write_text(locks.render(lock, body, ""))
    return lock, tmp_path


def test_a_fresh_lock_passes(tiny):
    lock, repo = tiny
    assert locks.check(lock, repo) == []


def test_a_requirement_the_lock_does_not_satisfy_names_the_package_and_both_versions(tiny):
    lock, repo = tiny
    (repo / "requirements-build.txt").write_text("pytest==9.0.4\npackaging>=24\n")
    newer = dataclasses.replace(lock, resolved=tuple(locks.requirement_lines(repo / "requirements-build.txt", repo)))
    (problem,) = locks.check(newer, repo)
    assert "requirements-build.txt:1 asks for pytest==9.0.4" in problem
    assert "the lock has pytest 9.0.3" in problem and "nox -s lock" in problem


def test_a_requirement_missing_from_the_lock_is_named(tiny):
    lock, repo = tiny
    added = dataclasses.replace(lock, resolved=(*lock.resolved, ("rich==15.0.0", "requirements-build.txt:3")))
    (problem,) = locks.check(added, repo)
    assert "asks for rich, which the lock lacks" in problem


def test_a_removed_requirement_shows_as_changed_inputs(tiny):
    lock, repo = tiny
    fewer = dataclasses.replace(lock, resolved=lock.resolved[:1])
    (problem,) = locks.check(fewer, repo)
    assert "what it is made from changed" in problem


def test_a_pin_without_a_hash_and_a_missing_lock_are_refused(tiny):
    lock, repo = tiny
    text = (repo / lock.path).read_text().replace("    --hash=sha256:bb\n", "")
    (repo / lock.path).write_text(text.replace("packaging==26.4 \\\n", "packaging==26.4\n"))
    assert any("no hash for packaging" in p for p in locks.check(lock, repo))
    (repo / lock.path).unlink()
    assert locks.check(lock, repo) == [f"{lock.path} is missing: run `nox -s lock` and commit the result"]


def test_read_pins_takes_extras_and_local_versions():
    text = textwrap.dedent(
        """\
        # header
        torch==2.13.0+cpu \\
            --hash=sha256:11
        cuda-toolkit[nvcc]==13.0.2 \\
            --hash=sha256:22 \\
            --hash=sha256:33
        """
    )
    assert locks.read_pins(text) == {"torch": ("2.13.0+cpu", 1), "cuda-toolkit": ("13.0.2", 2)}


def test_test_images_start_from_the_bare_node_image_so_they_share_its_torch_layers():
    dockerfile = (REPO / "docker/Dockerfile").read_text()
    assert "FROM node AS test-deps" in dockerfile and "FROM node AS install" in dockerfile
    assert {t.dockerfile for t in MATRIX.toolchains.values() if not t.torch.from_image} == {"docker/Dockerfile"}
    # and the test lock keeps every pin of the install lock, so its install leaves that torch as it is
    for lock in locks.all_locks(MATRIX, REPO):
        if lock.stage == "install" and lock.python == MATRIX.toolchain(lock.row).python:
            test = REPO / lock.path.with_name(lock.path.name.replace("-install-", "-test-"))
            installed = {n: v for n, (v, _) in locks.read_pins((REPO / lock.path).read_text()).items()}
            tested = {n: v for n, (v, _) in locks.read_pins(test.read_text()).items()}
            assert {n: tested.get(n) for n in installed} == installed, lock.path


def test_a_shared_deps_group_shares_what_its_install_locks_pin_alike():
    das = [t for t in MATRIX.toolchains.values() if t.torch.shared_deps == "das"]
    assert len(das) == 2
    texts = {locks.shared_install(MATRIX, t, REPO) for t in das}
    assert len(texts) == 1, "every row of a group stages the same text, so their images share its layer"
    shared = locks.read_pins(texts.pop())
    # every Python's install lock of every row: a node of any of them installs the shared file first
    pythons = {t.name: sorted({t.python, *t.checked_pythons, *t.served_pythons}) for t in das}
    assert all("3.10" in v and "3.14" in v for v in pythons.values())
    paths = [locks.lock_path(t, "install", py) for t in das for py in pythons[t.name]]
    pins = [locks.read_pins((REPO / path).read_text()) for path in paths]
    assert shared == {n: p for n, p in pins[0].items() if all(other.get(n) == p for other in pins[1:])}
    assert "torch" not in shared and "nvidia-cudnn-cu12" in shared  # the lines' torches differ, their CUDA not
    # networkx 3.6 needs Python 3.11: the 3.10 locks pin an older one, so the shared file leaves it to each image
    assert "networkx" not in shared
    outside = locks.shared_install(MATRIX, MATRIX.toolchain("cpu"), REPO)
    assert locks.read_pins(outside) == {}  # a row outside a group pins nothing there (steps lock skips it)


def test_a_relock_hands_uv_the_current_lock_as_its_preferences(tiny, tmp_path_factory):
    # a stand-in for uv: it copies the output file it is handed (uv's preferences) aside, then writes one pin there
    work = tmp_path_factory.mktemp("uv")
    fake = work / "uv.py"
    fake.write_text(
        textwrap.dedent(
            f"""
            import shutil, sys
            out = sys.argv[sys.argv.index("--output-file") + 1]
            shutil.copy(out, {str(work / "seen.txt")!r})
            open(out, "w").write("pytest==9.0.3 \\\\\\n    --hash=sha256:cc\\n")
            """
        )
    )
    lock, repo = tiny
    previous = (repo / lock.path).read_text()
    assert locks.update([lock], repo, [sys.executable, str(fake)], []) == [lock.path]
    assert (work / "seen.txt").read_text() == previous
    assert "--hash=sha256:cc" in (repo / lock.path).read_text()
