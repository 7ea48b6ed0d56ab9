from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from build_tools import matrix, matrix_docs

P = Path("configs/toolchains.toml")

MINIMAL = {
    "schema": 1,
    "build": {"inputs": ["pyproject.toml"], "test_suites": ["routing"]},
    "local_bases": {
        "x/debian:bookworm": {"tool": "debootstrap", "suite": "bookworm", "stands_for": ["debian:bookworm-slim"]}
    },
    "pythons": {
        "3.11": {"source": "bookworm", "image": "debian:bookworm-slim"},
        "3.12": {"source": "host", "image": "debian:bookworm-slim"},
    },
    "toolchains": {
        "cpu": {
            "summary": "cpu",
            "dockerfile": "docker/cpu/Dockerfile",
            "builder_image": "debian:bookworm-slim",
            "test_image": "debian:bookworm-slim",
            "python": "3.11",
            "variant": "cpu",
            "torch": {"requirement": "torch==2.13.0+cpu"},
            "auditwheel": {"exclude": ["libtorch*.so*"]},
            "pytest_markers": "not cuda",
            "accelerator": "cpu",
        }
    },
}


def parse_with(**changes) -> matrix.Matrix:
    data = copy.deepcopy(MINIMAL)
    for dotted, value in changes.items():
        node = data
        *parents, last = dotted.split("__")
        for key in parents:
            node = node[key]
        if value is DELETE:
            del node[last]
        else:
            node[last] = value
    return matrix.parse(data, P)


DELETE = object()


def test_the_real_matrix_loads_and_has_a_working_cpu_row(repo):
    m = matrix.load(repo / "configs" / "toolchains.toml")
    cpu = m.toolchain("cpu")
    assert cpu.python_tag == "cp313"  # the main line tests on Debian sid's Python
    assert cpu.variant == "cpu"
    assert (repo / cpu.dockerfile).is_file()
    assert any(p.startswith("libtorch") for p in cpu.auditwheel_exclude)
    assert any(p.startswith("libc10") for p in cpu.auditwheel_exclude)
    # the public base images have a local stand-in for hosts that cannot pull
    assert m.stand_in_for(cpu.builder_image) is not None
    assert m.stand_in_for(cpu.test_image) is not None


def test_every_toolchain_row_is_complete(repo):
    m = matrix.load(repo / "configs" / "toolchains.toml")
    for toolchain in m.toolchains.values():
        assert toolchain.summary and "\n" not in toolchain.summary
        # every row of a vendor (cpu214, cuda215) keeps its requirement files and locks in that vendor's directory
        assert toolchain.vendor_dir == Path("docker") / toolchain.accelerator
        assert (repo / toolchain.dockerfile).is_file()
        assert toolchain.torch.requirement
        assert toolchain.accelerator
        # a vendor's own tests are never deselected ("" runs everything; GPU tests skip with a reason)
        assert f"not {toolchain.name}" not in toolchain.pytest_markers


def test_build_inputs_exist(repo):
    m = matrix.load(repo / "configs" / "toolchains.toml")
    for entry in m.build.inputs:
        assert (repo / entry).exists(), entry


def test_minimal_parses():
    m = parse_with()
    assert m.toolchain("cpu").torch.index_url == ""
    assert m.toolchain("cpu").docker_run_flags == ()
    assert m.toolchain("cpu").torch.name == "torch"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"toolchains__cpu__python": "3"}, 'toolchains.cpu.python: expected "X.Y"'),
        ({"toolchains__cpu__python": DELETE}, "toolchains.cpu.python: missing (required)"),
        ({"toolchains__cpu__pythn": "3.11"}, "toolchains.cpu.pythn: unknown key"),
        ({"toolchains__cpu__variant": "CPU!"}, "toolchains.cpu.variant: expected a PEP 440 local label"),
        ({"toolchains__cpu__torch": {"requirement": 3}}, "toolchains.cpu.torch.requirement: expected a string"),
        ({"toolchains__cpu__torch": {"requirement": "torch", "from_image": "yes"}}, "toolchains.cpu.torch.from_image"),
        ({"toolchains__cpu__auditwheel": {"exclude": ["torch/lib"]}}, "toolchains.cpu.auditwheel.exclude"),
        ({"toolchains__cpu__auditwheel": {"exclude": "libtorch*.so*"}}, "expected a list of non-empty strings"),
        ({"toolchains__cpu__docker_run": {"flags": ["-v", "/x:/y"]}}, "toolchains.cpu.docker_run.flags"),
        ({"toolchains__cpu__docker_run": {"flags": ["--network=bridge"]}}, "set by the tooling"),
        ({"toolchains__cpu__build_env": {"1BAD": "x"}}, "toolchains.cpu.build_env.1BAD"),
        ({"toolchains__cpu__test_env": {"A": 1}}, "toolchains.cpu.test_env.A: expected a string"),
        ({"toolchains__cpu__builder_image": "Debian:Bookworm"}, "toolchains.cpu.builder_image"),
        ({"schema": 2}, "schema: expected 1"),
        ({"build__inputs": ["../outside"]}, "build.inputs"),
        # the benchmark is no script of the matrix (the harness is a tool): a matrix that names one is refused
        ({"build__bench_script": "bench/run.py"}, "build.bench_script: unknown key"),
        ({"local_bases__x/debian:bookworm__tool": "mmdebstrap"}, "tool: only 'debootstrap'"),
        ({"toolchains": {}}, "toolchains: no toolchain tables"),
    ],
)
def test_errors_name_the_file_and_the_key(changes, message):
    with pytest.raises(matrix.MatrixError) as err:
        parse_with(**changes)
    text = str(err.value)
    assert text.startswith(f"{P}: ")
    assert message in text


