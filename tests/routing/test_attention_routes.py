"""Routes of scaled_dot_product_attention's ops on flagos: the choice and the fused kernel behind torch's
overrideable hook (csrc/aten/attention_choice.cpp, attention_overrideable.cpp) take confs and overrides
like every routed op, and the dispatch log says which route each call took."""

from __future__ import annotations

import textwrap

import pytest

FORWARD = "_scaled_dot_product_fused_attention_overrideable"
BACKWARD = "_scaled_dot_product_fused_attention_overrideable_backward"
CHOICE = "_fused_sdp_choice"
ATTENTION_OPS = (CHOICE, FORWARD, BACKWARD, "_scaled_dot_product_attention_math")

CODE = r"""
import torch, torch_fl
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

g = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(2, 4, 16, 8, generator=g) for _ in range(3))
grad = torch.randn(2, 4, 16, 8, generator=g)

def step(q, k, v):
    q, k, v = (t.detach().requires_grad_(True) for t in (q, k, v))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.4)
    out.backward(grad.to(out.device))
    return [t.detach().cpu().tolist() for t in (out, q.grad, k.grad, v.grad)]

fq, fk, fv = (t.to("flagos") for t in (q, k, v))
step(fq, fk, fv)  # first calls: allocations and autograd set-up stay out of the segment
mark("sdpa")
got = step(fq, fk, fv)
mark("after")
report("flagos", got)
report("routes", {op: torch_fl.route(op).route for op in OPS})
with sdpa_kernel(SDPBackend.MATH):
    report("math", step(q, k, v))
report("flash", step(q, k, v))  # the host's own choice for these shapes: its flash kernel
"""


def _run(module_child, env):
    code = f"OPS = {[CHOICE, FORWARD, BACKWARD]!r}\n" + CODE
    return module_child(code, {"FLAGOS_LOG": "dispatch", **env})


def _attention_calls(child):
    return [(op, route) for op, route in child.dispatch("sdpa") if op in ATTENTION_OPS]


@pytest.fixture(scope="module")
def native(module_child):
    return _run(module_child, {})


@pytest.fixture(scope="module")
def forward_on_host(module_child):
    return _run(module_child, {f"FLAGOS_OP_{FORWARD}": "cpu", f"FLAGOS_OP_{BACKWARD}": "cpu"})


@pytest.fixture(scope="module")
def choice_on_host(module_child):
    return _run(module_child, {f"FLAGOS_OP_{CHOICE}": "cpu"})


def _close(got, want, tol=1e-5):
    import torch

    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(torch.tensor(g), torch.tensor(w), rtol=tol, atol=tol)


def test_native_takes_the_fused_kernel(native):
    calls = _attention_calls(native)
    assert calls == [(CHOICE, "native"), (FORWARD, "native"), (BACKWARD, "native")], native.describe()
    assert native.data["flagos"] == native.data["flash"]  # the host's flash kernel, bit for bit
    _close(native.data["flagos"], native.data["math"])


def test_a_route_override_of_the_fused_kernel_is_respected(forward_on_host, native):
    assert forward_on_host.data["routes"][FORWARD] == "cpu"
    assert _attention_calls(forward_on_host) == [(CHOICE, "native"), (FORWARD, "cpu"), (BACKWARD, "cpu")], (
        forward_on_host.describe()
    )
    assert forward_on_host.data["flagos"] == native.data["flagos"]


def test_the_choice_routed_off_native_takes_math(choice_on_host, native):
    calls = _attention_calls(choice_on_host)
    assert calls[0] == (CHOICE, "cpu"), choice_on_host.describe()
    assert FORWARD not in [op for op, _ in calls] and BACKWARD not in [op for op, _ in calls], calls
    _close(choice_on_host.data["flagos"], native.data["math"])


def test_a_provider_route_is_refused_with_the_way_out(run_child):
    code = """
        import torch, torch_fl
        import torch.nn.functional as F
        # a provider that claims the hook: the router cannot hand it torch's hook (no provider kernel shape)
        torch_fl.register_provider("probe", {FORWARD: lambda *args, **kwargs: None})
        import os
        os.environ["FLAGOS_OP_" + FORWARD] = "probe"
        torch_fl.reload_routes()
        q = torch.randn(1, 2, 8, 8).to("flagos")
        try:
            F.scaled_dot_product_attention(q, q, q)
        except RuntimeError as e:
            report("error", str(e))
        """
    child = run_child(f"FORWARD = {FORWARD!r}\n" + textwrap.dedent(code))
    error = child.data.get("error", "")
    assert f"FLAGOS_OP_{FORWARD}=native" in error and "probe" in error, child.describe()
