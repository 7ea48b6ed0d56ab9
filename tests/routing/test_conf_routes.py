"""Routes from a conf named by FLAGOS_BACKEND_CONFIG: include, default chain, aliases, chains,
and FLAGOS_OP_ overrides on top of the conf; confirmed from the dispatch log."""

from __future__ import annotations

import pytest

BASE = """
    # shared by several confs
    mul.Tensor = cpu            #@base_mul
    sub.Tensor = cuda           #@base_sub
"""

MAIN = """
    # the conf under test
    include base.conf           #@include
    default = flaggems, native  #@default
    add.Tensor = cpu            #@add
    mul.Tensor = native         #@mul
    div.Tensor = flaggems, cpu  #@div
    maximum = native            #@maximum
    minimum = flaggems, cuda    #@minimum
"""

CHECKS = r"""
import torch, torch_fl

a = torch.randn(3, 4, generator=torch.Generator().manual_seed(1))
b = torch.randn(3, 4, generator=torch.Generator().manual_seed(2))
fa, fb = a.to("flagos"), b.to("flagos")
cases = {
    "add": lambda x, y: x + y,
    "mul": lambda x, y: x * y,
    "sub": lambda x, y: x - y,
    "div": lambda x, y: x / y,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "atan2": torch.atan2,
}
for label, fn in cases.items():
    mark(label)
    out = fn(fa, fb)
    mark(label + ":after")
    report(label, [str(out.device), out.cpu().tolist(), fn(a, b).tolist()])

routes = torch_fl.routes()
report("routes", {op: [r.route, r.origin, list(r.chain)] for op, r in routes.items() if op in (
    "default", "add.Tensor", "mul.Tensor", "sub.Tensor", "div.Tensor", "maximum", "minimum")})
report("route_atan2", [torch_fl.route("atan2").route, torch_fl.route("atan2").origin])
"""

# label -> (op logged, route taken, tag of the deciding line or env var)
EXPECTED = {
    "add": ("add.Tensor", "cpu"),
    "mul": ("mul.Tensor", "native"),  # main.conf's line replaces the included one
    "sub": ("sub.Tensor", "native"),  # included, alias cuda
    "div": ("div.Tensor", "cpu"),  # flaggems unavailable under emulation: next in chain
    "maximum": ("maximum", "cpu"),  # FLAGOS_OP_maximum beats the conf line
    "minimum": ("minimum", "native"),  # the alias cuda inside a chain
    "atan2": ("atan2", "native"),  # no line: the default chain's builtin route
}


@pytest.fixture(scope="module")
def confs(tmp_path_factory, conf_writer):
    folder = tmp_path_factory.mktemp("conf")
    _, base_tags = conf_writer(folder, "base.conf", BASE)
    main, main_tags = conf_writer(folder, "main.conf", MAIN)
    return main, {**base_tags, **main_tags}


@pytest.fixture(scope="module")
def child(module_child, confs):
    main, _ = confs
    env = {
        "FLAGOS_BACKEND_CONFIG": str(main),
        "FLAGOS_OP_maximum": "cpu",
        "FLAGOS_LOG": "dispatch,fallback,config",
    }
    return module_child(CHECKS, env)


@pytest.mark.parametrize("label", sorted(EXPECTED))
def test_call_takes_configured_route(child, label):
    assert child.dispatch(label) == [EXPECTED[label]], child.describe()


@pytest.mark.parametrize("label", sorted(EXPECTED))
def test_configured_route_computes_cpu_values(child, label):
    device, got, want = child.data[label]
    assert device == "flagos:0"
    assert got == want


def test_origins_name_conf_lines_and_env(child, confs):
    _, tag = confs
    routes = child.data["routes"]
    assert routes["add.Tensor"] == ["cpu", tag["add"], ["cpu"]]
    assert routes["mul.Tensor"] == ["native", tag["mul"], ["native"]]
    assert routes["sub.Tensor"] == ["native", tag["base_sub"], ["native"]]
    assert routes["div.Tensor"] == ["cpu", tag["div"], ["flaggems", "cpu"]]
    assert routes["maximum"] == ["cpu", "env FLAGOS_OP_maximum", ["cpu"]]
    assert routes["minimum"] == ["native", tag["minimum"], ["flaggems", "native"]]
    assert routes["default"][:2] == ["native", f"default ({tag['default']})"]
    assert routes["default"][2] == ["flaggems", "native"]
    assert child.data["route_atan2"] == ["native", f"default ({tag['default']})"]


