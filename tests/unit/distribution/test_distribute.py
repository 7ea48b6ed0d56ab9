"""index / publish / install-<vendor> flows: which rows share an index, the node image and install runs as data,
and the errors that name the command to run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from build_tools import distribute, env, flow, index, matrix, options, plan

REPO = Path(__file__).resolve().parents[3]
M = matrix.load(REPO / "configs" / "toolchains.toml")


def test_cpu_variant_has_two_torch_lines_and_cuda_one():
    rows = [c.name for c in distribute.line_rows(M, M.toolchain("cpu"))]
    assert rows == ["cpu", "cpu213", "cpu214", "cpu29", "cpu210", "cpu211", "cpu212"]
    cuda = [c.name for c in distribute.line_rows(M, M.toolchain("cuda"))]
    assert cuda == ["cuda", "cuda212", "cuda213", "cuda214"]  # cu130; torch 2.15 is a CUDA 13.2 build
    cu128 = [c.name for c in distribute.line_rows(M, M.toolchain("cuda29"))]
    assert cu128 == ["cuda29", "cuda210"]  # PyPI's torch 2.9 and 2.10 are CUDA 12.8 builds
    assert distribute.variant_dirs(M) == {
        "cpu": "cpu",
        "cu128": "cu128",
        "cu130": "cu130",
        "cu132": "cu132",
        "dcu": "dtk*",
    }


def test_second_cpu_line_builds_cpu_only_against_a_torch_without_its_nvidia_libraries():
    row = M.toolchain("cpu214")
    assert row.variant == "cpu" and row.dockerfile == M.toolchain("cpu").dockerfile
    # the wheelhouse's CPU build of torch 2.13 is the one line built with torch's own dependencies
    assert row.torch.builder_no_deps and not M.toolchain("cpu213").torch.builder_no_deps
    assert row.build_env["SKBUILD_CMAKE_DEFINE"] == "TORCH_FL_VENDOR_RUNTIME=OFF"
    # the builder's lock pins torch alone, without the nvidia-* libraries the test image's lock resolves
    builder = (REPO / "docker/cpu/locks/cpu214-builder-py311.txt").read_text()
    test = (REPO / "docker/cpu/locks/cpu214-test-py311.txt").read_text()
    assert "torch==2.14.1" in builder and "nvidia-" not in builder and "nvidia-cublas" in test
    cmake = (REPO / "CMakeLists.txt").read_text()
    assert 'option(TORCH_FL_VENDOR_RUNTIME "' in cmake


def _stages(dockerfile: Path, *names: str) -> str:
    """The text of the named stages of a Dockerfile (each from its FROM to the next one)."""
    parts = re.split(r"^(?=FROM )", dockerfile.read_text(), flags=re.M)
    found = {m.group(1): part for part in parts if (m := re.match(r"FROM \S+ AS (\S+)", part))}
    return "".join(found[n] for n in names)


def _inputs(tmp_path):
    return plan.BuildInputs(
        tmp_path / "ctx",
        REPO / distribute.NODE_DOCKERFILE,
        "torch-fl/debian:bookworm",
        "torch-fl/debian:bookworm",
        tmp_path / "pip.conf",
        env.from_environ({"PIP_CERT": __file__, "HTTPS_PROXY": "http://user:secret@proxy:3128"}),
        "f" * 64,
    )


def test_node_image_has_python_and_torch_only_and_no_secret_in_args(tmp_path):
    cpu = M.toolchain("cpu213")
    node = distribute.plan_node_image("docker", cpu, _inputs(tmp_path), M.python("3.11"))
    argv = list(node.command.argv)
    assert node.tag == "torch-fl/cpu213-nodecp311:ffffffffffff"
    assert argv[argv.index("-f") + 1].endswith("docker/Dockerfile") and argv[argv.index("--target") + 1] == "install"
    assert "INSTALL_LOCK=locks/cpu213-install-py311.txt" in argv
    assert "PYTHON_VERSION=3.11" in argv and "PYTHON_SOURCE=bookworm" in argv
    assert "TEST_IMAGE=torch-fl/debian:bookworm" in argv
    assert f"id=pipconf,src={tmp_path / 'pip.conf'}" in argv
    assert "HTTPS_PROXY" in argv and not any("user:secret" in a for a in argv)  # the value stays in docker's env
    assert "org.torch-fl.role=node" in argv  # `nox -s clean` finds it
    text = _stages(REPO / distribute.NODE_DOCKERFILE, "node", "install")
    for compiler in ("g++", "gcc", "python3-dev", "cmake"):
        assert compiler not in text
    runs = " ".join(line for line in text.splitlines() if line.startswith("RUN"))
    installs_torch_fl = re.search(r"torch[-_]fl[^/]*\.whl|install[^\n]*torch[-_]fl(?![-_/])", runs)
    assert not installs_torch_fl, "the node image holds no torch-fl (its /opt/torch-fl/ steps script is tooling)"


@pytest.mark.parametrize("how", distribute.HOWS)
def test_install_runs_have_no_network_and_a_read_only_index(tmp_path, how):
    cmd = distribute.plan_install_run("docker", M.toolchain("cpu"), "img", tmp_path / "cpu", how, "pt213cpu")
    argv = list(cmd.argv)
    assert argv[argv.index("--network") + 1] == "none"
    assert argv[argv.index("-v") + 1] == f"{tmp_path / 'cpu'}:/index:ro"
    assert argv[-6:] == ["--how", how, "--index", "/index", "--expect", "pt213cpu"]
    assert "FLAGOS_ACCELERATOR=cpu" in argv


def test_install_checks_include_the_readme_line_with_a_second_torch_index(tmp_path):
    assert distribute.HOWS == ("http", "file", "find-links", "extra-index")
    argv = distribute.plan_install_run("docker", M.toolchain("cpu214"), "img", tmp_path, "extra-index", "pt214cpu").argv
    assert argv[argv.index("--how") + 1] == "extra-index" and argv[argv.index("--network") + 1] == "none"
    smoke = (REPO / "docker" / "scripts" / "install_smoke.py").read_text()
    assert 'HOWS = ("http", "file", "find-links", "extra-index")' in smoke  # the script accepts what is planned


def test_a_gpu_rows_install_smoke_runs_on_the_emulation_runtime(tmp_path):
    argv = list(distribute.plan_install_run("docker", M.toolchain("cuda"), "img", tmp_path, "http", "pt211cu130").argv)
    envs = [argv[i + 1] for i, a in enumerate(argv) if a == "-e"]
    assert envs[-1] == "FLAGOS_ACCELERATOR=cpu"  # the last -e wins over the row's test_env
    with pytest.raises(ValueError, match="ftp"):
        distribute.plan_install_run("docker", M.toolchain("cpu"), "img", tmp_path, "ftp", "x")


@pytest.mark.parametrize(
    ("vendor", "torch_version", "cuda", "label"),
    [
        ("cpu", "2.13.0+cpu", None, "pt213cpu"),
        ("cpu214", "2.14.1", "13.0", "pt214cpu"),
        ("cuda", "2.11.0", "13.0", "pt211cu130"),
    ],
)
def test_expected_label_is_the_node_torch_line_and_the_rows_toolchain(vendor, torch_version, cuda, label):
    assert distribute._expected_label(torch_version, cuda, M.toolchain(vendor)) == label


def _fake_flow(tmp_path):
    repo = tmp_path / "repo"
    (repo / "wheels").mkdir(parents=True)
    return flow.Flow(repo, M, options.Options(environ={}), echo=lambda s: None)


def test_install_names_the_build_or_index_command_that_is_missing(tmp_path, wheel_factory):
    f = _fake_flow(tmp_path)
    with pytest.raises(flow.UserError, match="nox -s build-cpu`"):
        distribute.require_index(f, M.toolchain("cpu"))
    d = f.repo / "wheels" / "cpu"
    a = wheel_factory(d, "pt215cpu")
    f.state.write("cpu", wheel=a.name)
    with pytest.raises(flow.UserError, match="nox -s index"):
        distribute.require_index(f, M.toolchain("cpu"))
    index.build(d, "cpu")
    rows = distribute.line_rows(M, M.toolchain("cpu"))
    with pytest.raises(flow.UserError, match="holds one torch line.*build-cpu214"):
        distribute.offered(f, M.toolchain("cpu"), rows)  # pip must have a line to refuse
    for label in ("pt209cpu", "pt214cpu"):
        wheel_factory(d, label)
    with pytest.raises(flow.UserError, match="nox -s index"):
        distribute.require_index(f, M.toolchain("cpu"))  # new wheels make the index stale
    index.build(d, "cpu")
    labels = [x.label for x in distribute.offered(f, M.toolchain("cpu"), rows)]
    (d / "simple").mkdir()  # a variant-wide page would offer every line to every node
    with pytest.raises(flow.UserError, match="variant-wide.*nox -s index"):
        distribute.require_index(f, M.toolchain("cpu"))
    (d / "simple").rmdir()
    assert sorted(labels) == ["pt209cpu", "pt214cpu", "pt215cpu"]


def test_publish_refuses_a_bad_destination(tmp_path):
    f = _fake_flow(tmp_path)
    with pytest.raises(flow.UserError, match="usage: nox -s publish -- DEST"):
        distribute.publish_all(f, None, [])
    with pytest.raises(flow.UserError, match="inside wheels/"):
        distribute.publish_all(f, None, [str(f.repo / "wheels" / "x")])


def test_index_all_reports_nothing_to_index(tmp_path):
    from build_tools.summary import Summary

    with pytest.raises(flow.UserError, match="run `nox -s build-<toolchain>` first"):
        distribute.index_all(_fake_flow(tmp_path), Summary("index"))


def test_cli_usage_and_state_roundtrip(tmp_path, capsys):
    assert distribute.main(["bogus"]) == 2
    assert "usage" in capsys.readouterr().err
    f = _fake_flow(tmp_path)
    f.state.write("cpu", wheel="w.whl")
    assert json.loads(f.state.path("cpu").read_text())["wheel"] == "w.whl"


def test_publish_prints_each_lines_pip_line_and_copies_only_line_pages(tmp_path, wheel_factory):
    from build_tools.summary import Summary

    said = []
    f = flow.Flow(tmp_path / "repo", M, options.Options(environ={}), echo=said.append)
    d = f.repo / "wheels" / "cpu"
    wheel_factory(d, "pt213cpu")
    wheel_factory(d, "pt214cpu")
    dest = tmp_path / "share"
    (out,) = distribute.publish_all(f, Summary("publish"), [str(dest)])
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["torch-2.13", "torch-2.14"]
    assert not (out / "simple").exists()
    want = f'pip install "torch==2.13.*" torch-fl --extra-index-url "{dest.as_uri()}/cpu/torch-2.13/simple/"'
    assert any(want in s for s in said), said
    assert "wheels/cpu/torch-2.14/simple/: 1 wheel(s) (written)" in said
