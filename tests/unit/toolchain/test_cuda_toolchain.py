"""The CUDA toolchain as data: the [toolchains.cuda] row, docker/Dockerfile, and its `--dry-run` plan.

No docker, no GPU: the dry run is planned in a throw-away repository with the docker daemon faked away.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from buildtest_support import REPO

from build_tools import dockercli, env, flow, gpu, locks, matrix, options, pipeline, plan
from build_tools.summary import Summary

DOCKERFILE = REPO / "docker" / "Dockerfile"  # the Debian rows', cpu and cuda alike
# sonames the repaired CUDA wheel must never carry: the user's torch (and its nvidia-* wheels) or the driver
# provide them. Each must be matched by one of the row's auditwheel.exclude globs.
CUDA_SONAMES = [
    "libcudart.so.13",
    "libcuda.so.1",
    "libnvrtc.so.13",
    "libnvrtc-builtins.so.13.0",
    "libcublas.so.13",
    "libcublasLt.so.13",
    "libcudnn.so.9",
    "libcudnn_graph.so.9",
    "libnccl.so.2",
    "libcufft.so.12",
    "libcurand.so.10",
    "libcusolver.so.12",
    "libcusparse.so.12",
    "libcusparseLt.so.0",
    "libnvJitLink.so.13",
    "libcufile.so.0",
    "libcupti.so.13",
    "libnvshmem_host.so.3",
    "libnvToolsExt.so.1",
    "libnvidia-ml.so.1",
    "libtorch_cuda.so",
    "libc10_cuda.so",
    "libtorch.so",
    "libc10.so",
]


@pytest.fixture(scope="module")
def cuda(m) -> matrix.Toolchain:
    return m.toolchain("cuda")


def stages(text: str) -> dict[str, str]:
    """``FROM <image> AS <name>`` of a Dockerfile -> {name: image}."""
    return {name: image for image, name in re.findall(r"^FROM\s+(\S+)\s+AS\s+(\S+)\s*$", text, re.M | re.I)}


# ------------------------------------------------------------------------------------------------ the row
def test_row_builds_on_a_base_that_needs_no_registry(cuda, m):
    # the local Debian stand-in (nox -s base-image) replaces both images where they cannot be pulled
    assert m.stand_in_for(cuda.builder_image) is not None and m.stand_in_for(cuda.test_image) is not None


@pytest.mark.parametrize("soname", CUDA_SONAMES)
def test_cuda_and_torch_libraries_are_never_grafted(cuda, soname):
    from fnmatch import fnmatch

    assert any(fnmatch(soname, g) for g in cuda.auditwheel_exclude), f"{soname} would be grafted into the wheel"


def test_nothing_else_is_excluded_by_accident(cuda):
    from fnmatch import fnmatch

    for soname in ("libstdc++.so.6", "libgcc_s.so.1", "libc.so.6", "libpython3.12.so.1.0", "libm.so.6"):
        assert not any(fnmatch(soname, g) for g in cuda.auditwheel_exclude), soname


# ----------------------------------------------------------------------------------------- the Dockerfile
def test_dockerfile_has_the_contract_targets_and_bases(cuda):
    text = DOCKERFILE.read_text()
    assert not text.startswith("# syntax="), "no syntax line: hosts without registry access must build"
    got = stages(text)
    assert got == {
        "compilers": "${BUILDER_IMAGE}",
        "toolkit-cpu": "compilers",
        "toolkit-cuda": "compilers",
        "builder": "toolkit-${ACCELERATOR}",  # the row's accelerator picks its toolkit stage
        "build": "builder",
        "wheel": "scratch",
        "node": "${TEST_IMAGE}",
        "install": "node",
        "test-deps": "node",
        "test": "test-deps",
    }
    rows = matrix.load(REPO / "configs" / "toolchains.toml").toolchains.values()
    assert {f"toolkit-{t.accelerator}" for t in rows if t.dockerfile == "docker/Dockerfile"} <= set(got)
    host = env.from_environ({})
    inputs = plan.BuildInputs(
        Path("ctx"), DOCKERFILE, "b", "t", Path("pip.conf"), host, "k", locks=locks.lock_args(cuda)
    )
    passed = [a.split("=", 1)[0] for a in plan.build_args(cuda, inputs) if "=" in a]
    for arg in passed:
        assert re.search(rf"^ARG {arg}\b", text, re.M), f"build arg {arg} is passed but not declared"


def _stage_text(text: str, name: str) -> str:
    parts = re.split(r"^FROM\s+", text, flags=re.M)
    return next(p for p in parts if re.match(rf"\S+\s+AS\s+{name}\s*$", p.splitlines()[0], re.I))


def test_test_stage_installs_no_compiler_and_builder_stage_does():
    text = DOCKERFILE.read_text()
    test = "".join(_stage_text(text, name) for name in ("node", "test-deps", "test"))
    for compiler in ("g++", "gcc", "clang", "build-essential", "python3-dev", "cuda-nvcc"):
        assert compiler not in test, f"the test image must stay compiler-free ({compiler})"
    builder = _stage_text(text, "compilers") + _stage_text(text, "toolkit-cuda")
    for tool in ("g++", "cmake", "ninja-build", "python3-dev", "cuda_toolkit.py"):
        assert tool in builder


def _runs(text: str) -> list[str]:
    """The Dockerfile's RUN instructions, each joined across its continuation lines."""
    return [run for run in re.sub(r"\\\n\s*", " ", text).splitlines() if run.startswith("RUN ")]


