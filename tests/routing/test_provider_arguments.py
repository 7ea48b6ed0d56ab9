"""A Python provider receives arguments as torch's Python API spells them (torch.dtype, not
the int the boxed stack keeps), keyword-only ones by name, and its tuple results come back
as flagos tensors."""

from __future__ import annotations

import pytest

CHECKS = r"""
import os, torch, torch_fl

seen = {}

def probe_sum(x, dim, keepdim=False, *, dtype=None):
    seen["sum"] = [type(dtype).__name__, str(dtype), list(dim), keepdim, str(x.device)]
    return torch.sum(x, dim, keepdim, dtype=dtype)

def probe_max(x, dim, keepdim=False):
    seen["max"] = [str(x.device), dim, keepdim]
    return torch.max(x, dim, keepdim)

torch_fl.register_provider("argprobe", {"sum.dim_IntList": probe_sum, "max.dim": probe_max})
os.environ["FLAGOS_OP_sum__dim_IntList"] = "argprobe"
os.environ["FLAGOS_OP_max__dim"] = "argprobe"
torch_fl.reload_routes()

x = torch.arange(12.).view(3, 4)
s = x.to("flagos").sum(1, dtype=torch.float64)
v, i = x.to("flagos").max(0, keepdim=True)
report("sum", [seen["sum"], str(s.device), str(s.dtype), s.cpu().tolist(), x.sum(1, dtype=torch.float64).tolist()])
report("max", [seen["max"], str(v.device), str(i.device), v.cpu().tolist(), i.cpu().tolist(),
               x.max(0, keepdim=True).values.tolist(), x.max(0, keepdim=True).indices.tolist()])
"""


@pytest.fixture(scope="module")
def child(module_child):
    return module_child(CHECKS)


def test_provider_gets_torch_dtype_and_keyword_only_arguments(child):
    (dtype_type, dtype, dim, keepdim, device), out_device, out_dtype, got, want = child.data["sum"]
    assert (dtype_type, dtype) == ("dtype", "torch.float64")
    assert (dim, keepdim) == ([1], False)
    assert device == "cpu"  # the provider works on vendor tensors (CPU under emulation)
    assert (out_device, out_dtype) == ("flagos:0", "torch.float64")
    assert got == want


def test_provider_tuple_results_come_back_as_flagos_tensors(child):
    (device, dim, keepdim), v_device, i_device, values, indices, want_values, want_indices = child.data["max"]
    assert (device, dim, keepdim) == ("cpu", 0, True)
    assert (v_device, i_device) == ("flagos:0", "flagos:0")
    assert (values, indices) == (want_values, want_indices)
