"""Composites the vendor runs as one kernel reach it as one op on flagos too: torch decomposes silu_backward and
mish_backward for a device without a kernel of its own (sigmoid, sub, three muls), where CPU and CUDA launch one
fused kernel. The router takes them by name (torch_fl/routing/dispatcher.py), so a flagos training step launches the
kernels a plain one does, with the same gradients."""

from __future__ import annotations

import pytest

CHECKS = r"""
import torch, torch.nn.functional as F, torch_fl
from torch_fl.routing import dispatcher

report("fused", sorted(dispatcher._vendor_fused_composites()))
report("reach", {op: torch_fl.reaches_router(op) for op in ("silu_backward", "mish_backward")})

x = torch.randn(64, 32)
for name, fn in (("silu", F.silu), ("mish", F.mish)):
    ref = x.clone().requires_grad_()
    fn(ref).pow(2).sum().backward()
    dev = x.to("flagos").requires_grad_()
    y = fn(dev).pow(2).sum()
    mark(name + ":backward")
    y.backward()
    mark(name + ":after")
    diff = (dev.grad.cpu() - ref.grad).abs().max().item()
    report(name, {"device": str(dev.grad.device), "shape": list(dev.grad.shape), "max_abs_diff": diff})
"""


@pytest.fixture(scope="module")
def checks(module_child):
    return module_child(CHECKS, {"FLAGOS_LOG": "dispatch"})


def test_the_vendors_fused_composites_are_found_in_the_dispatcher(checks):
    assert {"silu_backward", "mish_backward"} <= set(checks.data["fused"])
    assert checks.data["reach"] == {"silu_backward": True, "mish_backward": True}


@pytest.mark.parametrize("name", ["silu", "mish"])
def test_the_backward_runs_the_vendors_one_kernel(checks, name):
    ops = [op for op, _ in checks.dispatch(f"{name}:backward")]
    assert f"{name}_backward" in ops, ops
    # the decomposition's parts never reach the device: no sigmoid, no elementwise sub or mul beyond pow's own
    assert not {"sigmoid", "sub_.Tensor", "sub.Tensor", "softplus", "tanh"} & set(ops), ops


@pytest.mark.parametrize("name", ["silu", "mish"])
def test_gradients_equal_the_hosts(checks, name):
    got = checks.data[name]
    assert got["device"] == "flagos:0" and got["shape"] == [64, 32]
    assert got["max_abs_diff"] < 1e-5, got
