"""The variant scheme (torch_fl/_variant.py, loaded by path: no torch_fl import) and its fit check."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from packaging.version import Version

REPO = Path(__file__).resolve().parents[3]

_spec = importlib.util.spec_from_file_location("variant_under_test", REPO / "torch_fl" / "_variant.py")
assert _spec is not None and _spec.loader is not None
variant = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = variant
_spec.loader.exec_module(variant)


# (torch version, toolchain label) -> the wheel's local label
LABELS = {
    ("2.13.0+cpu", "cpu"): "pt213cpu",
    ("2.11.0", "cu130"): "pt211cu130",
    ("2.10.0+das.opt1.dtk2604", "dtk2604"): "pt210dtk2604",
    ("2.9.1", "cpu"): "pt209cpu",
}


@pytest.mark.parametrize(("build", "label"), LABELS.items())
def test_label_names_torch_line_and_toolchain(build, label):
    v = variant.make(*build)
    assert v.label == label
    assert variant.parse(label) == v
    assert variant.from_version(f"0.1.0+{label}") == v


def test_labels_of_one_toolchain_sort_like_their_torch_lines():
    # pip prefers the highest version when nothing pins torch yet: pt209 < pt210 < pt213 as PEP 440 local versions
    lines = ["2.9.0", "2.10.0", "2.13.0", "3.0.0"]
    versions = [Version(f"0.1.0+{variant.make(t, 'cpu').label}") for t in lines]
    assert versions == sorted(versions)


def test_builds_of_two_torch_lines_never_collide_and_pin_their_line():
    a, b = variant.make("2.13.0+cpu", "cpu"), variant.make("2.14.1", "cpu")
    assert a.label != b.label
    assert a.torch_requirement == "torch>=2.13,<2.14" and b.torch_requirement == "torch>=2.14,<2.15"


@pytest.mark.parametrize(
    ("torch_version", "cuda", "hip", "toolchain"),
    [
        ("2.13.0+cpu", None, None, "cpu"),
        ("2.11.0+cu130", "13.0", None, "cu130"),
        ("2.11.0", "13.0", None, "cu130"),  # PyPI's default Linux torch: no local tag, a CUDA build
        ("2.11.0", None, None, "cpu"),
        ("2.4.1+das.opt2.dtk2504", None, "6.2", "dtk2504"),
        ("2.5.1+rocm6.2", None, "6.2", "rocm62"),
    ],
)
def test_toolchain_from_torch(torch_version, cuda, hip, toolchain):
    assert variant.toolchain_from_torch(torch_version, cuda, hip) == toolchain


@pytest.mark.parametrize("bad", ["cpu", "0.1.0", "pt2cpu", "pt213", "pt213CPU", "pt213cu"])
def test_bad_labels_are_refused_by_name(bad):
    with pytest.raises(variant.VariantError, match=bad):
        variant.parse(bad)


def test_unknown_toolchain_is_refused_with_the_way_out():
    with pytest.raises(variant.VariantError, match="TORCH_FL_VARIANT"):
        variant.make("2.13.0", "cuda13")


def test_fit_on_a_matching_node_is_clean():
    v = variant.parse("pt211cu130")
    node = variant.Node("2.11.0+cu130", "cu130", devices=8)
    assert variant.fit(v, node, ("cuda", "cpu")) == []
    assert node.wanted == v


def test_fit_names_every_mismatch():
    v = variant.parse("pt213cpu")
    node = variant.Node("2.11.0+cu130", "cu130", devices=0)
    problems = " | ".join(variant.fit(v, node, ("cpu",)))
    assert "torch line: the wheel is for torch 2.13, the node has torch 2.11.0+cu130" in problems
    assert "built for cpu, the node's torch is cu130" in problems
    assert "sees no device" in problems
    assert node.wanted.label == "pt211cu130"


def test_fit_flags_an_extension_without_the_runtime():
    v = variant.parse("pt211cu130")
    assert variant.fit(v, variant.Node("2.11.0", "cu130", 1), ("cpu",)) == [
        "vendor runtime: the extension has cpu, not cuda"
    ]


@pytest.mark.parametrize(
    ("toolchain", "torch_version", "page"),
    [
        ("cpu", "2.13.0+cpu", "cpu/torch-2.13"),
        ("cpu", "2.9.1", "cpu/torch-2.9"),
        ("cu130", "2.11.0+cu130", "cu130/torch-2.11"),
        ("dtk2604", "2.9.0+das.opt1.dtk2604", "dcu/torch-2.9"),  # every DTK release shares dcu/
    ],
)
def test_install_line_pins_the_node_torch_and_reads_only_its_lines_page(toolchain, torch_version, page):
    line = variant.install_line("https://wheels.example/torch-fl/", toolchain, torch_version)
    assert line == (
        f'pip install "torch=={torch_version}" torch-fl '
        f'--extra-index-url "https://wheels.example/torch-fl/{page}/simple/"'
    )
    assert variant.page_path(variant.index_dir(toolchain), variant.torch_line(torch_version)) == page


def test_a_new_environments_line_pins_only_the_torch_line():
    line = variant.pip_line("file:///srv/wheels", "cpu", (2, 13))
    assert line == 'pip install "torch==2.13.*" torch-fl --extra-index-url "file:///srv/wheels/cpu/torch-2.13/simple/"'
