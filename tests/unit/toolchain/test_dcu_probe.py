"""HIP compile check of torch-fl-dcu-probe (docker/dcu/probe/dcu_probe.cpp) with Debian's hipcc, and its diagnoses.

The probe is the torch-free HIP source of the DCU toolchain. Here it is compiled for real with the HIP compiler
(``HIP_PLATFORM=amd``, explicit ``--offload-arch``, warnings as errors) against Debian's HIP runtime headers, and
run on this machine, which has no DCU: every pitfall it diagnoses is staged (a missing or unreadable /dev/kfd,
hidden devices, no HIP runtime, a runtime that needs hyhal's libhydmi.so) and its one-line verdict and exit status
are checked. docker/dcu/probe/build_probe.sh, which builds it in the DTK builder image, is run here too.

Needs ``hipcc`` and ``libamdhip64-dev`` (Debian: ``apt-get install hipcc libamdhip64-dev``; .ci/run installs
them). Without them the tests skip, except under CI (CI=true), where that is a failure.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest
from buildtest_support import REPO

PROBE = REPO / "docker" / "dcu" / "probe"
SOURCE = PROBE / "dcu_probe.cpp"
ARCH = "gfx906"  # a target upstream clang knows (gfx926/928/936 are DTK-only); Hygon's Z100 is gfx906-class
HIP_ENV = {"HIP_PLATFORM": "amd"}  # never the nvcc path, even where a CUDA toolkit is installed


def _hipcc() -> str:
    exe = shutil.which("hipcc")
    if exe:
        return exe
    if os.environ.get("CI") == "true":
        pytest.fail(
            "hipcc is not installed: CI must run the HIP compile check (.ci/run: apt-get install hipcc libamdhip64-dev)"
        )
    pytest.skip("hipcc not installed (apt-get install hipcc libamdhip64-dev)")


@pytest.fixture(scope="module")
def probe_dir() -> Path:
    hipcc = _hipcc()
    d = Path(tempfile.mkdtemp(prefix="torch-fl-probe-"))
    os.chmod(d, 0o755)  # the permission test runs the probe as another user
    out = d / "torch-fl-dcu-probe"
    cmd = [
        hipcc,
        f"--offload-arch={ARCH}",
        "-std=c++17",
        "-O2",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-o",
        str(out),
        str(SOURCE),
        "-ldl",
    ]
    res = subprocess.run(cmd, env={**os.environ, **HIP_ENV}, capture_output=True, text=True, check=False)
    assert res.returncode == 0, f"HIP compile check failed: {' '.join(cmd)}\n{res.stdout}\n{res.stderr}"
    os.chmod(out, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def run(probe_dir: Path, *args: str, env: dict[str, str] | None = None, **kw) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.endswith("_VISIBLE_DEVICES")}
    environ.update(env or {})
    return subprocess.run(
        [str(probe_dir / "torch-fl-dcu-probe"), *args],
        env=environ,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        **kw,
    )


def fake_dev(tmp_path: Path, mode: int = 0o666) -> Path:
    dev = tmp_path / "dev"
    (dev / "dri").mkdir(parents=True)
    (dev / "kfd").write_text("")
    os.chmod(dev / "kfd", mode)
    return dev


def verdict(res: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in (res.stdout + res.stderr).splitlines() if ln.startswith("torch-fl-dcu-probe: ")]
    assert len(lines) == 1, res.stdout + res.stderr
    return lines[0]


def test_probe_compiles_with_hipcc_and_reports_its_hip_version(probe_dir):
    res = run(probe_dir, "--version")
    assert res.returncode == 0 and res.stdout.startswith("torch-fl-dcu-probe 1 (built with HIP ")
    assert "usage:" in run(probe_dir, "--help").stdout
    assert run(probe_dir, "--bogus").returncode == 1


def test_missing_kfd_says_to_pass_the_devices(probe_dir, tmp_path):
    res = run(probe_dir, "--dev-root", str(tmp_path / "nodev"))
    assert res.returncode == 2
    line = verdict(res)
    assert "kfd does not exist" in line and "--device=/dev/kfd --device=/dev/dri" in line


def test_no_device_visible_is_diagnosed_with_the_hyhal_note(probe_dir, tmp_path):
    res = run(probe_dir, "--dev-root", str(fake_dev(tmp_path)), "--hyhal-root", str(tmp_path / "nohyhal"))
    assert res.returncode == 5, res.stdout + res.stderr
    assert "HIP runtime: libamdhip64.so" in res.stdout
    assert f"-v {tmp_path / 'nohyhal'}:{tmp_path / 'nohyhal'}:ro" in res.stdout  # the hyhal mount to add
    assert "sees no device" in verdict(res) and "device_count() will be 0" in verdict(res)


def test_hidden_devices_name_the_variable(probe_dir, tmp_path):
    res = run(probe_dir, "--quiet", "--dev-root", str(fake_dev(tmp_path)), env={"HIP_VISIBLE_DEVICES": ""})
    assert res.returncode == 5
    assert res.stdout == ""  # --quiet: the verdict only (on stderr)
    assert "HIP_VISIBLE_DEVICES=''" in verdict(res) and "hides them all" in verdict(res)


def test_unloadable_runtime(probe_dir, tmp_path):
    res = run(probe_dir, "--dev-root", str(fake_dev(tmp_path)), "--library", "libtorch-fl-no-such-hip.so")
    assert res.returncode == 4
    assert "no HIP runtime library could be loaded" in verdict(res)
    assert "libtorch-fl-no-such-hip.so: cannot open shared object file" in res.stdout


def test_runtime_needing_hyhal_is_diagnosed_as_hyhal(probe_dir, tmp_path):
    """A HIP runtime whose libhydmi.so dependency is missing (DTK without /opt/hyhal mounted)."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang-15") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler to make the stand-in runtime")
    (tmp_path / "stub.c").write_text("int torch_fl_stub(void) { return 0; }\n")
    hydmi = tmp_path / "libhydmi.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(hydmi), str(tmp_path / "stub.c")], check=True)
    fake = tmp_path / "libfakehip.so"
    subprocess.run(
        [
            cc,
            "-shared",
            "-fPIC",
            "-o",
            str(fake),
            str(tmp_path / "stub.c"),
            "-Wl,--no-as-needed",
            f"-L{tmp_path}",
            "-lhydmi",
        ],
        check=True,
    )
    hydmi.unlink()
    hyhal = tmp_path / "hyhal"
    res = run(probe_dir, "--dev-root", str(fake_dev(tmp_path)), "--hyhal-root", str(hyhal), "--library", str(fake))
    assert res.returncode == 4
    assert "needs libhydmi.so (hyhal)" in verdict(res) and f"-v {hyhal}:{hyhal}:ro" in verdict(res)
    # present on disk but not on the loader path: say so
    (hyhal / "lib").mkdir(parents=True)
    (hyhal / "lib" / "libhydmi.so").write_text("")
    res = run(
        probe_dir, "--dev-root", str(fake_dev(tmp_path / "b")), "--hyhal-root", str(hyhal), "--library", str(fake)
    )
    assert "exists but is not on the loader path" in verdict(res)