def test_every_problem_is_reported_at_once_with_the_nearest_key():
    with pytest.raises(matrix.MatrixError) as err:
        parse_with(
            toolchains__cpu__pythn="3.11",
            toolchains__cpu__auditwheel={"exlude": ["libtorch*.so*"]},
            build__inputs=["../outside"],
        )
    lines = str(err.value).splitlines()
    assert all(line.startswith(f"{P}: ") for line in lines)
    said = "\n".join(lines)
    assert "toolchains.cpu.pythn: unknown key (did you mean python?)" in said
    assert "toolchains.cpu.auditwheel.exlude: unknown key (did you mean exclude?)" in said
    assert "toolchains.cpu.auditwheel.exclude: missing (required)" in said
    assert "build.inputs: '../outside' must be a path inside the repository" in said


def test_a_key_is_required_exactly_when_its_field_has_no_default():
    # pytest_markers and auditwheel.exclude have no default, image_hint and docker_run.flags have one
    with pytest.raises(matrix.MatrixError) as err:
        parse_with(toolchains__cpu__pytest_markers=DELETE, toolchains__cpu__auditwheel={})
    assert "toolchains.cpu.pytest_markers: missing (required)" in str(err.value)
    assert "toolchains.cpu.auditwheel.exclude: missing (required)" in str(err.value)
    cpu = parse_with().toolchain("cpu")
    assert (cpu.image_hint, cpu.docker_run_flags) == (matrix.Toolchain.image_hint, ())


def test_unknown_toolchain_lists_the_known_ones():
    with pytest.raises(matrix.MatrixError, match=r"no \[toolchains.rocm\] table \(known toolchains: cpu\)"):
        parse_with().toolchain("rocm")