def test_secrets_are_mounted_never_copied():
    """pip reads the index and the CA bundle from BuildKit secrets: every RUN that installs from an index (a lock,
    through steps.sh) mounts both, steps.sh points pip at the mounted pipconf, and no instruction copies them."""
    text = DOCKERFILE.read_text()
    assert "COPY" not in "".join(line for line in text.splitlines() if "pip.conf" in line or "cacert" in line)
    locks = [run for run in _runs(text) if "steps lock" in run]
    assert len(locks) >= 3, "the builder, install and test locks are installed through steps.sh"
    for run in locks:
        assert "--mount=type=secret,id=pipconf" in run and "--mount=type=secret,id=cacert" in run, run
    for run in _runs(text):
        assert "pip install" not in run or "--no-index" in run, f"pip from an index outside steps.sh: {run}"
    steps = (REPO / "docker" / "scripts" / "steps.sh").read_text()
    lock = steps[steps.index("step_lock()") : steps.index("step_wheel()")]
    assert "PIP_CONFIG_FILE=/run/secrets/pipconf" in lock and "--require-hashes" in lock


def test_vendor_requirement_files_exist_and_are_pinned():
    for name in ("requirements-build.txt", "requirements-test.txt"):
        lines = [
            line.strip()
            for line in (REPO / "docker" / "cuda" / name).read_text().splitlines()
            if line.strip() and not line.startswith("#")
        ]
        assert lines and all(re.fullmatch(r"[A-Za-z0-9_.-]+(\[[a-z,]+\])?==[\w.]+", line) for line in lines), lines
    test_reqs = (REPO / "docker" / "cuda" / "requirements-test.txt").read_text()
    assert "matplotlib" in test_reqs, "bench.png needs matplotlib"


# ------------------------------------------------------------------------------------------ the dry run
@pytest.fixture
def empty_daemon(monkeypatch):
    """A docker daemon like this CI machine's: reachable, no images, runc only; no GPU device, no toolkit hook."""
    monkeypatch.setattr(dockercli, "find_client", lambda environ=None, probe=None, which=None: CLIENT)
    monkeypatch.setattr(dockercli, "check_daemon", lambda client, probe=None: "20.10.24")
    monkeypatch.setattr(dockercli, "inspect_image", lambda client, ref, probe=None: None)
    monkeypatch.setattr(dockercli, "runtime_names", lambda client, probe=None: ["io.containerd.runc.v2", "runc"])
    monkeypatch.setattr(gpu, "device_nodes", lambda dev=None: [])
    monkeypatch.setattr(gpu, "find_hook", lambda which=None: None)


CLIENT = dockercli.DockerClient("docker", "20.10.24", "builtin")


def dry_flow(repo: Path, mx: matrix.Matrix, lines: list[str], *posargs: str) -> flow.Flow:
    opts = options.read(["--dry-run", *posargs], environ={"PATH": ""})
    return flow.Flow(repo, mx, opts, echo=lines.append)


def printed_commands(out: str) -> list[list[str]]:
    import shlex

    return [shlex.split(line) for line in out.splitlines() if " build " in line or " run " in line]


