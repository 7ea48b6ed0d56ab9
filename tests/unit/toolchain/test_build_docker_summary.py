"""Docker client discovery and newcomer errors, base-image planning, the run summary, the runner, nox -l."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from buildtest_support import REPO, nox_sessions

from build_tools import baseimage, dockercli, matrix, plan, runner, summary
from build_tools.summary import ImageRef


def fake_probe(answers: dict[tuple[str, ...], tuple[int, str, str]]):
    def probe(argv):
        rc, out, err = answers.get(tuple(argv), (1, "", "unknown command"))
        return subprocess.CompletedProcess(list(argv), rc, out, err)

    return probe


def test_no_docker_client_says_how_to_install():
    with pytest.raises(dockercli.DockerError, match="no docker client found: install Docker"):
        dockercli.find_client({"PATH": ""}, which=lambda _: None)


def test_a_client_with_buildx_is_used():
    probe = fake_probe(
        {
            ("/x/docker", "version", "--format", "{{.Client.Version}}"): (0, "28.2.2\n", ""),
            ("/x/docker", "buildx", "version"): (0, "github.com/docker/buildx v0.24", ""),
        }
    )
    c = dockercli.find_client({"TORCH_FL_DOCKER": "/x/docker"}, probe=probe, which=lambda exe: exe)
    assert (c.exe, c.buildkit, c.note) == ("/x/docker", "buildx", "")


def test_a_new_client_without_buildx_falls_back_to_an_older_client_on_path(tmp_path):
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        exe = tmp_path / d / "docker"
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
    a, b = str(tmp_path / "a" / "docker"), str(tmp_path / "b" / "docker")
    probe = fake_probe(
        {
            (a, "version", "--format", "{{.Client.Version}}"): (0, "28.2.2", ""),
            (b, "version", "--format", "{{.Client.Version}}"): (0, "20.10.24+dfsg1", ""),
        }
    )
    env = {"PATH": f"{tmp_path / 'a'}:{tmp_path / 'b'}"}
    c = dockercli.find_client(env, probe=probe, which=lambda _: a)
    assert c.exe == b and c.buildkit == "builtin"
    assert "no buildx plugin" in c.note
    only_new = {"PATH": str(tmp_path / "a")}
    with pytest.raises(dockercli.DockerError, match="Install the buildx plugin"):
        dockercli.find_client(only_new, probe=probe, which=lambda _: a)


@pytest.mark.parametrize(
    ("stderr", "message"),
    [
        ("permission denied while trying to connect to the Docker daemon socket", "add yourself to the docker group"),
        (
            "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?",
            "the docker daemon is not running",
        ),
    ],
)
def test_daemon_problems_are_one_line_with_the_fix(stderr, message):
    c = dockercli.DockerClient("docker", "28", "buildx")
    probe = fake_probe({("docker", "version", "--format", "{{.Server.Version}}"): (1, "", stderr)})
    with pytest.raises(dockercli.DockerError) as err:
        dockercli.check_daemon(c, probe=probe)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_apt_mirror_from_deb822_and_one_line_sources():
    deb822 = """Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