def test_missing_file_and_bad_toml(tmp_path):
    with pytest.raises(matrix.MatrixError, match="toolchain matrix not found"):
        matrix.load(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("schema = = 1\n")
    with pytest.raises(matrix.MatrixError, match=f"{bad}: not valid TOML"):
        matrix.load(bad)


def test_fingerprint_is_stable_and_tracks_every_field():
    a = parse_with().toolchain("cpu")
    assert a.fingerprint() == parse_with().toolchain("cpu").fingerprint()
    b = parse_with(toolchains__cpu__build_env={"CMAKE_BUILD_PARALLEL_LEVEL": "4"}).toolchain("cpu")
    c = parse_with(toolchains__cpu__auditwheel={"exclude": ["libtorch*.so*", "libc10*.so*"]}).toolchain("cpu")
    assert len({a.fingerprint(), b.fingerprint(), c.fingerprint()}) == 3


def test_stand_in_lookup():
    m = parse_with()
    assert m.stand_in_for("debian:bookworm-slim").name == "x/debian:bookworm"
    assert m.stand_in_for("x/debian:bookworm").name == "x/debian:bookworm"
    assert m.stand_in_for("nvidia/cuda:13.0.0-devel-ubuntu24.04") is None


def test_the_marker_list_follows_the_matrix_and_the_route_providers(repo):
    # tests/conftest.py holds the one marker list (every copy of tests/ carries it): a marker per device
    # vendor (the accelerator its test container selects) and per route provider, and nothing else
    import importlib.util
    import re

    import tomllib

    spec = importlib.util.spec_from_file_location("tests_root_conftest", repo / "tests" / "conftest.py")
    assert spec and spec.loader
    root_conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(root_conftest)
    m = matrix.load(repo / "configs" / "toolchains.toml")
    devices = {c.test_env.get("FLAGOS_ACCELERATOR", "cpu") for c in m.toolchains.values()} - {"cpu"}
    providers = set(tomllib.loads((repo / "configs" / "routes.toml").read_text())["providers"])
    assert set(root_conftest.MARKERS) == devices | providers | {"stress", "host_logic"}
    for toolchain in m.toolchains.values():  # a row's -m expression names only registered markers
        names = set(re.findall(r"[A-Za-z_]\w*", toolchain.pytest_markers)) - {"not", "and", "or"}
        assert names <= set(root_conftest.MARKERS), toolchain.name


def test_the_key_tables_in_docker_readme_are_rendered_from_the_fields(repo):
    readme = (repo / "docker" / "README.md").read_text(encoding="utf-8")
    stale = "docker/README.md's key tables are stale: run `python -m build_tools.matrix_docs`"
    assert matrix_docs.key_docs() in readme, stale


def test_every_key_of_the_matrix_file_is_documented(repo):
    import tomllib

    data = tomllib.loads((repo / "configs" / "toolchains.toml").read_text(encoding="utf-8"))
    documented = set(re.findall(r"^\| `([^`]+)` \|", matrix_docs.key_docs(), re.M))

    def keys(table: dict, prefix: str = "") -> set[str]:
        out = set()
        for k, v in table.items():
            if isinstance(v, dict) and k in ("torch", "auditwheel", "docker_run"):
                out |= keys(v, f"{prefix}{k}.")
            else:
                out.add(prefix + k)
        return out

    used = keys(data["build"])
    for table in [*data["toolchains"].values(), *data["local_bases"].values()]:
        used |= keys(table)
    assert used <= documented, sorted(used - documented)


def test_a_python_is_a_column_each_row_names_from_the_pythons_table():
    m = parse_with(toolchains__cpu__pythons=["3.12", "3.11"], toolchains__cpu__install_pythons=["3.12"])
    cpu = m.toolchain("cpu")
    assert cpu.served_pythons == ("3.11", "3.12") and cpu.checked_pythons == ("3.12",)
    assert m.python("3.12").from_host and m.python("3.12").tag == "cp312"
    with pytest.raises(matrix.MatrixError, match=r"toolchains\.cpu\.pythons: 3\.13: no \[pythons\] table"):
        parse_with(toolchains__cpu__pythons=["3.11", "3.13"])
    with pytest.raises(matrix.MatrixError, match=r"toolchains\.cpu\.pythons: misses 3\.12"):
        parse_with(toolchains__cpu__pythons=["3.11"], toolchains__cpu__install_pythons=["3.12"])


def test_a_rows_one_wheel_is_tagged_abi3_for_the_oldest_python_it_serves():
    data = copy.deepcopy(MINIMAL)
    data["pythons"]["3.10"] = {"source": "host", "image": "debian:bookworm-slim"}
    data["toolchains"]["cpu"]["pythons"] = ["3.12", "3.10", "3.11"]
    cpu = matrix.parse(data, P).toolchain("cpu")
    assert cpu.served_pythons == ("3.10", "3.11", "3.12")
    assert (cpu.wheel_python, cpu.wheel_tag) == ("cp310", "cp310-abi3")
    # without `pythons`, the row serves its test's Python alone
    assert parse_with().toolchain("cpu").wheel_tag == "cp311-abi3"


def test_a_builder_older_than_the_oldest_python_is_refused():
    """scikit-build-core keeps the building interpreter's own tag when wheel.py-api names a newer CPython."""
    pattern = (
        r"toolchains\.cpu\.builder_python: 3\.11 is older than 3\.12, the oldest of pythons: .*cp312-abi3 "
        r".*raise builder_python"
    )
    with pytest.raises(matrix.MatrixError, match=pattern):
        parse_with(
            toolchains__cpu__python="3.12", toolchains__cpu__builder_python="3.11", toolchains__cpu__pythons=["3.12"]
        )
    # a builder newer than the oldest Python tags the wheel for the oldest all the same
    newer = parse_with(toolchains__cpu__builder_python="3.12", toolchains__cpu__pythons=["3.11", "3.12"])
    assert newer.toolchain("cpu").wheel_tag == "cp311-abi3"


def test_a_row_extends_another_and_overrides_what_it_sets():
    data = copy.deepcopy(MINIMAL)
    data["toolchains"]["cpu2"] = {"extends": "cpu", "summary": "two", "torch": {"requirement": "torch==2.12.0"}}
    m = matrix.parse(data, P)
    two = m.toolchain("cpu2")
    assert two.torch.requirement == "torch==2.12.0" and two.summary == "two"
    assert two.auditwheel_exclude == m.toolchain("cpu").auditwheel_exclude  # taken from cpu
    data["toolchains"]["cpu2"]["extends"] = "nope"
    with pytest.raises(matrix.MatrixError, match=r"toolchains\.cpu2\.extends: no \[toolchains\.nope\] table"):
        matrix.parse(data, P)
    data["toolchains"]["cpu2"]["extends"] = "cpu2"
    with pytest.raises(matrix.MatrixError, match="extends itself"):
        matrix.parse(data, P)
