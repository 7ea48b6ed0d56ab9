"""The cpu route (host fallback) keeps the device semantics of the native route: results on the
caller's flagos device, in-place and out= writes landing in flagos memory (also through views),
flagos generators honoured, devices not mixed."""

from __future__ import annotations

import pytest

CHECKS = r"""
import torch, torch_fl

def attempt(label, fn):
    mark(label)
    try:
        result = ["ok", fn()]
    except Exception as exc:
        result = ["raised", f"{type(exc).__name__}: {exc}"]
    mark(label + ":after")
    report(label, result)

base = torch.arange(24.).view(4, 6)
a = torch.linspace(-3, 3, 6)

def view_inplace(device):
    b = base.to(device)
    b[:, ::2].add_(1)
    b.t()[1:3].mul_(-2)
    return host(b)
attempt("view_inplace", lambda: [view_inplace("flagos"), view_inplace("cpu")])

def out_into_view(device):
    o = torch.zeros(4, 6, device=device)
    torch.add(base.to(device)[:, :3], 0.5, out=o[:, 3:])
    return host(o)
attempt("out_into_view", lambda: [out_into_view("flagos"), out_into_view("cpu")])

attempt("two_outputs_dev1", lambda: [host(base.to("flagos:1").max(1)), host(base.max(1))])
attempt("scalar_first", lambda: [host(3 - a.to("flagos")), host(3 - a)])
attempt("cpu_scalar_tensor_first", lambda: [host(torch.sub(torch.tensor(3.), a.to("flagos"))),
                                            host(torch.sub(torch.tensor(3.), a))])
attempt("cpu_scalar_tensor_second", lambda: [host(a.to("flagos") - torch.tensor(3.)), host(a - torch.tensor(3.))])

def seeded():
    torch.flagos.manual_seed(7)
    first = torch.rand(5, device="flagos").cpu().tolist()
    torch.flagos.manual_seed(7)
    return first == torch.rand(5, device="flagos").cpu().tolist()
attempt("seeded", seeded)

def generator():
    g = torch.Generator(device="flagos")
    g.manual_seed(3)
    first = torch.rand(5, device="flagos", generator=g).cpu().tolist()
    g.manual_seed(3)
    return first == torch.rand(5, device="flagos", generator=g).cpu().tolist()
attempt("generator", generator)

attempt("mixed_devices", lambda: host(torch.ones(3, device="flagos:0") - torch.ones(3, device="flagos:1")))

# Conjugate and negative bits on non-dense tensors crossing to the host: as a cpu-route argument (a conjugate-
# transposed slice, as linear algebra backward passes make them) and by plain copies in both directions.
c = torch.randn(4, 6, dtype=torch.complex64)
def conj_adjoint_mm(device):
    m = c.to(device)
    return host(torch.view_as_real(m[:, ::2].mH @ m[:, 1::2]))
attempt("conj_adjoint_mm", lambda: [conj_adjoint_mm("flagos"), conj_adjoint_mm("cpu")])

def bits_to_host(device):
    m = c.to(device)
    return [torch.zeros(4, 3, dtype=torch.complex64).copy_(m[:, ::2].conj()).real.tolist(),
            torch.zeros(4, 3, dtype=torch.complex64).copy_(m[:, ::2].conj()).imag.tolist(),
            torch.zeros(4, 3).copy_(m[:, ::2].conj().imag).tolist()]
attempt("bits_to_host", lambda: [bits_to_host("flagos"), bits_to_host("cpu")])

def bits_from_host(device):
    d = torch.zeros(4, 6, dtype=torch.complex64, device=device)
    d.conj()[:, ::2].copy_(c[:, :3])
    return torch.view_as_real(d).cpu().tolist()
attempt("bits_from_host", lambda: [bits_from_host("flagos"), bits_from_host("cpu")])
"""

ENV = {
    "FLAGOS_LOG": "dispatch",
    "FLAGOS_OP_add___Tensor": "cpu",
    "FLAGOS_OP_mul___Tensor": "cpu",
    "FLAGOS_OP_add__out": "cpu",
    "FLAGOS_OP_max__dim": "cpu",
    "FLAGOS_OP_sub__Tensor": "cpu",
    "FLAGOS_OP_uniform_": "cpu",
    "FLAGOS_OP_mm": "cpu",
}


@pytest.fixture(scope="module")
def child(module_child):
    return module_child(CHECKS, ENV)


@pytest.mark.parametrize(
    "label, op",
    [
        ("view_inplace", "add_.Tensor"),
        ("out_into_view", "add.out"),
        ("two_outputs_dev1", "max.dim"),
        ("scalar_first", "sub.Tensor"),
        ("cpu_scalar_tensor_first", "sub.Tensor"),
        ("cpu_scalar_tensor_second", "sub.Tensor"),
        ("conj_adjoint_mm", "mm"),
    ],
)
def test_cpu_route_result_matches_host(child, label, op, host_result):
    assert op in [o for o, _ in child.dispatch(label)], child.describe()
    assert all(route == "cpu" for o, route in child.dispatch(label) if o == op)
    status, value = child.data[label]
    assert status == "ok", value
    got, want = value
    device = "flagos:1" if label.endswith("_dev1") else "flagos:0"
    assert host_result(got, device) == want


@pytest.mark.parametrize("label", ["bits_to_host", "bits_from_host"])
def test_conjugate_and_negative_bits_cross_to_and_from_the_host(child, label):
    status, value = child.data[label]
    assert status == "ok", value
    got, want = value
    assert got == want


def test_cpu_route_honours_flagos_seed(child):
    assert child.dispatch("seeded") and all(r == "cpu" for o, r in child.dispatch("seeded") if o == "uniform_")
    assert child.data["seeded"] == ["ok", True]


def test_cpu_route_accepts_flagos_generator(child):
    assert child.data["generator"] == ["ok", True]


def test_cpu_route_refuses_mixed_devices(child):
    status, message = child.data["mixed_devices"]
    assert status == "raised" and "flagos:0" in message and "flagos:1" in message