def test_unreadable_kfd_names_its_group(probe_dir):
    top = Path(tempfile.mkdtemp(prefix="torch-fl-kfd-"))  # world-traversable, unlike pytest's tmp_path
    os.chmod(top, 0o755)
    dev = fake_dev(top, mode=0o660)
    kw: dict = {}
    if os.geteuid() == 0:  # root reads anything: run as nobody against a root-owned 0660 kfd
        kw = {"user": 65534, "group": 65534, "extra_groups": []}
    else:
        os.chmod(dev / "kfd", 0)
    try:
        res = run(probe_dir, "--dev-root", str(dev), **kw)
        assert res.returncode == 3, res.stdout + res.stderr
        gid = (dev / "kfd").stat().st_gid
        assert f"--group-add {gid}" in verdict(res) and "not readable and writable" in verdict(res)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_build_probe_script_builds_for_the_arch_list_of_build_env(tmp_path):
    hipcc = _hipcc()
    out = tmp_path / "bin" / "torch-fl-dcu-probe"
    env = {
        **os.environ,
        **HIP_ENV,
        "BUILD_ENV": f"CMAKE_BUILD_PARALLEL_LEVEL=2 PYTORCH_ROCM_ARCH={ARCH};gfx90a",
        "PATH": f"{Path(hipcc).parent}:{os.environ.get('PATH', '')}",
    }
    res = subprocess.run(
        ["bash", str(PROBE / "build_probe.sh"), str(SOURCE), str(out)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"--offload-arch={ARCH} --offload-arch=gfx90a" in res.stdout
    assert "torch-fl-dcu-probe 1 (built with HIP" in res.stdout
    assert out.stat().st_mode & stat.S_IXUSR