def test_build_cuda_dry_run_plans_both_builds_and_runs_nothing(fake_repo, empty_daemon, capsys):
    repo, mx = fake_repo
    lines: list[str] = []
    summary = Summary("cuda")
    pipeline.build(dry_flow(repo, mx, lines), "cuda", summary)
    cmds = printed_commands(capsys.readouterr().out)
    assert [c[c.index("--target") + 1] for c in cmds] == ["build", "wheel"]
    cuda = mx.toolchain("cuda")
    for c in cmds:
        assert c[0] == "DOCKER_BUILDKIT=1" and c[1:3] == ["docker", "build"]
        assert c[c.index("-f") + 1] == str(repo / "docker" / "Dockerfile")
        args = dict(c[i + 1].split("=", 1) for i, a in enumerate(c) if a == "--build-arg" and "=" in c[i + 1])
        assert args["BUILDER_IMAGE"] == cuda.builder_image and args["TEST_IMAGE"] == cuda.test_image
        # the plan is the row: what the matrix says is what docker is told
        assert args["PYTHON_VERSION"] == cuda.python and args["VARIANT"] == cuda.variant
        # torch and every other package come from the row's locks (build_tools/locks.py)
        assert args["BUILDER_LOCK"] == "locks/cuda-builder-py311.txt"
        assert args["TEST_LOCK"] == "locks/cuda-test-py312.txt"  # the GPU nodes' Python
        assert args["SOURCE_DATE_EPOCH"].isdigit()
        excluded = args["AUDITWHEEL_EXCLUDE"].split()
        assert excluded == list(cuda.auditwheel_exclude)
        # never grafted: torch and the CUDA runtime come with the user's torch (its nvidia-* wheels)
        for glob in ("libcudart.so*", "libcuda.so*", "libnccl*.so*", "libtorch*.so*", "libc10*.so*"):
            assert glob in excluded
        assert "--gpus=all" not in c, "building needs no GPU"
    assert "-t" in cmds[0] and cmds[0][cmds[0].index("-t") + 1].startswith("torch-fl/cuda-builder:")
    assert any(a.startswith("type=local,dest=") and f".{cuda.variant}.tmp-" in a for a in cmds[1])
    assert [(s.name, s.status) for s in summary.stages] == [("stage build context", "ran"), ("build wheel", "planned")]
    text = "\n".join(lines)
    assert f"base image {cuda.builder_image} is not present locally" in text and "nox -s base-image" in text
    assert f"[dry-run] pull {cuda.builder_image}" in text, "a dry run plans the pull a real run would try"
    assert not (repo / "wheels" / cuda.variant).exists() and not (repo / "build" / "logs").exists()


def test_test_cuda_dry_run_reports_the_missing_gpu_and_plans_a_gpu_container(fake_repo, empty_daemon, capsys):
    repo, mx = fake_repo
    lines: list[str] = []
    summary = Summary("cuda")
    pipeline.test(dry_flow(repo, mx, lines, "--", "-k", "add"), "cuda", summary)
    run = [c for c in printed_commands(capsys.readouterr().out) if c[:2] == ["docker", "run"]]
    assert len(run) == 1
    argv = run[0]
    assert "--gpus=all" in argv and "FLAGOS_ACCELERATOR=cuda" in argv
    image = argv[argv.index("python") - 1]
    assert image.startswith("torch-fl/cuda-test:")
    assert argv[argv.index("--markers") + 1] == "" and argv[argv.index("--accelerator") + 1] == "cuda"
    assert argv[-3:] == ["--", "-k", "add"]
    assert [s.status for s in summary.stages][-2:] == ["planned", "planned"]
    # this machine has no GPU runtime visible to the (absent) daemon: the dry run says a real run would stop
    assert any(line.startswith("dry run: a real run would stop here: test-cuda needs") for line in lines)


def test_plan_of_the_cuda_test_run_keeps_the_row_flags_after_the_environment(cuda, tmp_path):
    site = plan.Site("docker", cuda, "img:1", tmp_path / "r", env.from_environ({}), user="1:1")
    c = plan.plan_test_run(site, bench="short", pytest_args=[], suites=("routing", "bench"))
    argv = list(c.argv)
    assert argv.index("-e") < argv.index("--gpus=all") < argv.index("img:1")
    assert argv[argv.index("--bench") + 1] == "short"


@pytest.mark.parametrize(("asked", "ran"), [("short", "none"), ("full", "full"), ("none", "none")])
def test_a_row_without_the_bench_suite_runs_no_short_benchmark(cuda, tmp_path, asked, ran):
    site = plan.Site("docker", cuda, "img:1", tmp_path / "r", env.from_environ({}), user="1:1")
    c = plan.plan_test_run(site, bench=asked, pytest_args=[], suites=("routing", "correctness"))
    assert c.argv[c.argv.index("--bench") + 1] == ran