def test_fallback_log_says_why_flaggems_was_skipped(child):
    lines = [line for line in child.lines("[flagos fallback]") if "div.Tensor" in line]
    assert len(lines) == 1, child.describe()
    assert "flaggems" in lines[0] and lines[0].endswith("-> cpu")
    assert "GPU" in lines[0] or "not available" in lines[0]


def test_config_log_names_the_conf_and_overrides(child, confs):
    main, _ = confs
    lines = child.lines("[flagos config]")
    assert len(lines) == 1, child.describe()
    assert f"conf={main}" in lines[0]
    assert "accelerator=cpu" in lines[0]
    assert "FLAGOS_OP_maximum" in lines[0]


def test_flaggems_native_chain_falls_to_native(run_child):
    """The issue's chain: flaggems is unavailable under emulation, so native serves the op,
    and FLAGOS_LOG=fallback says why."""
    child = run_child(
        """
        import torch, torch_fl
        x = torch.arange(6.)
        mark("add")
        y = x.to("flagos") + x.to("flagos")
        mark("add:after")
        report("add", [y.cpu().tolist(), (x + x).tolist()])
        r = torch_fl.route("add.Tensor")
        report("route", [r.route, r.origin, list(r.chain), [list(s) for s in r.skipped]])
        """,
        {"FLAGOS_OP_add__Tensor": "flaggems, native", "FLAGOS_LOG": "dispatch,fallback"},
    )
    assert child.dispatch("add") == [("add.Tensor", "native")], child.describe()
    got, want = child.data["add"]
    assert got == want
    route, origin, chain, skipped = child.data["route"]
    assert (route, origin, chain) == ("native", "env FLAGOS_OP_add__Tensor", ["flaggems", "native"])
    assert [s[0] for s in skipped] == ["flaggems"]
    fallback = child.lines("[flagos fallback]")
    assert len(fallback) == 1 and fallback[0].startswith("[flagos fallback] add.Tensor:"), child.describe()
    assert "flaggems" in fallback[0] and fallback[0].endswith("-> native")
    assert skipped[0][1] in fallback[0]  # the reason logged is the reason recorded


def test_cpu_default_keeps_views_and_bookkeeping_native(run_child, write_conf):
    """default = cpu sends computing ops to the host; views and the device's own kernels stay native."""
    path, tags = write_conf("cpu_default.conf", "default = cpu   #@default\n")
    child = run_child(
        """
        import torch, torch_fl
        a = torch.arange(12.).view(3, 4)
        fa = a.to("flagos")
        mark("add")
        y = fa + 1
        mark("transpose")
        v = fa.t()
        mark("transpose:after")
        v.mul_(-1)
        report("values", [y.cpu().tolist(), (a + 1).tolist(), str(y.device)])
        report("alias", [v.untyped_storage().data_ptr() == fa.untyped_storage().data_ptr(),
                         fa.cpu().tolist(), (-a).tolist()])
        report("origins", {op: [torch_fl.route(op).route, torch_fl.route(op).origin]
                           for op in ("add.Tensor", "transpose.int", "empty.memory_format")})
        """,
        {"FLAGOS_BACKEND_CONFIG": str(path), "FLAGOS_LOG": "dispatch"},
    )
    assert child.dispatch("add") == [("add.Tensor", "cpu")], child.describe()
    assert all(route == "native" for _, route in child.dispatch("transpose")), child.describe()
    got, want, device = child.data["values"]
    assert got == want and device == "flagos:0"
    same, got, want = child.data["alias"]
    assert same and got == want  # mul_ (cpu route) through the native view wrote the base
    origins = child.data["origins"]
    assert origins["add.Tensor"] == ["cpu", f"default ({tags['default']})"]
    assert origins["transpose.int"][0] == "native" and "view" in origins["transpose.int"][1]
    assert origins["empty.memory_format"][0] == "native"
