"""Routes under compile: an op routed off native stays an ATen call that the router runs on its route; the rest of
the graph is generated code. Checked with the dispatch log of the compiled call (after the compiling call), in a
child whose routes change through FLAGOS_OP_* and torch_fl.reload_routes()."""

from __future__ import annotations

ROUTES = """
import os, sys, torch, torch_fl

def f(a, b):
    return (a * b).sin() + 1

def g(a):
    return torch.softmax(a * 2, dim=-1)   # _softmax has a decomposition Inductor would otherwise apply

torch.manual_seed(0)
a, b = torch.randn(32).to("flagos"), torch.randn(32).to("flagos")
m = torch.randn(4, 8).to("flagos")
cf, cg = torch.compile(f), torch.compile(g)

def phase(label):
    cf(a, b); cg(m)                        # compiles (or not) outside the logged part
    print("@@phase " + label, file=sys.stderr, flush=True)
    torch_fl.set_dispatch_log(True)
    got_f, got_g = cf(a, b), cg(m)
    print("@@eager " + label, file=sys.stderr, flush=True)
    want_f, want_g = f(a, b), g(m)
    torch_fl.set_dispatch_log(False)
    print("@@end " + label, file=sys.stderr, flush=True)
    same_f = torch.allclose(got_f.cpu(), want_f.cpu(), atol=1e-6)
    same_g = torch.allclose(got_g.cpu(), want_g.cpu(), atol=1e-6)
    report(label, [same_f, same_g, got_f.device.type, got_g.device.type])

phase("native")
os.environ["FLAGOS_OP_mul__Tensor"] = "cpu"
os.environ["FLAGOS_OP__softmax"] = "cpu"
torch_fl.reload_routes()
phase("cpu")
del os.environ["FLAGOS_OP_mul__Tensor"], os.environ["FLAGOS_OP__softmax"]
torch_fl.reload_routes()
phase("back")
"""


def _segments(stderr: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current = None
    for line in stderr.splitlines():
        if line.startswith("@@"):
            kind, label = line[2:].split(" ", 1)
            current = None if kind == "end" else f"{kind} {label}"
            if current:
                out[current] = []
        elif current and line.startswith("[flagos dispatch]"):
            out[current].append(line.removeprefix("[flagos dispatch] "))
    return out


def test_routes_respected_under_compile(run_child):
    child = run_child(ROUTES)
    log = _segments(child.stderr)
    for label in ("native", "cpu", "back"):
        assert child.data[label] == [True, True, "flagos", "flagos"], child.describe()
    # all native: the compiled calls are generated kernels, the router sees none of f's or g's ops
    assert not [line for line in log["phase native"] if "mul.Tensor" in line or "softmax" in line], log
    assert "mul.Tensor -> native" in log["eager native"], log  # the eager control: the same ops do reach it
    # routed to cpu: exactly those ops reach the router from the compiled code, on their route
    assert log["phase cpu"].count("mul.Tensor -> cpu") == 2, log["phase cpu"]  # a * b in f, a * 2 in g
    assert log["phase cpu"].count("_softmax -> cpu") == 1, log["phase cpu"]
    assert not [line for line in log["phase cpu"] if line.startswith(("sin", "add.Tensor"))], log["phase cpu"]
    # routes reloaded back to native: recompiled, generated again
    assert not [line for line in log["phase back"] if "mul.Tensor" in line or "softmax" in line], log
