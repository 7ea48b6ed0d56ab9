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


ATTENTION = r"""
import torch, torch_fl
aten = torch.ops.aten
g = torch.Generator().manual_seed(0)
q, k, v, grad = (torch.randn(2, 4, 64, 32, generator=g) for _ in range(4))
def run(device):  # the fused kernels themselves, forward then backward (no autograd: both devices in one process)
    q_, k_, v_, grad_ = (t.to(device) for t in (q, k, v, grad))
    out, lse, seed, offset = aten._scaled_dot_product_efficient_attention(q_, k_, v_, None, True)
    grads = aten._scaled_dot_product_efficient_attention_backward(grad_, q_, k_, v_, None, out, lse, seed, offset, 0.0,
                                                                  [True, True, True, False])
    return [t.cpu() for t in (out, lse, *grads[:3])], str(out.device)
mark("efficient")
got, device = run("flagos")
mark("efficient:after")
want, _ = run("cuda")
report("efficient", {"device": device, "equal": [torch.equal(a, b) for a, b in zip(got, want)]})
fast = torch_fl.fast_path_ops()
report("fast", [op in fast for op in ("_scaled_dot_product_efficient_attention",
                                      "_scaled_dot_product_efficient_attention_backward")])
"""


def test_efficient_attention_on_flagos_matches_cuda(module_child):
    # torch's fused attention for float32 on CUDA, forward and backward: unboxed entries (fast_ops_attention.cpp)
    child = module_child(ATTENTION, {"FLAGOS_ACCELERATOR": "cuda", "FLAGOS_LOG": "dispatch"})
    assert child.data["fast"] == [True, True], child.describe()
    assert [d for d in child.dispatch("efficient") if "attention" in d[0]] == [
        ("_scaled_dot_product_efficient_attention", "native"),
        ("_scaled_dot_product_efficient_attention_backward", "native"),
    ], child.describe()
    assert child.data["efficient"] == {"device": "flagos:0", "equal": [True] * 5}, child.describe()
