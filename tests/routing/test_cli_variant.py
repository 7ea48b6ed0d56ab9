"""``python -m torch_fl info`` says whether the installed variant fits this node, and what to install otherwise."""

from __future__ import annotations

import json
from importlib import metadata

import torch


def _node_toolchain() -> str:
    local = torch.__version__.split("+", 1)[1] if "+" in torch.__version__ else ""
    if local.startswith(("cpu", "cu")):
        return local
    return "cu" + torch.version.cuda.replace(".", "") if torch.version.cuda else "cpu"


def test_info_reports_the_installed_variant_and_its_fit(run_module):
    fit = json.loads(run_module(["info", "--json"]).stdout)["variant"]
    version = metadata.version("torch-fl")
    label = version.split("+", 1)[1]
    major, minor = torch.__version__.split(".")[:2]
    # the installed wheel was built against this very torch: same line, same toolchain
    assert fit["installed"] == label
    assert label.startswith(f"pt{major}{int(minor):02d}")
    assert fit["wanted"] == f"pt{major}{int(minor):02d}{_node_toolchain()}"
    if _node_toolchain() == "cpu" or torch.cuda.device_count():
        assert fit["fits"] is True and fit["problems"] == []
    # the pip line pins this very torch and reads the torch-fl page of its line only
    assert f'"torch=={metadata.version("torch")}"' in fit["install"]
    assert f"/{_node_toolchain()}/torch-{major}.{minor}/simple/" in fit["install"]


def test_info_text_and_check_exit_code(run_module):
    fit = json.loads(run_module(["info", "--json"]).stdout)["variant"]
    child = run_module(["info", "--check"], expect_ok=fit["fits"])  # --check exits 1 exactly when it does not fit
    line = next(x for x in child.stdout.splitlines() if x.startswith("variant"))
    if fit["fits"]:
        assert child.rc == 0 and "fits this node" in line
        assert f"pip line for this node: {fit['install']}" in child.stdout
    else:
        assert child.rc == 1 and "does NOT fit" in line
