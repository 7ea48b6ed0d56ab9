"""bench-<vendor> (every vendor, cpu and cuda included): the full benchmark in the vendor's test container,
reports swapped in whole as reports/<vendor>/bench/, kept when test-<vendor> replaces reports/<vendor>/."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest
from buildtest_support import REPO, nox_sessions

from build_tools import dockercli, env, flow, git, locks, matrix, options, outputs, pipeline, plan, runner, wheel
from build_tools.summary import ImageRef, Summary

CLIENT = dockercli.DockerClient("docker", "28.2.2", "buildx")


@pytest.fixture(scope="module")
def m() -> matrix.Matrix:
    return matrix.load(REPO / "configs" / "toolchains.toml")


def test_nox_lists_a_bench_session_per_vendor(m):
    listed = nox_sessions()
    for vendor in m.toolchains:
        line = listed[f"bench-{vendor}"]
        assert f"reports in reports/{vendor}/bench/" in line
        assert line.startswith("- "), "bench sessions are never selected by default"


# ----------------------------------------------------------------------------------------------- the plan
@pytest.mark.parametrize("vendor", ["cpu", "cuda"])
def test_bench_run_is_the_wheels_benchmark_in_the_test_image(m, vendor, tmp_path):
    toolchain = m.toolchain(vendor)
    host = env.from_environ({"HTTPS_PROXY": "http://u:secret@proxy:3128"})
    site = plan.Site("docker", toolchain, f"torch-fl/{vendor}-test:abc", tmp_path / "out", host, user="1000:1000")
    c = plan.plan_bench_run(site, bench_args=["--cases", "a,b"], commit="0123abcd")
    argv = list(c.argv)
    assert argv[:3] == ["docker", "run", "--rm"]
    assert f"{tmp_path / 'out'}:/reports" in argv
    assert argv[argv.index("--user") + 1] == "1000:1000"
    i = argv.index(f"torch-fl/{vendor}-test:abc")
    assert argv[i - 2 : i] == ["-w", "/opt/torch-fl-tree/build_tools/bench"], "from the harness's folder"
    assert argv[i + 1 :] == [
        "python",
        "-m",
        "harness",
        "--accelerator",
        toolchain.accelerator,
        "--out",
        "/reports",
        "--cases",
        "a,b",
    ], "the harness on the installed wheel, full length unless asked (no --short), reports into the mounted directory"
    assert "TORCH_FL_COMMIT=0123abcd" in argv and f"FLAGOS_ACCELERATOR={vendor}" in argv
    for flag in toolchain.docker_run_flags:
        assert argv.index(flag) < i
    assert ("--gpus=all" in argv) == (vendor == "cuda")
    assert "secret" not in c.shell() and "-e HTTPS_PROXY" in c.shell()
    assert c.log_name == f"{vendor}/docker-run-bench.log"


def test_the_test_run_command_did_not_change_shape(m, tmp_path):
    """Factoring the shared `docker run` prefix out kept test-<vendor>'s command as it was."""
    cpu = m.toolchain("cpu")
    site = plan.Site("docker", cpu, "img", tmp_path / "r", env.from_environ({}), user="1:2")
    c = plan.plan_test_run(site, bench="full", pytest_args=[])
    assert list(c.argv) == [
        "docker", "run", "--rm", "--network", "host", "-v", f"{tmp_path / 'r'}:/reports", "--user", "1:2",
        "-e", "HOME=/tmp", "-e", "FLAGOS_ACCELERATOR=cpu", "--shm-size=1g", "img", "python",
        "/opt/torch-fl/scripts/run_tests.py", "--tests", "/opt/torch-fl-tree/tests", "--reports", "/reports",
        "--markers", cpu.pytest_markers, "--accelerator", "cpu", "--bench", "full",
        "--suites", "routing,correctness",
    ]  # fmt: skip


# ----------------------------------------------------------------------------------------------- outputs
def test_keep_subdirs_copies_the_benchmark_into_the_replacement(tmp_path):
    final, tmp = tmp_path / "reports" / "cpu", tmp_path / "reports" / ".cpu.tmp-1"
    (final / "bench").mkdir(parents=True)
    (final / "bench" / "bench.json").write_text("{}")
    (final / "junit.xml").write_text("old")
    tmp.mkdir()
    (tmp / "junit.xml").write_text("new")
    assert outputs.keep_subdirs(final, tmp, ["bench", "absent"]) == ["bench"]
    assert (tmp / "bench" / "bench.json").read_text() == "{}"
    assert (final / "bench" / "bench.json").is_file(), "copied, not moved: the old directory stays complete"
    outputs.publish_dir(tmp, final)
    assert (final / "junit.xml").read_text() == "new" and (final / "bench" / "bench.json").is_file()
    fresh = tmp_path / "fresh"
    (fresh / "bench").mkdir(parents=True)
    (fresh / "bench" / "bench.json").write_text("mine")
    assert outputs.keep_subdirs(final, fresh, ["bench"]) == [], "a run that wrote its own bench/ keeps it"
    assert (fresh / "bench" / "bench.json").read_text() == "mine"


