"""Python provider routes registered in the child, chains through them, the run-time log switch,
and reload_routes() publishing a table whole (or not at all)."""

from __future__ import annotations

import pytest

CHECKS = r"""
import os, torch, torch_fl

calls = []

def probe_add(a, b, alpha=1):
    calls.append(["add.Tensor", str(a.device), str(b.device) if isinstance(b, torch.Tensor) else None])
    return torch.add(a, b, alpha=alpha)

def probe_add_(a, b, alpha=1):
    calls.append(["add_.Tensor", str(a.device), str(b.device)])
    return a.add_(b, alpha=alpha)

def probe_mul(a, b):
    calls.append(["mul.Tensor", str(a.device), str(b.device)])
    return torch.mul(a, b)

torch_fl.register_provider("probe", {"add.Tensor": probe_add, "add_.Tensor": probe_add_})
torch_fl.register_provider("mulonly", {"mul.Tensor": probe_mul})            # no kernel for add.Tensor
torch_fl.register_provider("off", {"add.Tensor": probe_add}, available=lambda: "switched off by the test")

a = torch.randn(4, 3, generator=torch.Generator().manual_seed(3))
b = torch.randn(4, 3, generator=torch.Generator().manual_seed(4))

def run(label, fn, device="flagos"):
    x, y = a.to(device), b.to(device)
    del calls[:]
    mark(label)
    out = fn(x, y)
    mark(label + ":after")
    report(label, {"device": str(out.device), "got": out.cpu().tolist(), "want": fn(a.clone(), b).tolist(),
                   "calls": list(calls), "same": out is x})

def reload(**overrides):
    for key in [k for k in os.environ if k.startswith("FLAGOS_OP_")]:
        del os.environ[key]
    os.environ.update(overrides)
    return torch_fl.reload_routes()

report("reaches", [torch_fl.reaches_router("add.Tensor"), torch_fl.reaches_router("empty.memory_format")])
report("known", ["add.Tensor" in torch_fl.known_ops(), "not_an_op.Tensor" in torch_fl.known_ops()])

# FLAGOS_LOG is unset at start-up: no lines until switched on at run time
run("log_off_at_start", lambda x, y: x + y)
torch_fl.set_dispatch_log(True)
run("log_switched_on", lambda x, y: x + y)
os.environ["FLAGOS_LOG"] = "dispatch"  # reload_routes() re-reads FLAGOS_LOG too

reload(FLAGOS_OP_add__Tensor="probe", FLAGOS_OP_add___Tensor="probe")
run("probe", lambda x, y: x + y)
run("probe_dev1", lambda x, y: x + y, "flagos:1")
run("probe_inplace", lambda x, y: x.add_(y))
report("probe_origin", [torch_fl.route("add.Tensor").route, torch_fl.route("add.Tensor").origin])

reload(FLAGOS_OP_add__Tensor="mulonly, probe, native", FLAGOS_OP_mul__Tensor="off, mulonly, cpu")
run("chain_no_kernel", lambda x, y: x + y)
run("chain_unavailable", lambda x, y: x * y)
r = torch_fl.route("add.Tensor")
report("chain_no_kernel_route", [r.route, list(r.chain), [list(s) for s in r.skipped]])
r = torch_fl.route("mul.Tensor")
report("chain_unavailable_route", [r.route, list(r.chain), [list(s) for s in r.skipped]])

reload(FLAGOS_OP_add__Tensor="off, cpu")
run("chain_to_cpu", lambda x, y: x + y)

# a conf whose default chain starts with a provider: the ops it has kernels for take it
os.environ["FLAGOS_BACKEND_CONFIG"] = CONF
reload()
run("default_probe_add", lambda x, y: x + y)
run("default_probe_sub", lambda x, y: x - y)
r = torch_fl.route("add.Tensor")
report("default_probe_route", [r.route, r.origin])
del os.environ["FLAGOS_BACKEND_CONFIG"]

reload()
torch_fl.set_dispatch_log(False)
run("log_switched_off", lambda x, y: x + y)
"""

CONF = """
    # provider first, native for everything it does not have
    default = probe, native   #@default
"""

EXPECTED = {
    "log_off_at_start": [],
    "log_switched_on": [("add.Tensor", "native")],
    "probe": [("add.Tensor", "probe")],
    "probe_dev1": [("add.Tensor", "probe")],
    "probe_inplace": [("add_.Tensor", "probe")],
    "chain_no_kernel": [("add.Tensor", "probe")],
    "chain_unavailable": [("mul.Tensor", "mulonly")],
    "chain_to_cpu": [("add.Tensor", "cpu")],
    "default_probe_add": [("add.Tensor", "probe")],
    "default_probe_sub": [("sub.Tensor", "native")],
    "log_switched_off": [],
}
PROVIDER_CALLS = {
    "probe": [["add.Tensor", "cpu", "cpu"]],
    "probe_dev1": [["add.Tensor", "cpu", "cpu"]],
    "probe_inplace": [["add_.Tensor", "cpu", "cpu"]],
    "chain_no_kernel": [["add.Tensor", "cpu", "cpu"]],
    "chain_unavailable": [["mul.Tensor", "cpu", "cpu"]],
    "default_probe_add": [["add.Tensor", "cpu", "cpu"]],
}


