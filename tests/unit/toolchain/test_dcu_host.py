"""The DCU toolchain on a host: the device flags a DCU host gives its containers, the wheel label of a DTK family,
and `nox -s build-dcu` / `test-dcu` planned in dry runs (test_dcu_toolchain.py holds the row, the Dockerfile and
the image's scripts).

No docker, no DTK image, no DCU: dry runs are planned in a throw-away repository with the docker daemon faked
(reachable, no images) and the host's devices faked.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import stat
from pathlib import Path

import pytest

from build_tools import dockercli, env, flow, hostdev, matrix, options, pipeline, plan, wheelcheck
from build_tools.summary import Summary

CLIENT = dockercli.DockerClient("docker", "20.10.24", "builtin")


@pytest.fixture(scope="module")
def dcu(m) -> matrix.Toolchain:
    return m.toolchain("dcu")


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