"""
    assert baseimage.apt_mirror({"debian.sources": deb822}, "bookworm") == "http://mirror.example/debian"
    one_line = "# comment\ndeb [arch=amd64] https://other.example/debian/ bookworm main\n"
    assert baseimage.apt_mirror({"sources.list": one_line}, "bookworm") == "https://other.example/debian"
    assert baseimage.apt_mirror({"x.list": one_line}, "trixie") is None


def test_base_image_plan(tmp_path):
    base = matrix.LocalBase("x/debian:bookworm", "debootstrap", "bookworm", "minbase", "auto", ("debian:bookworm",))
    deboot, imp = baseimage.plan(base, "http://m/debian", tmp_path / "rootfs", "docker")
    assert deboot.argv == ("debootstrap", "--variant=minbase", "bookworm", str(tmp_path / "rootfs"), "http://m/debian")
    script = imp.argv[-1]
    assert imp.argv[:3] == ("bash", "-o", "pipefail")
    assert f"tar -C {tmp_path / 'rootfs'} -c ." in script
    assert "docker import" in script and script.endswith("- x/debian:bookworm")


def test_junit_totals(tmp_path):
    suites = tmp_path / "junit.xml"
    suites.write_text(
        '<testsuites><testsuite tests="10" failures="1" errors="0" skipped="2" time="1.5"/>'
        '<testsuite tests="5" failures="0" errors="1" skipped="0" time="0.5"/></testsuites>'
    )
    counts = summary.parse_junit(suites)
    assert (counts.tests, counts.failures, counts.errors, counts.skipped, counts.passed) == (15, 1, 1, 2, 11)
    assert not counts.ok
    single = tmp_path / "one.xml"
    single.write_text('<testsuite tests="3" failures="0" errors="0" skipped="0" time="2"/>')
    assert summary.parse_junit(single).ok


def test_summary_markdown_and_text():
    s = summary.Summary("cpu")
    s.add("build wheel", "up to date")
    s.add("run suites", "ran", 12.3, "exit 0")
    s.images["test"] = ImageRef("torch-fl/cpu-test:abc", "sha256:0123456789abcdef0123")
    s.tests = summary.TestCounts(10, 0, 0, 1, 2.0)
    md = s.markdown()
    assert "| build wheel | up to date | 0.0 |" in md
    assert "| run suites | ran | 12.3 | exit 0 |" in md
    assert "`9 passed, 0 failed, 0 errors, 1 skipped/xfailed (10 tests, 2.0s)`" in md
    assert "torch-fl/cpu-test:abc" in s.text()


def test_runner_dry_run_prints_and_runs_nothing(tmp_path, capsys):
    r = runner.Runner(tmp_path / "logs", dry_run=True, echo=print)
    res = r.run(plan.Command("t", ("false",), {"DOCKER_BUILDKIT": "1"}))
    assert res.returncode == 0
    assert "DOCKER_BUILDKIT=1 false" in capsys.readouterr().out
    assert not (tmp_path / "logs").exists()


def test_a_question_in_a_dry_run_is_not_asked_and_answers_planned():
    said: list[str] = []
    asked: list[int] = []
    dry = runner.Runner(Path("/nonexistent"), dry_run=True, echo=said.append)
    answer = dry.ask(lambda: asked.append(1) or "present", unasked="a real run needs the image")
    assert answer is runner.PLANNED and not answer and asked == []
    assert said == ["dry run: a real run needs the image"]
    real = runner.Runner(Path("/nonexistent"), echo=said.append)
    assert real.ask(lambda: "present") == "present"


def test_a_stage_is_timed_and_fails_with_its_block():
    s = summary.Summary("cpu")
    with s.stage("build wheel", "docker build") as stage:
        stage.status = "planned"
    with pytest.raises(ValueError), s.stage("test image"):
        raise ValueError("no")
    assert [(x.name, x.status, x.note) for x in s.stages] == [
        ("build wheel", "planned", "docker build"),
        ("test image", "failed", ""),
    ]
    assert all(x.seconds >= 0.0 for x in s.stages)


def test_runner_failure_is_one_line_naming_the_log(tmp_path):
    r = runner.Runner(tmp_path / "logs", echo=lambda _: None)
    cmd = plan.Command(
        "build cpu",
        (
            sys.executable,
            "-c",
            "print('#5 [build 2/3] RUN make'); print('#5 ERROR: exit code: 2'); raise SystemExit(2)",
        ),
        log_name="cpu/x.log",
        kind="build",
    )
    with pytest.raises(runner.StepFailed) as err:
        r.run(cmd)
    msg = str(err.value)
    assert msg == f"build cpu failed at step [build 2/3] RUN make (exit 2); full log: {tmp_path / 'logs/cpu/x.log'}"
    assert "#5 ERROR" in (tmp_path / "logs" / "cpu" / "x.log").read_text()


def test_a_command_alongside_fails_the_block_once_the_block_ends(tmp_path):
    said: list[str] = []
    r = runner.Runner(tmp_path / "logs", echo=said.append)
    fail = plan.Command("deps", (sys.executable, "-c", "raise SystemExit(3)"), log_name="cpu/deps.log")
    ran = []
    with pytest.raises(runner.StepFailed, match=r"^deps \(alongside\) failed \(exit 3\); full log: "):
        with r.alongside(fail):
            ran.append("block")
    assert ran == ["block"]
    # a block that fails keeps its own error; the failure alongside is still shown
    with pytest.raises(ValueError, match="block"):
        with r.alongside(fail):
            raise ValueError("block")
    assert any(line.startswith("also failed: deps (alongside) failed (exit 3)") for line in said)
    ok = plan.Command("ok", (sys.executable, "-c", "print('fine')"), log_name="cpu/ok.log")
    with r.alongside(ok):
        pass
    assert "fine" in (tmp_path / "logs" / "cpu" / "ok.log").read_text()


def test_nox_lists_one_session_per_action_and_vendor():
    m = matrix.load(REPO / "configs" / "toolchains.toml")
    listed = nox_sessions()
    for vendor in m.toolchains:
        for action in ("build", "test"):
            assert f"{action}-{vendor}" in listed
    for name in ("base-image", "lint", "tests", "clean"):
        assert name in listed
    assert all(" -> " in line for line in listed.values()), "every session describes itself"