@pytest.fixture(scope="module")
def conf(tmp_path_factory, conf_writer):
    return conf_writer(tmp_path_factory.mktemp("conf"), "probe.conf", CONF)


@pytest.fixture(scope="module")
def child(module_child, conf):
    path, _ = conf
    return module_child(f"CONF = {str(path)!r}\n" + CHECKS)


@pytest.mark.parametrize("label", sorted(EXPECTED))
def test_call_takes_route(child, label):
    assert child.dispatch(label) == EXPECTED[label], child.describe()


@pytest.mark.parametrize("label", sorted(EXPECTED))
def test_result_equals_cpu_and_stays_on_flagos(child, label):
    result = child.data[label]
    assert result["device"] == ("flagos:1" if label.endswith("_dev1") else "flagos:0")
    assert result["got"] == result["want"]


@pytest.mark.parametrize("label", sorted(EXPECTED))
def test_provider_called_with_vendor_tensors(child, label):
    # Under emulation the vendor device is the host: the provider sees CPU tensors, never flagos ones.
    assert child.data[label]["calls"] == PROVIDER_CALLS.get(label, [])


def test_inplace_provider_result_is_the_callers_tensor(child):
    assert child.data["probe_inplace"]["same"] is True


def test_provider_route_origin(child):
    assert child.data["probe_origin"] == ["probe", "env FLAGOS_OP_add__Tensor"]


def test_chain_skips_provider_without_kernel(child):
    route, chain, skipped = child.data["chain_no_kernel_route"]
    assert (route, chain) == ("probe", ["mulonly", "probe", "native"])
    assert [s[0] for s in skipped] == ["mulonly"] and "add.Tensor" in skipped[0][1]


def test_chain_skips_unavailable_provider(child):
    route, chain, skipped = child.data["chain_unavailable_route"]
    assert (route, chain) == ("mulonly", ["off", "mulonly", "cpu"])
    assert [s[0] for s in skipped] == ["off"] and "switched off by the test" in skipped[0][1]


def test_default_chain_origin(child, conf):
    _, tags = conf
    assert child.data["default_probe_route"] == ["probe", f"default ({tags['default']})"]


def test_router_introspection(child):
    assert child.data["reaches"] == [True, False]
    assert child.data["known"] == [True, False]


BAD_RELOADS = r"""
import os, torch, torch_fl

def snapshot():
    return {op: [r.route, r.origin] for op, r in torch_fl.routes().items()}

x = torch.arange(1., 7.)
def calls(label):
    fx = x.to("flagos")
    mark(label)
    out = [fx + fx, fx * fx, fx - fx]
    mark(label + ":after")
    report(label, [o.cpu().tolist() for o in out] == [(x + x).tolist(), (x * x).tolist(), (x - x).tolist()])

os.environ["FLAGOS_BACKEND_CONFIG"] = GOOD
torch_fl.reload_routes()
before = snapshot()
calls("good")
for name, path in BAD.items():
    os.environ["FLAGOS_BACKEND_CONFIG"] = path
    try:
        torch_fl.reload_routes()
        report(name, None)
    except Exception as exc:
        report(name, [type(exc).__name__, str(exc)])
    report(name + ":unchanged", snapshot() == before)
    calls(name + ":calls")
for var, value in (("FLAGOS_OP_empty__memory_format", "cpu"), ("FLAGOS_OP_transpose__int", "cpu"),
                   ("FLAGOS_OP_diagonal", "cpu"), ("FLAGOS_OP_add__Tensor", "nonsense")):
    os.environ["FLAGOS_BACKEND_CONFIG"] = GOOD
    os.environ[var] = value
    try:
        torch_fl.reload_routes()
        report(var, None)
    except Exception as exc:
        report(var, [type(exc).__name__, str(exc)])
    del os.environ[var]
    report(var + ":unchanged", snapshot() == before)
calls("after_all")
"""

GOOD_ROUTES = [("add.Tensor", "cpu"), ("mul.Tensor", "native"), ("sub.Tensor", "native")]
GOOD = """
    add.Tensor = cpu         #@add
"""

