"""The unboxed fast path (csrc/dispatch/fast_ops.cpp) is the router for its ops: same routes, same
overrides, same dispatch log, same results as the boxed path, and results that are proper flagos
tensors (device index, memory accounting, usable storage)."""

from __future__ import annotations

import pytest

CHECKS = r"""
import os
import torch, torch.nn.functional as F, torch_fl

fast = sorted(torch_fl.fast_path_ops())
report("fast", fast)
report("properties", {op: {
    "reaches_router": torch_fl.reaches_router(op),
    "implicit": torch._C._dispatch_has_kernel_for_dispatch_key("aten::" + op, "CompositeImplicitAutograd"),
    "device_kernel": op in torch_fl._DeviceKernels(),
    "route": torch_fl.route(op).route,
} for op in fast})

g = torch.Generator().manual_seed(0)
a, b = torch.randn(4, 6, generator=g), torch.randn(4, 6, generator=g)
m, v = torch.randn(6, 5, generator=g), torch.randn(6, generator=g)
bat = torch.randn(2, 4, 6, generator=g)
CALLS = {
    "add.Tensor": lambda x, y, *_: x + y * 2,
    "sub.Tensor": lambda x, y, *_: x - y,
    "mul.Tensor": lambda x, y, *_: x * y,
    "div.Tensor": lambda x, y, *_: x / (y.abs() + 1),
    "where.self": lambda x, y, *_: torch.where(x > 0, x, y),
    "pow.Tensor_Scalar": lambda x, *_: x.pow(3),
    "neg": lambda x, *_: -x, "exp": lambda x, *_: x.exp(), "rsqrt": lambda x, *_: (x.abs() + 1).rsqrt(),
    "tanh": lambda x, *_: x.tanh(), "sigmoid": lambda x, *_: x.sigmoid(), "relu": lambda x, *_: x.relu(),
    "silu": lambda x, *_: F.silu(x), "gelu": lambda x, *_: F.gelu(x, approximate="tanh"),
    "mm": lambda x, y, w, *_: x @ w, "bmm": lambda x, y, w, vec, t: torch.bmm(t, t.transpose(1, 2)),
    "addmm": lambda x, y, w, vec, t: torch.addmm(vec[:5], x, w, beta=0.5),
    "sum.dim_IntList": lambda x, *_: x.sum(1, keepdim=True), "mean.dim": lambda x, *_: x.mean(0),
    "_softmax": lambda x, *_: x.softmax(1), "_log_softmax": lambda x, *_: x.log_softmax(0),
    "native_layer_norm": lambda x, y, w, vec, *_: F.layer_norm(x, (6,), vec, vec),
}
report("untested", sorted(set(fast) - set(CALLS)))
host_args = (a, b, m, v, bat)
for device in ("flagos", "flagos:1"):
    args = [t.to(device) for t in host_args]
    for op, fn in CALLS.items():
        label = f"{op}@{device}"
        mark(label)
        out = fn(*args)
        mark(label + ":after")
        report(label, {"got": host(out), "want": host(fn(*host_args))})

# a result of the fast path is a flagos tensor like any other
x = a.to("flagos:1")
before = torch.flagos.memory_allocated(1)
y = x.exp()
report("result", {"device": str(y.device), "storage_device": str(y.untyped_storage().device),
                  "grown": torch.flagos.memory_allocated(1) - before, "nbytes": y.untyped_storage().nbytes()})
y.resize_(100)  # its storage grows through the flagos allocator
y.fill_(2.0)
report("resized", host(y[-3:]))
del y
report("freed", torch.flagos.memory_allocated(1) - before)

# autograd through fast-path ops
w = m.clone().requires_grad_(True)
wf = m.to("flagos").requires_grad_(True)
F.layer_norm(F.gelu(a @ w), (5,)).sum().backward()
F.layer_norm(F.gelu(a.to("flagos") @ wf), (5,)).sum().backward()
report("grad", {"got": host(wf.grad), "want": host(w.grad)})

# routes published later reach the fast path too
os.environ["FLAGOS_OP_mul__Tensor"] = "cpu"
torch_fl.reload_routes()
mark("after_reload")
report("after_reload", host(a.to("flagos") * b.to("flagos")))
mark("after_reload:after")
del os.environ["FLAGOS_OP_mul__Tensor"]
torch_fl.reload_routes()
mark("restored")
a.to("flagos") * b.to("flagos")
mark("restored:after")
"""

ENV = {"FLAGOS_LOG": "dispatch", "FLAGOS_OP_relu": "cpu", "FLAGOS_OP_mm": "cpu"}


@pytest.fixture(scope="module")
def child(module_child):
    return module_child(CHECKS, ENV)


def test_fast_ops_are_routed_entries(child):
    fast = child.data["fast"]
    assert {"add.Tensor", "mul.Tensor", "mm", "native_layer_norm", "_softmax"} <= set(fast), fast
    for op, props in child.data["properties"].items():
        assert props["reaches_router"], op
        assert not props["implicit"], f"{op} is CompositeImplicitAutograd: a flagos kernel skips its decomposition"
        assert not props["device_kernel"], f"{op} is listed as a bookkeeping kernel, so its routes would be refused"
    assert child.data["properties"]["relu"]["route"] == "cpu"
    assert child.data["properties"]["add.Tensor"]["route"] == "native"
    assert child.data["untested"] == [], "every fast-path op needs a call in CALLS"


@pytest.mark.parametrize("device", ["flagos", "flagos:1"])
def test_fast_ops_match_the_host_and_log_their_route(child, host_result, device):
    for op in child.data["fast"]:
        label = f"{op}@{device}"
        result = child.data[label]
        want_device = "flagos:0" if device == "flagos" else device
        assert host_result(result["got"], want_device) == result["want"] or _close(result), label
        routes = child.routes_of(op, label)
        expected = "cpu" if op in ("relu", "mm") else "native"
        assert routes and set(routes) == {expected}, f"{label}: {child.dispatch(label)}"


def _close(result) -> bool:
    import math

    def flat(v):
        if isinstance(v, dict):
            return flat(v["values"])
        if isinstance(v, list):
            return [y for x in v for y in flat(x)]
        return [v]

    got, want = flat(result["got"]), flat(result["want"])
    if len(got) != len(want):
        return False
    return all(math.isclose(g, w, rel_tol=1e-5, abs_tol=1e-6) for g, w in zip(got, want, strict=True))


def test_a_fast_result_is_an_ordinary_flagos_tensor(child):
    res = child.data["result"]
    assert res["device"] == "flagos:1" and res["storage_device"] == "flagos:1"
    assert res["grown"] == res["nbytes"] == 4 * 6 * 4, res
    assert child.data["resized"]["values"] == [2.0, 2.0, 2.0]
    assert child.data["freed"] == 0


def test_autograd_through_fast_ops(child, host_result):
    grad = child.data["grad"]
    assert _close({"got": grad["got"], "want": grad["want"]}), grad


def test_reload_reaches_the_fast_path(child):
    assert child.routes_of("mul.Tensor", "after_reload") == ["cpu"]
    assert child.routes_of("mul.Tensor", "restored") == ["native"]
