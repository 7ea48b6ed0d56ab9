"""The DCU toolchain as data: the [toolchains.dcu] row, docker/dcu/'s Dockerfile and the scripts it runs in the
DTK image (test_dcu_host.py plans it on a host, in dry runs).

No docker, no DTK image, no DCU: what a DCU node adds (the DTK image, /dev/kfd) is exactly what these tests cannot
have; docs/dcu.md says what a DCU owner runs to finish the verification.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import os
import re
import shutil
import stat
import subprocess
import sys

import pytest
from buildtest_support import REPO

from build_tools import dockercli, matrix

DCU = REPO / "docker" / "dcu"
DOCKERFILE = DCU / "Dockerfile"
# DTK 26.04 images are published on the community's Harbor registry; older lines (25.04) on image.sourcefind.cn:5000
DTK_IMAGE = re.compile(
    r"(harbor\.sourcefind\.cn:5443|image\.sourcefind\.cn:5000)/dcu/admin/base/pytorch:[\d.]+-ubuntu[\d.]+-dtk[\d.]+-py3\.10"
)
# sonames of a DTK image that the repaired wheel must never carry (the user's DTK and torch provide them)
DTK_SONAMES = [
    "libgalaxyhip.so.5",
    "libamdhip64.so.6",
    "libhiprtc.so.6",
    "libamd_comgr.so.2",
    "libhsa-runtime64.so.1",
    "libhsakmt.so.1",
    "librccl.so.1",
    "libMIOpen.so.1",
    "librocblas.so.4",
    "libhipblas.so.2",
    "libhipblaslt.so.0",
    "librocsolver.so.0",
    "libhipsparse.so.1",
    "librocfft.so.0",
    "libhiprand.so.1",
    "libroctracer64.so.4",
    "libroctx64.so.4",
    "librocm_smi64.so.6",
    "libhydmi.so",
    "libdrm_amdgpu.so.1",
    "libnuma.so.1",
    "libtorch_hip.so",
    "libc10_hip.so",
    "libtorch.so",
    "libtorch_cpu.so",
    "libc10.so",
    "libgomp.so.1",
]
CLIENT = dockercli.DockerClient("docker", "20.10.24", "builtin")


def load(name: str):
    """A docker/dcu/<name>.py module (it runs inside the DTK image, not as a package)."""
    key = f"torch_fl_dcu_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, DCU / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


@pytest.fixture(scope="module")
def dcu(m) -> matrix.Toolchain:
    return m.toolchain("dcu")


# ------------------------------------------------------------------------------------------------ the row
def test_row_builds_and_tests_in_one_dtk_image_with_its_own_torch(dcu):
    assert DTK_IMAGE.fullmatch(dcu.builder_image), dcu.builder_image
    assert dcu.test_image == dcu.builder_image  # the same runtime; the test stage removes the compilers
    assert dcu.torch.from_image and not dcu.torch.index_url


def test_variant_is_read_from_the_image_and_wheels_go_to_wheels_dcu(dcu):
    assert dcu.variant == "dtk*" and dcu.variant_from_image
    assert dcu.wheel_dir == "dcu"
    assert not re.search(r"dtk\d", dcu.variant), "the DTK version is never typed into the matrix"


def test_excludes_cover_torch_and_the_dtk_runtime(dcu):
    for soname in DTK_SONAMES:
        assert any(fnmatch.fnmatch(soname, g) for g in dcu.auditwheel_exclude), soname
    assert not any(fnmatch.fnmatch("libstdc++.so.6", g) for g in dcu.auditwheel_exclude)


def test_matrix_rejects_bad_variant_families_and_mounts(tmp_path):
    base = (REPO / "configs" / "toolchains.toml").read_text()
    for old, new, msg in [
        ('variant = "dtk*"', 'variant = "dtk*2"', "toolchains.dcu.variant"),
        ('["/opt/hyhal:/opt/hyhal:ro"]', '["opt/hyhal"]', "optional_mounts"),
        ('["/opt/hyhal:/opt/hyhal:ro"]', '["/opt/hyhal:/opt/hyhal:rw"]', "optional_mounts"),
    ]:
        p = tmp_path / "t.toml"
        assert old in base
        p.write_text(base.replace(old, new))
        with pytest.raises(matrix.MatrixError, match=msg):
            matrix.load(p)


# ------------------------------------------------------------------------------------------ the Dockerfile
def stages(text: str) -> dict[str, str]:
    return {name: image for image, name in re.findall(r"^FROM\s+(\S+)\s+AS\s+(\S+)\s*$", text, re.M | re.I)}


def test_dockerfile_contract(dcu):
    text = DOCKERFILE.read_text()
    assert stages(text) == {
        "builder": "${BUILDER_IMAGE}",
        "build": "builder",
        "wheel": "scratch",
        "test-deps": "${TEST_IMAGE}",
        "test": "test-deps",
    }
    assert not re.search(r"^#\s*syntax=", text, re.M)
    for arg in (
        "PYTHON_VERSION",
        "VARIANT",
        "BUILDER_LOCK",
        "TEST_LOCK",
        "SOURCE_DATE_EPOCH",
        "BUILD_ENV",
        "AUDITWHEEL_EXCLUDE",
    ):
        assert re.search(rf"^ARG {arg}\b", text, re.M), arg
    # every RUN of a DTK stage goes through with-dtk (env.sh, without set -u); the test image's entrypoint too
    for run in re.findall(r"^RUN (.*)$", text, re.M):
        assert run.startswith("/opt/torch-fl/bin/with-dtk") or run.startswith("--mount") or "python3 -m pip" in run
    assert 'ENTRYPOINT ["/opt/torch-fl/bin/with-dtk"]' in text
    assert "strip_compilers.sh" in text.split("AS test", 1)[1]
    assert "torch-fl-dcu-probe" in text.split("AS test", 1)[1]
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    assert "set -u" not in code and "set -eu" not in code


def test_vendor_dir_holds_what_the_dockerfile_copies():
    text = DOCKERFILE.read_text()
    for name in re.findall(r"vendor/([\w./-]+)", text):
        assert (DCU / name).exists(), name
    for script in ("with-dtk.sh", "probe/build_probe.sh", "strip_compilers.sh"):
        assert (DCU / script).stat().st_mode & stat.S_IXUSR, f"{script} is executable"


# --------------------------------------------------------------------------------------- image-side scripts
def test_dtk_variant_from_version_file_torch_or_override(tmp_path):
    info = load("dtk_info")
    (tmp_path / ".info").mkdir()
    (tmp_path / ".info" / "version").write_text("25.04.1\n")
    assert info.dtk_version(tmp_path) == "25.04.1"
    assert info.dtk_version(tmp_path / "none") is None
    assert info.label_from_dtk("25.04.1") == "dtk2504" and info.label_from_dtk("26.4") == "dtk2604"
    assert info.label_from_torch("2.4.1+das.opt1.dtk2504") == "dtk2504"
    assert info.label_from_torch("2.10.0+cpu") is None
    warnings: list[str] = []
    rv = info.resolve_variant
    assert rv("dtk*", dtk="25.04.1", torch_version="2.4.1+das.opt1.dtk2504", warn=warnings.append) == (
        "dtk2504",
        "DTK version 25.04.1",
    )
    assert rv("dtk*", dtk=None, torch_version="2.4.1+das.opt1.dtk2504")[0] == "dtk2504"
    assert rv("dtk*", dtk="26.04", torch_version="2.4.1+das.opt1.dtk2504", warn=warnings.append)[0] == "dtk2604"
    assert warnings and "set TORCH_FL_VARIANT" in warnings[0]
    assert rv("dtk*", override="dtk2610", dtk="26.04", torch_version=None) == ("dtk2610", "TORCH_FL_VARIANT")
    with pytest.raises(info.DtkError, match="does not match"):
        rv("dtk*", override="cpu", dtk=None, torch_version=None)
    with pytest.raises(info.DtkError, match="cannot read the DTK version"):
        rv("dtk*", dtk=None, torch_version="2.10.0+cpu")


def test_dtk_variant_cli(tmp_path):
    (tmp_path / ".info").mkdir()
    (tmp_path / ".info" / "version").write_text("25.04\n")
    environ = {**os.environ, "ROCM_PATH": str(tmp_path), "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    environ.pop("TORCH_FL_VARIANT", None)
    cmd = [sys.executable, str(DCU / "dtk_info.py"), "variant", "--family", "dtk*"]
    res = subprocess.run(cmd, env=environ, capture_output=True, text=True, check=False)
    assert res.returncode == 0 and res.stdout == "dtk2504\n", res.stderr
    res = subprocess.run(cmd, env={**environ, "TORCH_FL_VARIANT": "rocm63"}, capture_output=True, text=True)
    assert res.returncode == 1 and "does not match the matrix's variant 'dtk*'" in res.stderr
    via_build_env = {**environ, "BUILD_ENV": "CMAKE_BUILD_PARALLEL_LEVEL=2 TORCH_FL_VARIANT=dtk2610"}
    res = subprocess.run(cmd, env=via_build_env, capture_output=True, text=True)
    assert res.returncode == 0 and res.stdout == "dtk2610\n", res.stderr


def test_with_dtk_sources_an_env_sh_that_breaks_under_set_u(tmp_path):
    env_sh = tmp_path / "env.sh"
    # like DTK's: reads variables that may be unset
    env_sh.write_text(
        "export ROCM_PATH=/opt/dtk\nexport LD_LIBRARY_PATH=/opt/dtk/lib:$LD_LIBRARY_PATH\n"
        'export PATH=/opt/dtk/bin:$PATH\n[ -n "$DTK_UNSET_THING" ] || true\n'
    )
    environ = {"PATH": os.environ["PATH"], "TORCH_FL_DTK_ENV": str(env_sh)}
    script = DCU / "with-dtk.sh"
    res = subprocess.run(
        ["bash", "-u", str(script), "bash", "-c", 'echo "$ROCM_PATH|$LD_LIBRARY_PATH"'],
        env=environ,
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("/opt/dtk|/opt/dtk/lib:")
    missing = subprocess.run(
        ["bash", str(script), "true"],
        env={**environ, "TORCH_FL_DTK_ENV": "/nope"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert missing.returncode == 1 and "not a DTK image" in missing.stderr


def test_strip_compilers_empties_path_of_compiler_drivers(tmp_path):
    bins = tmp_path / "bin"
    dtk = tmp_path / "dtk" / "llvm" / "bin"
    bins.mkdir()
    dtk.mkdir(parents=True)
    for d, names in ((bins, ["gcc", "g++-12", "cc", "python3", "ld"]), (dtk, ["clang", "clang-17", "hipcc", "lld"])):
        for n in names:
            (d / n).write_text("#!/bin/sh\n")
            (d / n).chmod(0o755)
    # PATH holds only the fake directories and `rm`: the script must never see (and delete) this host's compilers
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "rm").symlink_to(shutil.which("rm"))
    res = subprocess.run(
        [shutil.which("bash"), str(DCU / "strip_compilers.sh")],
        env={"PATH": f"{tools}:{bins}:{dtk}"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in bins.iterdir()) == ["ld", "python3"]
    assert sorted(p.name for p in dtk.iterdir()) == ["lld"]