# Each bad conf starts with lines that would change routes if they were applied.
BAD = {
    "unknown_op": """
        add.Tensor = native
        mul.Tensor = cpu
        ad.Tensor = native   #@bad
    """,
    "bad_route": """
        add.Tensor = native
        mul.Tensor = cpu
        sub.Tensor = gpu     #@bad
    """,
    "malformed": """
        add.Tensor = native
        mul.Tensor = cpu
        sub.Tensor native    #@bad
    """,
    "view_to_cpu": """
        add.Tensor = native
        mul.Tensor = cpu
        transpose.int = cpu  #@bad
    """,
}


@pytest.fixture(scope="module")
def bad_child(module_child, tmp_path_factory, conf_writer):
    folder = tmp_path_factory.mktemp("bad")
    good, _ = conf_writer(folder, "good.conf", GOOD)
    bad, lines = {}, {}
    for name, text in BAD.items():
        path, tags = conf_writer(folder, f"{name}.conf", text)
        bad[name], lines[name] = str(path), tags["bad"]
    child = module_child(f"GOOD = {str(good)!r}\nBAD = {bad!r}\n" + BAD_RELOADS, {"FLAGOS_LOG": "dispatch"})
    return child, lines


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_conf_reload_names_file_line_and_applies_nothing(bad_child, name):
    child, lines = bad_child
    error = child.data[name]
    assert error is not None, f"reloading {name}.conf succeeded"
    assert error[0] == "ConfigError", error
    assert lines[name] in error[1], error
    assert child.data[f"{name}:unchanged"] is True
    assert child.dispatch(f"{name}:calls") == GOOD_ROUTES
    assert child.data[f"{name}:calls"] is True


@pytest.mark.parametrize(
    "var, words",
    [
        ("FLAGOS_OP_empty__memory_format", ["empty.memory_format", "native"]),
        ("FLAGOS_OP_transpose__int", ["transpose.int", "view"]),
        ("FLAGOS_OP_diagonal", ["diagonal", "view"]),
        ("FLAGOS_OP_add__Tensor", ["nonsense", "valid routes"]),
    ],
)
def test_refused_override_applies_nothing(bad_child, var, words):
    child, _ = bad_child
    error = child.data[var]
    assert error is not None, f"{var}=... was accepted"
    assert var in error[1]
    for word in words:
        assert word in error[1], error
    assert child.data[f"{var}:unchanged"] is True


def test_routes_intact_after_refusals(bad_child):
    child, _ = bad_child
    assert child.dispatch("good") == GOOD_ROUTES
    assert child.dispatch("after_all") == child.dispatch("good")
    assert child.data["good"] is True and child.data["after_all"] is True


def test_a_provider_cannot_register_an_unknown_op(run_child):
    child = run_child(
        """
        import torch, torch_fl
        try:
            torch_fl.register_provider("typo", {"ad.Tensor": torch.add})
        except ValueError as exc:
            report("error", str(exc))
        report("registered", "typo" in torch_fl.providers.providers())
        """
    )
    assert "provider 'typo' registers 1 unknown operator name" in child.data["error"]
    assert "'ad.Tensor': nearest: add.Tensor" in child.data["error"]
    assert child.data["registered"] is False


WRONG_RESULTS = {
    "lambda a, b, alpha=1: torch.zeros(7)": ["result 0 has shape [7] where the op gives [8]"],
    "lambda a, b, alpha=1: (a + b).double()": ["has dtype Double where the op gives Float"],
    "lambda a, b, alpha=1: (a, a)": ["result 0 is not a Tensor (tuple)"],
}


@pytest.fixture(scope="module")
def wrong_results(module_child):
    """One child for every kernel below: each registered in turn as provider 'wrong' (a registration replaces the
    one before), routed with reload_routes, and its first error line reported under its own key."""
    trials = "".join(
        f"""
        torch_fl.register_provider("wrong", {{"add.Tensor": {kernel}}})
        torch_fl.reload_routes()
        try:
            print((x + x).cpu())
        except Exception as exc:
            report({kernel!r}, str(exc).splitlines()[0])
        """
        for kernel in WRONG_RESULTS
    )
    return module_child(
        """
        import os, torch, torch_fl
        os.environ["FLAGOS_OP_add__Tensor"] = "wrong"
        x = torch.ones(8).to("flagos")
        """
        + trials
    )


@pytest.mark.parametrize(("kernel", "words"), WRONG_RESULTS.items())
def test_a_wrong_provider_result_is_an_error_naming_provider_and_op(wrong_results, kernel, words):
    error = wrong_results.data.get(kernel, "")
    assert "provider 'wrong' returned a wrong result for add.Tensor" in error, wrong_results.describe()
    assert "FLAGOS_OP_add__Tensor=native" in error
    for word in words:
        assert word in error, error
