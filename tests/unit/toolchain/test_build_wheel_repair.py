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
GOOD = "torch_fl-0.1.0+pt213cpu-cp311-cp311-manylinux_2_34_x86_64.manylinux_2_36_x86_64.whl"


def make_wheel(path: Path, members: list[str]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for m in members:
            zf.writestr(m, b"\x7fELF" if ".so" in m else "x")
    return path


def test_a_clean_wheel_has_no_problems(tmp_path):
    w = make_wheel(
        tmp_path / GOOD,
        ["torch_fl/__init__.py", "torch_fl/_C.cpython-311-x86_64-linux-gnu.so", "torch_fl/configs/backends_cpu.conf"],
    )
    info = wheelcheck.inspect(w)
    assert info.local_label == "pt213cpu"
    assert info.tag == "manylinux_2_34_x86_64.manylinux_2_36_x86_64"
    assert info.extension_modules == ("torch_fl/_C.cpython-311-x86_64-linux-gnu.so",)
    assert info.grafted == ()
    assert len(info.sha256) == 64
    assert wheelcheck.problems(info, variant="cpu", python_tag="cp311", excludes=CPU.auditwheel_exclude) == []


def test_grafted_torch_libraries_are_caught(tmp_path):
    w = make_wheel(
        tmp_path / GOOD,
        [
            "torch_fl/_C.cpython-311-x86_64-linux-gnu.so",
            "torch_fl.libs/libc10-1a2b3c4d.so",
            "torch_fl.libs/libgomp-a34b3233.so.1",
            "torch_fl.libs/libzstd-0badc0de.so.1.5",
        ],
    )
    info = wheelcheck.inspect(w)
    bad = wheelcheck.problems(info, variant="cpu", python_tag="cp311", excludes=CPU.auditwheel_exclude)
    assert len(bad) == 1
    assert "torch libraries were grafted" in bad[0]
    assert "libc10-1a2b3c4d.so" in bad[0] and "libgomp-a34b3233.so.1" in bad[0]
    assert "libzstd" not in bad[0]


def test_wrong_variant_python_or_platform(tmp_path):
    w = make_wheel(tmp_path / "torch_fl-0.1.0+pt211cu130-cp312-cp312-linux_x86_64.whl", ["torch_fl/__init__.py"])
    bad = " | ".join(wheelcheck.problems(wheelcheck.inspect(w), variant="cpu", python_tag="cp311", excludes=()))
    assert "variant label +pt<torch line>cpu" in bad
    assert "python tag cp312 is not cp311" in bad
    assert "not a manylinux tag" in bad
    assert "no extension module" in bad


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
    assert info.extension_modules, "no compiled module"
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
    env = {"CXX": "c++", "BUILD_ENV": "", "TORCH_FL_VARIANT": "cpu"}
    first = build.toolchain_key(env)
    assert first == build.toolchain_key(dict(env)), "the key must be stable for one toolchain"
    assert build.toolchain_key({**env, "TORCH_FL_VARIANT": "cu130"}) != first
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


PLATFORMS = "manylinux_2_34_x86_64.manylinux_2_36_x86_64"


def _built_wheel(path: Path, tags: list[str]) -> Path:
    """A repaired wheel before the split: one torch_fl._C per CPython beside the shared core."""
    from wheel.wheelfile import WheelFile

    with WheelFile(path, "w") as wf:
        wf.writestr("torch_fl/__init__.py", "")
        wf.writestr("torch_fl/libtorch_fl_core.so", b"\x7fELF core")
        for tag in tags:
            wf.writestr(f"torch_fl/_C.cpython-{tag}-x86_64-linux-gnu.so", f"\x7fELF {tag}".encode())
        dist_info = "torch_fl-0.1.0+pt213cpu.dist-info"
        wf.writestr(f"{dist_info}/METADATA", "Metadata-Version: 2.1\nName: torch-fl\nVersion: 0.1.0+pt213cpu\n")
        wf.writestr(
            f"{dist_info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n"
            "Tag: cp311-cp311-manylinux_2_34_x86_64\nTag: cp311-cp311-manylinux_2_36_x86_64\n\n",
        )
    return path


def test_one_build_is_split_into_one_wheel_per_python_with_only_its_module(tmp_path):
    from wheel.wheelfile import WheelFile

    split = load_script("split_wheel")
    dist = tmp_path / "dist"
    dist.mkdir()
    built = _built_wheel(dist / f"torch_fl-0.1.0+pt213cpu-cp311-cp311-{PLATFORMS}.whl", ["310", "311", "314"])
    wheels = split.per_python(built, ["3.10", "3.11", "3.14"], dist)
    assert sorted(w.name for w in wheels) == [
        f"torch_fl-0.1.0+pt213cpu-cp{t}-cp{t}-{PLATFORMS}.whl" for t in ("310", "311", "314")
    ]
    assert not built.exists() or built in wheels
    for wheel in wheels:
        tag = wheelcheck.inspect(wheel).python_tags[0][2:]
        with WheelFile(wheel) as wf:  # reading every member checks it against the RECORD
            names = wf.namelist()
            contents = {n: wf.read(n) for n in names}
        modules = [n for n in names if "/_C." in n]
        assert modules == [f"torch_fl/_C.cpython-{tag}-x86_64-linux-gnu.so"], wheel.name
        assert contents[modules[0]] == f"\x7fELF {tag}".encode()
        assert "torch_fl/libtorch_fl_core.so" in names
        wheel_meta = next(contents[n].decode() for n in names if n.endswith(".dist-info/WHEEL"))
        # auditwheel's two platform tags, each on a Tag line of its own
        assert wheel_meta.count("Tag: ") == 2 and f"Tag: cp{tag}-cp{tag}-manylinux_2_36_x86_64" in wheel_meta


def test_a_python_the_build_made_no_module_for_stops_the_split(tmp_path):
    split = load_script("split_wheel")
    built = _built_wheel(tmp_path / f"torch_fl-0.1.0+pt213cpu-cp311-cp311-{PLATFORMS}.whl", ["311"])
    with pytest.raises(SystemExit, match="no torch_fl._C for cp312"):
        split.per_python(built, ["3.11", "3.12"], tmp_path)
    assert built.is_file()  # nothing is consumed when the split cannot be made