def _cuda_toolkit():
    import importlib.util

    spec = importlib.util.spec_from_file_location("torch_fl_cuda_toolkit", REPO / "docker" / "cuda" / "cuda_toolkit.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_composed_toolkit_must_be_one_release_nvvm_included():
    ct = _cuda_toolkit()
    cuda, pin = ct.torch_cuda_release(["cuda-toolkit[cudart]==13.0.2; extra == 'x'"], "cuda = '13.0'\nhip = None\n")
    assert (cuda, pin) == ("13.0", "13.0.2")
    good = {
        "cuda-toolkit": "13.0.2",
        "nvidia-cuda-nvcc": "13.0.88",
        "nvidia-nvvm": "13.0.88",
        "nvidia-cuda-runtime": "13.0.96",
        "nvidia-cuda-crt": "13.0.88",
        "nvidia-cuda-cccl": "13.0.85",
    }
    assert ct.release_problems(cuda, pin, good) == []
    # the drift of 2026-10: nvidia-cuda-nvcc asks for any nvidia-nvvm, and 13.5 breaks ptxas 13.0
    (problem,) = ct.release_problems(cuda, pin, {**good, "nvidia-nvvm": "13.5.37"})
    assert "nvidia-nvvm 13.5.37 is not of torch's CUDA release 13.0" in problem and "nox -s lock" in problem
    missing = ct.release_problems(cuda, pin, {**good, "nvidia-nvvm": None})
    assert any("nvidia-nvvm is not installed" in p for p in missing)
    older = ct.release_problems(cuda, pin, {**good, "cuda-toolkit": "13.0.1"})
    assert any("torch requires 13.0.2" in p for p in older)
    with pytest.raises(SystemExit, match="not a CUDA build"):
        ct.torch_cuda_release([], "cuda = None\n")


def test_cuda_12_wheels_are_checked_by_their_own_names():
    ct = _cuda_toolkit()
    cuda, pin = ct.torch_cuda_release(["nvidia-cuda-runtime-cu12==12.8.90"], "cuda: Optional[str] = '12.8'\n")
    assert (cuda, pin) == ("12.8", None)
    good = {
        "nvidia-cuda-nvcc-cu12": "12.8.93",
        "nvidia-cuda-runtime-cu12": "12.8.90",
        "nvidia-cuda-cccl-cu12": "12.8.90",
    }
    assert ct.release_problems(cuda, pin, good) == []
    (problem,) = ct.release_problems(cuda, pin, {**good, "nvidia-cuda-nvcc-cu12": "12.9.86"})
    assert "nvidia-cuda-nvcc-cu12 12.9.86 is not of torch's CUDA release 12.8" in problem
    with pytest.raises(SystemExit, match="not of CUDA 11"):
        ct.toolkit("11.8")


def test_cuda_12_components_become_one_tree_beside_nvcc(tmp_path):
    ct = _cuda_toolkit()
    nvidia = tmp_path / "nvidia"
    files = {
        "cuda_nvcc/bin/nvcc": "nvcc",
        "cuda_nvcc/nvvm/bin/cicc": "cicc",
        "cuda_nvcc/include/crt/host_config.h": "crt",
        "cuda_runtime/include/cuda_runtime.h": "rt",
        "cuda_runtime/lib/libcudart.so.12": "so",
        "cuda_cccl/include/cuda/std/cstddef": "cccl",
        "cuda_cccl/include/crt/host_config.h": "not nvcc's",
        "cuda_runtime/__init__.py": "",
    }
    for rel, text in files.items():
        (nvidia / rel).parent.mkdir(parents=True, exist_ok=True)
        (nvidia / rel).write_text(text)
    dest = tmp_path / "cuda"
    ct.merge_parts([nvidia / p for p in ct.CU12_PARTS], dest)
    merged = ("bin/nvcc", "nvvm/bin/cicc", "include/cuda_runtime.h", "lib/libcudart.so.12", "include/cuda/std/cstddef")
    for rel in merged:
        assert (dest / rel).is_file(), rel
    assert (dest / "include/crt/host_config.h").read_text() == "crt"  # nvcc's own comes first
    assert not (dest / "__init__.py").exists()
    assert (dest / "bin/nvcc").stat().st_ino == (nvidia / "cuda_nvcc/bin/nvcc").stat().st_ino  # a hard link
