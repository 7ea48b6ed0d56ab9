"""Routes on a CUDA machine (FLAGOS_ACCELERATOR=cuda): native re-tags to CUDA tensors, FlagGems is
taken when importable. Skipped on machines without an NVIDIA GPU."""

from __future__ import annotations

import pytest
import torch

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(
        not torch.cuda.is_available(), reason="needs an NVIDIA GPU (torch.cuda.is_available() is False)"
    ),
]

CHECKS = r"""
import os, torch, torch_fl
seen = []
def probe_add(a, b, alpha=1):
    seen.append([a.device.type, b.device.type])
    return torch.add(a, b, alpha=alpha)
torch_fl.register_provider("probe", {"add.Tensor": probe_add})
x = torch.randn(1000, generator=torch.Generator().manual_seed(0))
fx = x.to("flagos")
for label, route in ROUTES.items():
    os.environ["FLAGOS_OP_add__Tensor"] = route
    torch_fl.reload_routes()
    mark(label)
    out = fx + fx
    mark(label + ":after")
    report(label, [str(out.device), torch.allclose(out.cpu(), x + x)])
report("seen", seen)
"""


def _run(module_child, routes):
    return module_child(f"ROUTES = {routes!r}\n" + CHECKS, {"FLAGOS_ACCELERATOR": "cuda", "FLAGOS_LOG": "dispatch"})


@pytest.fixture(scope="module")
def child(module_child):
    return _run(module_child, {"native": "native", "cuda": "cuda", "cpu": "cpu", "probe": "probe"})


@pytest.mark.parametrize("label, route", [("native", "native"), ("cuda", "native"), ("cpu", "cpu"), ("probe", "probe")])
def test_route_on_cuda(child, label, route):
    assert child.dispatch(label) == [("add.Tensor", route)], child.describe()
    assert child.data[label] == ["flagos:0", True]


def test_provider_receives_cuda_tensors(child):
    assert child.data["seen"] == [["cuda", "cuda"]]


@pytest.mark.flaggems
def test_flaggems_chain_takes_flaggems(module_child):
    pytest.importorskip("flag_gems", reason="flag_gems is not installed")
    child = _run(module_child, {"gems": "flaggems, native"})
    assert child.dispatch("gems") == [("add.Tensor", "flaggems")], child.describe()
    assert child.data["gems"] == ["flagos:0", True]
