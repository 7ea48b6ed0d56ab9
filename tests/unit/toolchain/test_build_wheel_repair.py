"""Repaired wheels: tags, variant label, nothing from torch grafted (synthetic wheels and the real one)."""

from __future__ import annotations

import os
import sys
import time
import zipfile
from pathlib import Path

import pytest
from buildtest_support import REPO, load_script

from build_tools import matrix, wheelcheck

CPU = matrix.load(REPO / "configs" / "toolchains.toml").toolchain("cpu")
GOOD = "torch_fl-0.1.0+pt213cpu-cp310-abi3-manylinux_2_34_x86_64.manylinux_2_36_x86_64.whl"
CORE = "torch_fl/libtorch_fl_core.so"
PLATFORMS = "manylinux_2_34_x86_64.manylinux_2_36_x86_64"


def make_wheel(path: Path, members: list[str]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for m in members:
            zf.writestr(m, b"\x7fELF" if ".so" in m else "x")
    return path


def test_a_clean_wheel_has_no_problems(tmp_path):
    w = make_wheel(tmp_path / GOOD, ["torch_fl/__init__.py", CORE, "torch_fl/configs/backends_cpu.conf"])
    info = wheelcheck.inspect(w)
    assert info.local_label == "pt213cpu"
    assert info.tag == "manylinux_2_34_x86_64.manylinux_2_36_x86_64"
    assert info.interpreter_tag == "cp310-abi3"
    assert info.extension_modules == (CORE,) and info.cpython_modules == ()
    assert info.grafted == ()
    assert len(info.sha256) == 64
    assert wheelcheck.problems(info, variant="cpu", wheel_tag="cp310-abi3", excludes=CPU.auditwheel_exclude) == []


def test_grafted_torch_libraries_are_caught(tmp_path):
    w = make_wheel(
        tmp_path / GOOD,
        [
            CORE,
            "torch_fl.libs/libc10-1a2b3c4d.so",
            "torch_fl.libs/libgomp-a34b3233.so.1",
            "torch_fl.libs/libzstd-0badc0de.so.1.5",
        ],
    )
    info = wheelcheck.inspect(w)
    bad = wheelcheck.problems(info, variant="cpu", wheel_tag="cp310-abi3", excludes=CPU.auditwheel_exclude)
    assert len(bad) == 1
    assert "torch libraries were grafted" in bad[0]
    assert "libc10-1a2b3c4d.so" in bad[0] and "libgomp-a34b3233.so.1" in bad[0]
    assert "libzstd" not in bad[0]


def test_wrong_variant_python_or_platform(tmp_path):
    w = make_wheel(tmp_path / "torch_fl-0.1.0+pt211cu130-cp312-cp312-linux_x86_64.whl", ["torch_fl/__init__.py"])
    bad = " | ".join(wheelcheck.problems(wheelcheck.inspect(w), variant="cpu", wheel_tag="cp310-abi3", excludes=()))
    assert "variant label +pt<torch line>cpu" in bad
    assert "tagged cp312-cp312, not cp310-abi3" in bad
    assert "not a manylinux tag" in bad
    assert f"no {CORE} inside" in bad


def test_an_abi3_wheel_of_another_oldest_python_or_with_a_module_of_one_cpython_is_refused(tmp_path):
    """The row's one wheel serves each of its Pythons: its tag names the oldest, and nothing in it is bound to one."""
    w = make_wheel(tmp_path / GOOD.replace("cp310-abi3", "cp311-abi3"), [CORE])
    assert wheelcheck.problems(wheelcheck.inspect(w), variant="cpu", wheel_tag="cp310-abi3", excludes=()) == [
        "tagged cp311-abi3, not cp310-abi3 (scikit-build-core's wheel.py-api sets it)"
    ]
    module = "torch_fl/_C.cpython-310-x86_64-linux-gnu.so"
    w = make_wheel(tmp_path / GOOD, [CORE, module])
    assert wheelcheck.inspect(w).cpython_modules == (module,)
    (bad,) = wheelcheck.problems(wheelcheck.inspect(w), variant="cpu", wheel_tag="cp310-abi3", excludes=())
    assert bad.startswith(module) and "one CPython's ABI" in bad


def test_strip_hash():
    assert wheelcheck.strip_hash("libgomp-a34b3233.so.1") == "libgomp.so.1"
    assert wheelcheck.strip_hash("libtorch_cpu-0123abcd.so") == "libtorch_cpu.so"


def real_wheels() -> list[Path]:
    return sorted((REPO / "wheels").glob("*/torch_fl-*.whl"))


def test_ci_checks_a_real_repaired_wheel():
    # CI runs test-cpu before the host tests, so the wheel below must be there
    if os.environ.get("CI") == "true":
        assert real_wheels(), "CI=true but no repaired wheel under wheels/: run `nox -s test-cpu` before `nox -s tests`"


@pytest.mark.skipif(not real_wheels(), reason="no repaired wheel under wheels/ (run `nox -s build-cpu`)")
@pytest.mark.parametrize("wheel", real_wheels(), ids=lambda p: p.name)
def test_the_repaired_wheel_grafts_nothing_from_torch(wheel):
    info = wheelcheck.inspect(wheel)
    assert wheelcheck.matching(info.grafted, wheelcheck.TORCH_LIBS) == []
    assert all(t.startswith("manylinux_") for t in info.platform_tags), info.tag
    assert wheelcheck.is_abi3(wheel.name), f"{info.interpreter_tag}: not the Python-agnostic cp3X-abi3 wheel"
    assert wheelcheck.CORE_LIBRARY in info.extension_modules and not info.cpython_modules, info.extension_modules
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        metadata = next(zf.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    assert not any(n.startswith("torch/") for n in names)
    assert "Requires-Dist: torch" in metadata


def test_repair_script_computes_the_tag_from_glibc():
    repair = load_script("repair_wheel")
    assert repair.manylinux_tag("glibc 2.36", "x86_64") == "manylinux_2_36_x86_64"
    assert repair.manylinux_tag("glibc 2.28", "aarch64") == "manylinux_2_28_aarch64"
    with pytest.raises(SystemExit, match="cannot read the glibc version"):
        repair.manylinux_tag("musl", "x86_64")


def test_build_script_parses_build_env():
    build = load_script("build_wheel")
    assert build.parse_build_env("A=1 TORCH_CUDA_ARCH_LIST=8.0;9.0") == {"A": "1", "TORCH_CUDA_ARCH_LIST": "8.0;9.0"}
    assert build.parse_build_env("") == {}
    with pytest.raises(SystemExit, match="not KEY=VALUE"):
        build.parse_build_env("oops")


def test_wheel_names_are_read_by_packaging(tmp_path):
    # a build tag and a compressed tag set are valid names; the label comes from the version
    w = make_wheel(tmp_path / "torch_fl-0.1.0+pt213cpu-1-cp311-cp311-manylinux_2_36_x86_64.whl", [])
    assert wheelcheck.inspect(w).local_label == "pt213cpu"
    assert wheelcheck.label_matches("pt213dtk2604", "dtk*") and not wheelcheck.label_matches("pt213cpu", "dtk*")
    with pytest.raises(wheelcheck.WheelError, match="not a wheel file name"):
        wheelcheck.inspect(make_wheel(tmp_path / "torch_fl-0.1.0.whl", []))


def test_build_directories_are_keyed_by_the_torch_install(monkeypatch):
    build = load_script("build_wheel")
    records = {"record": "torch/include/c10/core/impl/PyObjectSlot.h,sha256=aaa,100\n"}

    class Dist:
        def read_text(self, name):
            assert name == "RECORD"
            return records["record"]

    monkeypatch.setattr(build.importlib.metadata, "distribution", lambda name: Dist())
    env = {"CXX": "c++", "BUILD_ENV": "", "TORCH_FL_VARIANT": "cpu", "WHEEL_PY_API": "cp310"}
    first = build.toolchain_key(env)
    assert first == build.toolchain_key(dict(env)), "the key must be stable for one toolchain"
    assert build.toolchain_key({**env, "TORCH_FL_VARIANT": "cu130"}) != first
    assert build.toolchain_key({**env, "WHEEL_PY_API": "cp311"}) != first
    records["record"] = "torch/include/c10/core/impl/PyObjectSlot.h,sha256=bbb,120\n"
    assert build.toolchain_key(env) != first, "another torch install must get another build directory"


def test_unchanged_sources_keep_the_mtime_of_the_last_build_and_changed_ones_recompile(tmp_path):
    build = load_script("build_wheel")
    src, build_dir = tmp_path / "src", tmp_path / "cache" / "key"
    (src / "csrc").mkdir(parents=True)
    (src / "csrc" / "a.cpp").write_text("int a;\n")
    (src / "csrc" / "b.h").write_text("#pragma once\n")
    assert build.settle_mtimes(src, build_dir) == (0, 2)  # an empty build directory: everything is new
    first = {p.name: p.stat().st_mtime_ns for p in (src / "csrc").iterdir()}

    def fresh_clone() -> None:  # a checkout gives every file a new mtime, later than any object of the last build
        later = max(first.values()) + 10**12
        for f in (src / "csrc").iterdir():
            os.utime(f, ns=(later, later))

    fresh_clone()
    assert build.settle_mtimes(src, build_dir) == (2, 0)
    assert {p.name: p.stat().st_mtime_ns for p in (src / "csrc").iterdir()} == first

    fresh_clone()
    (src / "csrc" / "b.h").write_text("#pragma once\nint b;\n")
    started = time.time_ns()
    assert build.settle_mtimes(src, build_dir) == (1, 1)
    assert (src / "csrc" / "a.cpp").stat().st_mtime_ns == first["a.cpp"]
    assert (src / "csrc" / "b.h").stat().st_mtime_ns >= started  # newer than every object: ninja rebuilds
    # that build may have compiled objects from the edited header before it failed: reverting the edit recompiles
    (src / "csrc" / "b.h").write_text("#pragma once\n")
    reverted = time.time_ns()
    assert build.settle_mtimes(src, build_dir) == (1, 1)
    assert (src / "csrc" / "b.h").stat().st_mtime_ns >= reverted


def _host_torch_lib() -> Path | None:
    try:
        import torch
    except ImportError:
        return None
    return Path(torch.__file__).parent / "lib"


def _wheels_of_host_torch() -> list[Path]:
    lib = _host_torch_lib()
    if lib is None:
        return []
    import torch

    line = "pt" + "".join(f"{int(p):02d}" if i else p for i, p in enumerate(torch.__version__.split(".")[:2]))
    return [w for w in real_wheels() if f"+{line}" in w.name]


@pytest.mark.skipif(not _wheels_of_host_torch(), reason="no repaired wheel for this host's torch line under wheels/")
@pytest.mark.parametrize("wheel", _wheels_of_host_torch(), ids=lambda p: p.name)
def test_the_symbol_check_accepts_a_wheel_of_its_torch_and_refuses_a_foreign_torch(wheel, tmp_path, capsys):
    repair = load_script("repair_wheel")
    repair.check_torch_symbols(wheel, str(_host_torch_lib()))
    assert "is exported by this image's torch" in capsys.readouterr().out
    # a torch/lib whose libc10.so exports nothing of torch's: every torch symbol is reported missing
    (tmp_path / "libc10.so").write_bytes(Path(sys.executable).resolve().read_bytes())
    with pytest.raises(SystemExit, match="compiled against another torch"):
        repair.check_torch_symbols(wheel, str(tmp_path))


def test_the_build_refuses_a_wheel_that_is_not_the_rows_abi3_one():
    build = load_script("build_wheel")
    assert build.abi3_problem("torch_fl-0.1.0+pt213cpu-cp310-abi3-linux_x86_64.whl", "cp310") is None
    assert build.abi3_problem("torch_fl-0.1.0+pt213cpu-cp310-abi3-linux_x86_64.whl", "") is None
    # scikit-build-core keeps the interpreter's own tag when wheel.py-api names a newer CPython than the builder's
    kept = build.abi3_problem("torch_fl-0.1.0+pt215cpu-cp311-cp311-linux_x86_64.whl", "cp312")
    assert kept is not None and "tagged cp311-cp311, not cp312-abi3" in kept and "WHEEL_PY_API" in kept
    assert "not cp310-abi3" in build.abi3_problem("torch_fl-0.1.0+pt213cpu-cp311-abi3-linux_x86_64.whl", "cp310")
    assert "not cp3X-abi3" in build.abi3_problem("torch_fl-0.1.0+pt213cpu-cp311-cp311-linux_x86_64.whl", "")


def test_the_build_passes_the_rows_py_api_to_scikit_build_core(tmp_path, monkeypatch):
    build = load_script("build_wheel")
    ran = []

    def fake_pip(cmd, env):
        ran.append(cmd)
        make_wheel(Path(cmd[cmd.index("-w") + 1]) / "torch_fl-0.1.0+pt213cpu-cp310-abi3-linux_x86_64.whl", [])
        return 0

    monkeypatch.setattr(build.subprocess, "call", fake_pip)
    for name in ("BUILD_ENV", "VARIANT", "SKBUILD_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WHEEL_PY_API", "cp310")
    assert build.main([str(tmp_path / "src"), str(tmp_path / "dist")]) == 0
    assert "--config-settings=wheel.py-api=cp310" in ran[0]
    monkeypatch.setenv("WHEEL_PY_API", "cp311")  # the same wheel is now another row's wrong one
    assert build.main([str(tmp_path / "src"), str(tmp_path / "dist")]) == 1
    monkeypatch.setenv("WHEEL_PY_API", "3.11")
    assert build.main([str(tmp_path / "src"), str(tmp_path / "dist")]) == 2


def test_the_repair_keeps_the_python_and_abi_tags_that_the_build_set(tmp_path, monkeypatch):
    repair = load_script("repair_wheel")
    built = make_wheel(tmp_path / "torch_fl-0.1.0+pt213cpu-cp310-abi3-linux_x86_64.whl", [CORE])
    assert repair.interpreter_tags(built.name) == {"cp310-abi3"}
    made: list[str] = []

    def fake_auditwheel(cmd, env):  # `auditwheel repair -w OUT` writes the wheel it names made[-1]
        if cmd[3] == "repair":
            make_wheel(Path(cmd[cmd.index("-w") + 1]) / made[-1], [CORE])
        return ""

    monkeypatch.setattr(repair, "run", fake_auditwheel)
    monkeypatch.setattr(repair, "check_torch_symbols", lambda wheel, lib: None)
    made.append(f"torch_fl-0.1.0+pt213cpu-cp310-abi3-{PLATFORMS}.whl")
    out = tmp_path / "kept"
    out.mkdir()
    assert repair.repair(built, out, [], "manylinux_2_36_x86_64", "/lib", {})[0].name == made[-1]
    made.append(f"torch_fl-0.1.0+pt213cpu-cp310-cp310-{PLATFORMS}.whl")
    out = tmp_path / "retagged"
    out.mkdir()
    with pytest.raises(SystemExit, match="the Python and ABI tags must stay"):
        repair.repair(built, out, [], "manylinux_2_36_x86_64", "/lib", {})
