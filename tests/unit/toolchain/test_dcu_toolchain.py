"""The DCU toolchain as data and as a plan: the [toolchains.dcu] row, docker/dcu/, and `nox -s build-dcu -- --dry-run`.

No docker, no DTK image, no DCU: dry runs are planned in a throw-away repository with the docker daemon faked
(reachable, no images) and the host's devices faked. What a DCU node adds (the DTK image, /dev/kfd) is exactly
what these tests cannot have; docs/dcu.md says what a DCU owner runs to finish the verification.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import importlib.util
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from buildtest_support import REPO

from build_tools import dockercli, env, flow, hostdev, matrix, options, pipeline, plan, wheelcheck
from build_tools.summary import Summary

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


# ------------------------------------------------------------------------------------- host-side additions
def fake_stat(table: dict[str, tuple[str, int]]):
    def _stat(path: str):
        if path not in table:
            return None
        kind, gid = table[path]
        mode = {"chr": stat.S_IFCHR, "dir": stat.S_IFDIR}[kind] | 0o660
        return os.stat_result((mode, 0, 0, 1, 0, gid, 0, 0, 0, 0))

    return _stat


HOST = {
    "/dev/kfd": ("chr", 109),
    "/dev/dri": ("dir", 0),
    "/dev/dri/card0": ("chr", 44),
    "/dev/dri/renderD128": ("chr", 109),
    "/dev/dri/renderD129": ("chr", 110),
}


def test_hostdev_flags_from_a_fake_dcu_host(dcu):
    st = fake_stat(HOST)
    listdir = lambda p: sorted(k.rsplit("/", 1)[1] for k in HOST if k.startswith(p + "/"))  # noqa: E731
    assert hostdev.device_paths(dcu.docker_run_flags) == ["/dev/kfd", "/dev/dri"]
    assert hostdev.missing_devices(dcu.docker_run_flags, exists=lambda p: p in HOST) == []
    assert hostdev.missing_devices(dcu.docker_run_flags, exists=lambda p: False) == ["/dev/kfd", "/dev/dri"]
    assert hostdev.device_groups(dcu.docker_run_flags, st, listdir) == [109, 44, 110]
    flags = hostdev.run_flags(
        dcu.docker_run_flags,
        dcu.docker_run_optional_mounts,
        exists=lambda p: p == "/opt/hyhal",
        stat=st,
        listdir=listdir,
    )
    assert flags == ["-v", "/opt/hyhal:/opt/hyhal:ro", "--group-add=109", "--group-add=44", "--group-add=110"]
    assert (
        hostdev.run_flags(
            dcu.docker_run_flags,
            dcu.docker_run_optional_mounts,
            exists=lambda p: False,
            stat=lambda p: None,
            listdir=listdir,
        )
        == []
    )
    assert hostdev.device_paths(["--device", "/dev/kfd", "--device=/dev/dri:/dev/dri:rwm"]) == ["/dev/kfd", "/dev/dri"]
    line = hostdev.problem("test-dcu", ["/dev/kfd", "/dev/dri"], "build-dcu")
    assert "\n" not in line and "/dev/kfd, /dev/dri" in line and "nox -s build-dcu" in line
    assert hostdev.problem("test-dcu", [], "build-dcu") is None


def test_wheelcheck_accepts_the_image_label_of_a_family(tmp_path):
    info = wheelcheck.WheelInfo(
        path=tmp_path / "torch_fl-0.1.0+pt204dtk2504-cp310-abi3-manylinux_2_35_x86_64.whl",
        version="0.1.0+pt204dtk2504",
        python_tags=("cp310",),
        abi_tags=("abi3",),
        platform_tags=("manylinux_2_35_x86_64",),
        sha256="0" * 64,
        extension_modules=(wheelcheck.CORE_LIBRARY,),
        grafted=(),
    )
    assert wheelcheck.problems(info, variant="dtk*", wheel_tag="cp310-abi3", excludes=()) == []
    assert wheelcheck.problems(info, variant="dtk2604", wheel_tag="cp310-abi3", excludes=())
    cpu = dataclasses.replace(info, version="0.1.0+pt204cpu")
    assert wheelcheck.problems(cpu, variant="dtk*", wheel_tag="cp310-abi3", excludes=())
    assert wheelcheck.problems(cpu, variant="cpu", wheel_tag="cp310-abi3", excludes=()) == []


# ------------------------------------------------------------------------------------------------ dry runs
@pytest.fixture
def no_dtk_daemon(monkeypatch):
    """A reachable docker daemon without the DTK image, on a host with a DCU and hyhal (faked)."""
    pulls: list[str] = []
    monkeypatch.setattr(dockercli, "find_client", lambda environ=None, probe=None, which=None: CLIENT)
    monkeypatch.setattr(dockercli, "check_daemon", lambda client, probe=None: "20.10.24")
    monkeypatch.setattr(dockercli, "inspect_image", lambda client, ref, probe=None: None)
    real = hostdev.run_flags
    st = fake_stat(HOST)
    listdir = lambda p: sorted(k.rsplit("/", 1)[1] for k in HOST if k.startswith(p + "/"))  # noqa: E731
    monkeypatch.setattr(hostdev, "missing_devices", lambda flags, exists=None: [])
    monkeypatch.setattr(
        hostdev,
        "run_flags",
        lambda flags, mounts, **kw: real(
            flags, mounts, exists=lambda p: p in HOST or p == "/opt/hyhal", stat=st, listdir=listdir
        ),
    )
    return pulls


def dry_flow(repo: Path, mx: matrix.Matrix, lines: list[str], *posargs: str) -> flow.Flow:
    return flow.Flow(repo, mx, options.read(["--dry-run", *posargs], environ={"PATH": ""}), echo=lines.append)


def printed(out: str) -> list[list[str]]:
    return [shlex.split(line) for line in out.splitlines() if line.startswith(("DOCKER_BUILDKIT=1 docker", "docker "))]


def build_arg(argv: list[str], name: str) -> str:
    pairs = zip(argv, argv[1:], strict=False)
    values = [v.split("=", 1)[1] for a, v in pairs if a == "--build-arg" and v.startswith(name + "=")]
    assert len(values) == 1, name
    return values[0]


def test_build_dcu_dry_run_prints_every_docker_command(fake_repo, no_dtk_daemon, capsys, dcu):
    repo, mx = fake_repo
    lines: list[str] = []
    summary = Summary("dcu")
    pipeline.build(dry_flow(repo, mx, lines), "dcu", summary)
    cmds = printed(capsys.readouterr().out)
    assert len(cmds) == 2  # compile + repair in the builder, export the wheel
    for argv in cmds:
        argv = argv[1:]  # DOCKER_BUILDKIT=1
        assert argv[:2] == ["docker", "build"] and "--network" in argv
        assert argv[argv.index("-f") + 1] == str(repo / "docker" / "dcu" / "Dockerfile")
        assert build_arg(argv, "BUILDER_IMAGE") == dcu.builder_image
        assert build_arg(argv, "TEST_IMAGE") == dcu.test_image
        # the plan is the row: what the matrix says is what docker is told
        assert build_arg(argv, "VARIANT") == dcu.variant
        assert build_arg(argv, "BUILDER_LOCK") == "locks/dcu-builder-py310.txt"  # no torch in it: the image's
        assert build_arg(argv, "PYTHON_VERSION") == dcu.python
        assert sorted(build_arg(argv, "BUILD_ENV").split()) == sorted(f"{k}={v}" for k, v in dcu.build_env.items())
        assert build_arg(argv, "AUDITWHEEL_EXCLUDE").split() == list(dcu.auditwheel_exclude)
    assert cmds[0][cmds[0].index("--target") + 1] == "build"
    assert cmds[1][cmds[1].index("--target") + 1] == "wheel"
    assert cmds[1][cmds[1].index("--output") + 1].startswith(f"type=local,dest={repo / 'wheels' / '.dcu.tmp-'}")
    said = "\n".join(lines)
    assert f"a real run would stop here: base image {dcu.builder_image} is not present locally:" in said
    assert "torch: preinstalled in" in said
    # how collectives reach RCCL: through the DTK torch, and RCCL itself stays out of the wheel
    assert f"collectives: {dcu.collectives}" in said and "RCCL" in dcu.collectives
    assert "librccl*.so*" in dcu.auditwheel_exclude


def test_test_dcu_dry_run_plans_a_container_with_the_devices(fake_repo, no_dtk_daemon, capsys, dcu):
    repo, mx = fake_repo
    pipeline.test(dry_flow(repo, mx, []), "dcu", Summary("dcu"))
    run = [c for c in printed(capsys.readouterr().out) if c[:2] == ["docker", "run"]]
    assert len(run) == 1
    argv = run[0]
    image = next(a for a in argv if a.startswith("torch-fl/dcu-test:"))
    before = argv[: argv.index(image)]
    for flag in dcu.docker_run_flags:
        assert flag in before
    assert before[before.index("-e", before.index("HOME=/tmp") - 1) :].count("-e") >= 3
    for key, value in dcu.test_env.items():
        assert f"{key}={value}" in before
    assert "/opt/hyhal:/opt/hyhal:ro" in before and before[before.index("/opt/hyhal:/opt/hyhal:ro") - 1] == "-v"
    assert {"--group-add=109", "--group-add=44", "--group-add=110"} <= set(before)
    after = argv[argv.index(image) + 1 :]
    assert after[:2] == ["python", "/opt/torch-fl/scripts/run_tests.py"]
    assert after[after.index("--markers") + 1] == "not cuda" and after[after.index("--accelerator") + 1] == "dcu"


def test_build_dcu_without_the_dtk_image_stops_at_once_with_one_line(fake_repo, no_dtk_daemon, monkeypatch, dcu):
    repo, mx = fake_repo
    ran: list[plan.Command] = []
    f = flow.Flow(repo, mx, options.Options(environ={"PATH": ""}), echo=lambda s: None)
    monkeypatch.setattr(f.runner, "run", lambda cmd, **kw: ran.append(cmd))
    with pytest.raises(flow.UserError) as err:
        pipeline.build(f, "dcu", Summary("dcu"))
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(f"base image {dcu.builder_image} is not present locally: ")
    assert "docker login harbor.sourcefind.cn:5443" in msg and "docker load" in msg
    assert ran == [], "no pull, no build: it stops at once"
    assert not (repo / "build" / "docker" / "dcu").exists(), "nothing staged"


def test_test_dcu_on_a_host_without_the_devices_stops_at_once(fake_repo, monkeypatch):
    repo, mx = fake_repo
    monkeypatch.setattr(dockercli, "find_client", lambda environ=None, probe=None, which=None: CLIENT)
    monkeypatch.setattr(dockercli, "check_daemon", lambda client, probe=None: "20.10.24")
    monkeypatch.setattr(hostdev, "missing_devices", lambda flags, exists=None: hostdev.device_paths(flags))
    built = []
    monkeypatch.setattr(pipeline, "build", lambda *a, **k: built.append(a))
    f = flow.Flow(repo, mx, options.Options(environ={"PATH": ""}), echo=lambda s: None)
    with pytest.raises(flow.UserError, match=r"test-dcu passes /dev/kfd, /dev/dri into the test container"):
        pipeline.test(f, "dcu", Summary("dcu"))
    assert built == []
    # the cpu row passes no devices: not checked
    assert hostdev.device_paths(mx.toolchain("cpu").docker_run_flags) == []


def test_plan_test_run_appends_host_flags_after_the_row_flags(dcu, tmp_path):
    flags = ["-v", "/opt/hyhal:/opt/hyhal:ro", "--group-add=109"]
    site = plan.Site("docker", dcu, "img:1", tmp_path, env.from_environ({}), "1000:1000", flags)
    c = plan.plan_test_run(site, bench="none", pytest_args=[])
    argv = list(c.argv)
    last_row_flag = max(argv.index(f) for f in dcu.docker_run_flags)
    assert argv.index("/opt/hyhal:/opt/hyhal:ro") > last_row_flag
    assert argv.index("--group-add=109") < argv.index("img:1")
