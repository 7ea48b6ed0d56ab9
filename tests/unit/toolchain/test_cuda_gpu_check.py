"""test-cuda / bench-cuda without a GPU or the NVIDIA container runtime stop at once with one line (never a
run that passes with every GPU test skipped). `docker info`, /dev and PATH are faked: no docker, no GPU."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from buildtest_support import REPO

from build_tools import containers, dockercli, flow, gpu, matrix, options, pipeline
from build_tools.summary import Summary

# `docker info --format '{{json .Runtimes}}'` of a GPU host after `nvidia-ctk runtime configure`, and of this one
INFO_NVIDIA = json.dumps(
    {
        "io.containerd.runc.v2": {"path": "runc"},
        "nvidia": {"path": "nvidia-container-runtime"},
        "runc": {"path": "runc"},
    }
)
INFO_RUNC = json.dumps({"io.containerd.runc.v2": {"path": "runc"}, "runc": {"path": "runc"}})
CLIENT = dockercli.DockerClient("docker", "28.2.2", "buildx")


def fake_info(rc: int, out: str, err: str = ""):
    def probe(argv):
        assert list(argv) == ["docker", "info", "--format", "{{json .Runtimes}}"], argv
        return subprocess.CompletedProcess(list(argv), rc, out, err)

    return probe


@pytest.fixture(scope="module")
def m() -> matrix.Matrix:
    return matrix.load(REPO / "configs" / "toolchains.toml")


# ------------------------------------------------------------------------------------------ pure pieces
def test_only_rows_that_ask_for_gpus_are_checked(m):
    assert gpu.needs_nvidia(m.toolchain("cuda").docker_run_flags)
    assert not gpu.needs_nvidia(m.toolchain("cpu").docker_run_flags)
    assert not gpu.needs_nvidia(["--device=/dev/kfd", "--shm-size=8g"])
    assert gpu.needs_nvidia(["--gpus=device=0,1"]) and gpu.needs_nvidia(["--gpus"])
    assert not gpu.needs_nvidia(["--gpus-per-task=1"])


@pytest.mark.parametrize(
    ("rc", "out", "expected"),
    [
        (0, INFO_NVIDIA + "\n", ["io.containerd.runc.v2", "nvidia", "runc"]),
        (0, INFO_RUNC, ["io.containerd.runc.v2", "runc"]),
        (0, "{}", []),
        (0, "null", None),
        (0, "template parsing error", None),
        (1, "", None),
    ],
)
def test_runtimes_from_a_fake_docker_info(rc, out, expected):
    assert dockercli.runtime_names(CLIENT, probe=fake_info(rc, out)) == expected


def test_gpu_device_nodes(tmp_path):
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidiactl", "nvidia-uvm", "nvidia-modeset", "null"):
        (dev / name).touch()
    assert gpu.device_nodes(dev) == [], "control nodes without /dev/nvidia<N>: driver loaded, no GPU passed in"
    (dev / "nvidia1").touch()
    (dev / "nvidia0").touch()
    assert gpu.device_nodes(dev) == [str(dev / "nvidia0"), str(dev / "nvidia1")]
    wsl = tmp_path / "wsl"
    wsl.mkdir()
    (wsl / "dxg").touch()
    assert gpu.device_nodes(wsl) == [str(wsl / "dxg")]
    assert gpu.device_nodes(tmp_path / "missing") == []


def test_toolkit_hook_lookup():
    found = {"nvidia-container-runtime-hook": "/usr/bin/nvidia-container-runtime-hook"}
    assert gpu.find_hook(found.get) == "/usr/bin/nvidia-container-runtime-hook"
    assert gpu.find_hook(lambda _: None) is None


RUNC = ["io.containerd.runc.v2", "runc"]


@pytest.mark.parametrize(
    ("devices", "runtimes", "hook", "needs"),
    [
        ([], RUNC, None, ["an NVIDIA GPU", "the NVIDIA Container Toolkit"]),
        ([], ["nvidia", "runc"], None, ["an NVIDIA GPU"]),
        (["/dev/nvidia0"], RUNC, None, ["the NVIDIA Container Toolkit"]),
        (["/dev/nvidia0"], None, None, ["the NVIDIA Container Toolkit"]),
    ],
)
def test_problem_is_one_line_naming_what_is_missing_and_the_fix(devices, runtimes, hook, needs):
    line = gpu.problem("test-cuda", devices=devices, runtimes=runtimes, hook=hook, build_session="build-cuda")
    assert line is not None and "\n" not in line
    assert line.startswith(f"test-cuda needs {' and '.join(needs)} on this host: ")
    if "an NVIDIA GPU" in needs:
        assert "no /dev/nvidia<N> device" in line and "nvidia-smi" in line
    if "the NVIDIA Container Toolkit" in needs:
        assert "no nvidia runtime in `docker info`" in line
        assert "nvidia-ctk runtime configure --runtime=docker" in line
        assert ("runtimes: io.containerd.runc.v2, runc" in line) == (runtimes is not None)
    assert line.endswith("`nox -s build-cuda` builds the wheel without a GPU")


@pytest.mark.parametrize(
    ("runtimes", "hook"),
    [(["nvidia", "runc"], None), (RUNC, "/usr/bin/nvidia-container-runtime-hook"), (None, "/usr/bin/hook")],
)
def test_a_gpu_and_the_toolkit_pass(runtimes, hook):
    assert gpu.problem("test-cuda", devices=["/dev/nvidia0"], runtimes=runtimes, hook=hook) is None
    assert gpu.describe(["/dev/nvidia0"], runtimes, hook).startswith("GPU containers: /dev/nvidia0; NVIDIA Container")


# ------------------------------------------------------------------------------------------ in the flow
@pytest.fixture
def host(monkeypatch):
    """A reachable docker daemon whose runtimes, /dev and PATH the test sets; building is forbidden."""
    state = {"runtimes": ["io.containerd.runc.v2", "runc"], "devices": [], "hook": None, "probed": 0}

    def runtimes(client, probe=None):
        state["probed"] += 1
        return state["runtimes"]

    def no_build(*args, **kwargs):
        raise AssertionError("nothing may be built before the GPU check passed")

    monkeypatch.setattr(dockercli, "find_client", lambda environ=None, probe=None, which=None: CLIENT)
    monkeypatch.setattr(dockercli, "check_daemon", lambda client, probe=None: "28.2.2")
    monkeypatch.setattr(dockercli, "runtime_names", runtimes)
    monkeypatch.setattr(gpu, "device_nodes", lambda dev=None: state["devices"])
    monkeypatch.setattr(gpu, "find_hook", lambda which=None: state["hook"])
    monkeypatch.setattr(pipeline, "build", no_build)
    return state


def real_flow(m: matrix.Matrix, lines: list[str], *posargs: str) -> flow.Flow:
    return flow.Flow(Path("/nonexistent-repo"), m, options.read(list(posargs), environ={}), echo=lines.append)


@pytest.mark.parametrize("action", [pipeline.test, pipeline.bench])
def test_test_and_bench_cuda_stop_at_once_without_a_gpu(m, host, action):
    lines: list[str] = []
    with pytest.raises(flow.UserError) as err:
        action(real_flow(m, lines), "cuda", Summary("cuda"))
    session = "test-cuda" if action is pipeline.test else "bench-cuda"
    msg = str(err.value)
    assert msg.startswith(f"{session} needs an NVIDIA GPU and the NVIDIA Container Toolkit on this host:")
    assert "\n" not in msg and host["probed"] == 1


def test_a_gpu_without_the_container_toolkit_still_stops(m, host):
    host["devices"] = ["/dev/nvidia0"]
    with pytest.raises(flow.UserError, match=r"^test-cuda needs the NVIDIA Container Toolkit on this host: "):
        pipeline.test(real_flow(m, []), "cuda", Summary("cuda"))


def test_with_a_gpu_and_the_nvidia_runtime_the_flow_goes_on_to_build(m, host):
    host["devices"], host["runtimes"] = ["/dev/nvidia0"], ["nvidia", "runc"]
    lines: list[str] = []
    with pytest.raises(AssertionError, match="nothing may be built"):  # i.e. the check passed, build was next
        pipeline.test(real_flow(m, lines), "cuda", Summary("cuda"))
    assert "GPU containers: /dev/nvidia0; NVIDIA Container Toolkit (nvidia runtime)" in lines


def test_the_cpu_row_is_not_probed(m, host):
    containers.require_gpus(real_flow(m, []), "cpu", "test-cpu")
    assert host["probed"] == 0


def test_a_dry_run_says_it_would_stop_and_goes_on(m, host):
    lines: list[str] = []
    containers.require_gpus(real_flow(m, lines, "--dry-run"), "cuda", "test-cuda")
    assert any(line.startswith("dry run: a real run would stop here: test-cuda needs an NVIDIA GPU") for line in lines)


def test_the_session_error_is_the_one_line(m, host, monkeypatch):
    """noxfile's _run turns the UserError into session.error(<the line>): nothing else is printed."""
    import importlib.util

    import nox  # the nox tests session installs it; a missing nox must fail, not skip

    spec = importlib.util.spec_from_file_location("torch_fl_noxfile_for_test", REPO / "noxfile.py")
    assert spec and spec.loader
    noxfile = importlib.util.module_from_spec(spec)
    monkeypatch.setattr(nox, "session", lambda *a, **k: lambda fn: fn)  # define sessions without registering
    spec.loader.exec_module(noxfile)

    class FakeSession:
        name = "test-cuda"
        posargs: list[str] = []

        def log(self, text):
            pass

        def error(self, text):
            raise SystemExit(text)

    with pytest.raises(SystemExit) as err:
        noxfile._run(FakeSession(), "test", "cuda", lambda f, summary: pipeline.test(f, "cuda", summary))
    assert str(err.value).startswith("test-cuda needs an NVIDIA GPU") and "\n" not in str(err.value)