# ------------------------------------------------------------------------------------------------- the flow
@pytest.fixture
def bench_repo(tmp_path, m, monkeypatch):
    """A repository whose test image is 'ready' (test_image faked) and whose docker run is faked."""
    repo = tmp_path / "repo"
    repo.mkdir()
    calls: list[plan.Command] = []
    state = {"rc": 0, "files": ["bench.json", "bench.md", "bench.png"]}

    def fake_test_image(f, vendor, summary, session):
        base = ImageRef("b", "1")
        host, toolchain = env.from_environ({}), f.matrix.toolchain(vendor)
        built = wheel.Built(
            toolchain,
            None,
            host,
            [],
            base,
            base,
            "key",
            "src",
            Path("wheels"),
            "0",
            "",
            {},
            locks.lock_args(toolchain),
        )
        return built, f"torch-fl/{vendor}-test:abc"

    def fake_run(self, cmd, *, check=True, passthrough=False):
        calls.append(cmd)
        if self.dry_run:
            return runner.Result(0, 0.0, None, planned=True)
        mount = next(a for a in cmd.argv if a.endswith(":/reports")).rsplit(":", 1)[0]
        for name in state["files"]:
            (Path(mount) / name).write_text(name)
        return runner.Result(state["rc"], 1.0, Path("/logs/bench.log"))

    monkeypatch.setattr(pipeline, "_test_image", fake_test_image)
    monkeypatch.setattr(runner.Runner, "run", fake_run)
    monkeypatch.setattr(dockercli, "find_client", lambda environ=None, probe=None, which=None: CLIENT)
    monkeypatch.setattr(dockercli, "check_daemon", lambda client, probe=None: "28.2.2")
    monkeypatch.setattr(git, "head_commit", lambda repo: "abc123")
    return repo, calls, state


def make_flow(repo: Path, m: matrix.Matrix, *posargs: str) -> flow.Flow:
    return flow.Flow(repo, m, options.read(list(posargs), environ={}), echo=lambda _: None)


def test_bench_cpu_publishes_reports_cpu_bench_whole(m, bench_repo):
    repo, calls, _ = bench_repo
    (repo / "reports" / "cpu" / "bench").mkdir(parents=True)
    (repo / "reports" / "cpu" / "bench" / "stale.txt").write_text("old run")
    (repo / "reports" / "cpu" / "junit.xml").write_text("test-cpu's")
    summary = Summary("cpu")
    pipeline.bench(make_flow(repo, m, "--", "--runs", "3"), "cpu", summary)
    out = repo / "reports" / "cpu" / "bench"
    assert sorted(p.name for p in out.iterdir()) == ["bench.json", "bench.md", "bench.png"]
    assert (repo / "reports" / "cpu" / "junit.xml").read_text() == "test-cpu's", "only bench/ is replaced"
    assert not [p for p in (repo / "reports" / "cpu").iterdir() if p.name.startswith(".")], "no leftovers"
    (cmd,) = calls
    assert list(cmd.argv[-2:]) == ["--runs", "3"] and "TORCH_FL_COMMIT=abc123" in cmd.argv
    assert [(s.name, s.status) for s in summary.stages] == [("run benchmark", "ran")]
    assert summary.bench == ["bench.json", "bench.md", "bench.png"]
    assert summary.reports == Path("reports/cpu/bench")


def test_a_failed_gate_keeps_its_reports_and_fails_in_one_line(m, bench_repo):
    repo, _, state = bench_repo
    state["rc"] = 3
    with pytest.raises(flow.UserError) as err:
        pipeline.bench(make_flow(repo, m), "cpu", Summary("cpu"))
    assert str(err.value) == (
        "bench-cpu failed: python -m harness exited 3 (reports in reports/cpu/bench); log /logs/bench.log"
    )
    assert (repo / "reports" / "cpu" / "bench" / "bench.json").is_file()


def test_a_failed_measurement_leaves_the_previous_reports(m, bench_repo):
    repo, _, state = bench_repo
    (repo / "reports" / "cpu" / "bench").mkdir(parents=True)
    (repo / "reports" / "cpu" / "bench" / "bench.json").write_text("previous")
    state["rc"], state["files"] = 1, []
    with pytest.raises(flow.UserError, match=r"exited 1 \(no reports written\)"):
        pipeline.bench(make_flow(repo, m), "cpu", Summary("cpu"))
    assert (repo / "reports" / "cpu" / "bench" / "bench.json").read_text() == "previous"
    assert not [p for p in (repo / "reports" / "cpu").iterdir() if p.name.startswith(".")]


def test_bench_dry_run_writes_nothing(m, bench_repo):
    repo, calls, _ = bench_repo
    summary = Summary("cpu")
    pipeline.bench(make_flow(repo, m, "--dry-run"), "cpu", summary)
    assert not (repo / "reports").exists()
    assert [(s.name, s.status) for s in summary.stages] == [("run benchmark", "planned")]
    assert "--short" not in calls[0].argv


def test_head_commit_marks_a_dirty_checkout(tmp_path):
    cli = ["git", "-c", "user.email=t@t", "-c", "user.name=t", "-C", str(tmp_path)]
    if subprocess.run([*cli, "init", "-q"], check=False).returncode != 0:
        pytest.skip("git is not available")
    (tmp_path / "f").write_text("1")
    subprocess.run([*cli, "add", "f"], check=True)
    subprocess.run([*cli, "commit", "-qm", "x"], check=True)
    head = git.head_commit(tmp_path)
    assert len(head) == 40
    (tmp_path / "f").write_text("2")
    assert git.head_commit(tmp_path) == head + "-dirty"
    assert git.head_commit(tmp_path / "nope") == ""


def test_printed_dry_run_line_is_copy_pasteable(m, tmp_path):
    site = plan.Site("docker", m.toolchain("cpu"), "img", tmp_path, env.from_environ({}))
    c = plan.plan_bench_run(site, bench_args=["--routes", "native,cpu"])
    assert shlex.split(c.shell()) == list(c.argv)
