"""Routes chosen by FLAGOS_OP_<op> at start-up, confirmed call by call from the dispatch log."""

from __future__ import annotations

import pytest

# One child runs every check below: the child reports (flagos result, CPU reference) per label,
# and its stderr between two marks holds the dispatch lines of exactly that call.
CHECKS = r"""
import torch, torch_fl

def check(label, fn, *args):
    flagos_args = [a.to(DEVICE) if isinstance(a, torch.Tensor) else a for a in args]
    mark(label)
    out = fn(*flagos_args)
    mark(label + ":after")
    report(label, {"got": host(out), "want": host(fn(*args))})
    return out, flagos_args

DEVICE = "flagos"
g = torch.Generator().manual_seed(0)
a = torch.randn(4, 5, generator=g)
b = torch.randn(4, 5, generator=g)
row = torch.randn(5, generator=g)
idx = torch.tensor([3, 0, 2])

check("add", lambda x, y: x + y, a, row)                       # broadcast through the cpu route
check("mul", lambda x, y: x * y, a, b)
check("sub", lambda x, y: x - y, a, b)                         # 'cuda' is the alias of native
check("atan2", torch.atan2, a, b)                              # any aten op, no conf line needed
check("sum_dim", lambda x: x.sum(1), a)
check("max_dim", lambda x: x.max(1), a)                        # two outputs back from the host
check("cat", lambda x, y: torch.cat([x, y], 0), a, b)          # a list input
check("index_select", lambda x, i: x.index_select(0, i), a, idx)
check("noncontig", lambda x, y: x.t() + y.t(), a, b)           # strided inputs to the cpu route

out, (x, y) = check("inplace", lambda x, y: x.add_(y), a.clone(), b)
report("inplace_identity", out is x)

mark("out_resized")
o = torch.empty(0, device=DEVICE)
r = torch.add(a.to(DEVICE), b.to(DEVICE), out=o)
mark("out_resized:after")
report("out_resized", {"same": r is o, "got": host(o), "want": host(a + b)})

DEVICE = "flagos:1"
check("add_dev1", lambda x, y: x + y, a, b)                    # cpu route keeps the device index
check("atan2_dev1", torch.atan2, a, b)

routes = torch_fl.routes()
report("origins", {op: [routes[op].route, routes[op].origin] for op in routes if op != "default"})
report("route_mul", [torch_fl.route("mul.Tensor").route, torch_fl.route("mul.Tensor").origin])
report("route_untouched", [torch_fl.route("div.Tensor").route, torch_fl.route("div.Tensor").origin])
"""

OVERRIDES = {
    "FLAGOS_OP_add__Tensor": "cpu",
    "FLAGOS_OP_mul__Tensor": "native",
    "FLAGOS_OP_sub__Tensor": "cuda",
    "FLAGOS_OP_atan2": "cpu",
    "FLAGOS_OP_sum__dim_IntList": "cpu",
    "FLAGOS_OP_max__dim": "cpu",
    "FLAGOS_OP_cat": "cpu",
    "FLAGOS_OP_index_select": "cpu",
    "FLAGOS_OP_add___Tensor": "cpu",  # add_.Tensor: the op name has its own underscore
    "FLAGOS_OP_add__out": "cpu",
}

# label -> the dispatch lines that call must produce, exactly
EXPECTED = {
    "add": [("add.Tensor", "cpu")],
    "mul": [("mul.Tensor", "native")],
    "sub": [("sub.Tensor", "native")],
    "atan2": [("atan2", "cpu")],
    "sum_dim": [("sum.dim_IntList", "cpu")],
    "max_dim": [("max.dim", "cpu")],
    "cat": [("cat", "cpu")],
    "index_select": [("index_select", "cpu")],
    "noncontig": [("add.Tensor", "cpu")],
    "inplace": [("add_.Tensor", "cpu")],
    "out_resized": [("add.out", "cpu")],
    "add_dev1": [("add.Tensor", "cpu")],
    "atan2_dev1": [("atan2", "cpu")],
}


@pytest.fixture(scope="module")
def child(module_child):
    return module_child(CHECKS, {**OVERRIDES, "FLAGOS_LOG": "dispatch"})


@pytest.mark.parametrize("label", sorted(EXPECTED))
def test_call_takes_overridden_route(child, label):
    assert child.dispatch(label) == EXPECTED[label], child.describe()


@pytest.mark.parametrize("label", sorted(set(EXPECTED) - {"out_resized"}))
def test_routed_result_equals_cpu(child, label, host_result):
    device = "flagos:1" if label.endswith("_dev1") else "flagos:0"
    assert host_result(child.data[label]["got"], device) == child.data[label]["want"]


def test_inplace_cpu_route_returns_the_callers_tensor(child):
    assert child.data["inplace_identity"] is True


def test_out_argument_resized_through_cpu_route(child, host_result):
    result = child.data["out_resized"]
    assert result["same"] is True
    assert result["got"]["shape"] == [4, 5]
    assert host_result(result["got"], "flagos:0") == result["want"]


def test_routes_report_env_origins(child):
    origins = child.data["origins"]
    for var, route in OVERRIDES.items():
        op_entries = [(op, r) for op, r in origins.items() if r[1] == f"env {var}"]
        assert len(op_entries) == 1, (var, origins)
        expected = "native" if route == "cuda" else route
        assert op_entries[0][1][0] == expected
    assert origins["add_.Tensor"] == ["cpu", "env FLAGOS_OP_add___Tensor"]
    assert origins["add.Tensor"] == ["cpu", "env FLAGOS_OP_add__Tensor"]
    assert child.data["route_mul"] == ["native", "env FLAGOS_OP_mul__Tensor"]
    route, origin = child.data["route_untouched"]
    assert route == "native" and origin.startswith("default (") and origin.endswith(")")
