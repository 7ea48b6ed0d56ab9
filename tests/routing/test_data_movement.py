"""Ops that move data between devices: which routes they may take, and where their results land.

_to_copy and copy_ are what the cpu route is made of, so routing them there is refused at import;
routed natively they still put a result where the call says (x.cpu() on the host), and the cpu
route of any other op moves its data without passing through the router again.
"""

from __future__ import annotations

import pytest

IMPORT = "import torch, torch_fl; print('imported')"


@pytest.mark.parametrize("var, op", [("FLAGOS_OP__to_copy", "_to_copy"), ("FLAGOS_OP_copy_", "copy_")])
def test_transfer_on_the_cpu_route_is_refused_at_import(run_argv, var, op):
    child = run_argv(["-c", IMPORT], {var: "cpu"}, expect_ok=False)
    assert "imported" not in child.stdout
    assert f"env {var}: {op} = cpu" in child.stderr, child.describe()
    assert "moves data between devices" in child.stderr and f"route {op} to native" in child.stderr
    assert "Segmentation fault" not in child.stderr and child.rc == 1, child.describe()


def test_transfer_on_the_cpu_route_in_a_conf_names_the_line(run_argv, write_conf):
    path, tags = write_conf("moves.conf", "default = native\n_to_copy = cpu   #@bad\n")
    child = run_argv(["-c", IMPORT], {"FLAGOS_BACKEND_CONFIG": str(path)}, expect_ok=False)
    assert f"{tags['bad']}: _to_copy = cpu" in child.stderr, child.describe()


MOVES = """
import torch, torch_fl
x = torch.arange(6.0).to("flagos")
mark("to_host")
y = x.cpu()
mark("to_host:after")
report("to_host", host(y))
mark("to_dtype")
z = x.to(torch.float64)
mark("to_dtype:after")
report("to_dtype", [str(z.device), str(z.dtype)])
h = torch.zeros(6)
mark("copy_to_host")
r = h.copy_(x)
mark("copy_to_host:after")
report("copy_to_host", [str(h.device), h.tolist(), r is h])
d = torch.zeros(6, device="flagos")
d.copy_(torch.full((6,), 7.0))
report("copy_from_host", host(d))
if torch.flagos.device_count() > 1:
    other = torch.zeros(6, device="flagos:1")
    mark("across_devices")
    other.copy_(x)
    mark("across_devices:after")
    report("across_devices", host(other))
    before = torch.flagos.memory_allocated(1)
    moved = x.to("flagos:1", torch.float64)  # _to_copy routed: its result belongs to the device the call names
    report("to_other_device", [str(moved.device), moved.cpu().tolist(), torch.flagos.memory_allocated(1) - before])
"""


def test_native_transfers_keep_host_results_on_the_host(run_child, write_conf):
    path, _ = write_conf("native_moves.conf", "default = native\n_to_copy = native\ncopy_ = native\n")
    child = run_child(MOVES, {"FLAGOS_BACKEND_CONFIG": str(path), "FLAGOS_LOG": "dispatch"})
    # the routes under test were really taken, except by a copy_ between host and flagos: that is the device's
    # own move (_copy_from, never routed), so the log shows no route for it
    assert child.routes_of("_to_copy", "to_host") == ["native"], child.describe()
    assert child.routes_of("_to_copy", "to_dtype") == ["native"], child.describe()
    assert child.routes_of("copy_", "across_devices") == ["native"], child.describe()
    assert child.routes_of("copy_", "copy_to_host") == [], child.describe()
    assert child.data["to_host"] == {"device": "cpu", "dtype": "torch.float32", "shape": [6], "values": list(range(6))}
    assert child.data["to_dtype"] == ["flagos:0", "torch.float64"]
    assert child.data["copy_to_host"] == ["cpu", [0, 1, 2, 3, 4, 5], True]
    assert child.data["copy_from_host"]["device"] == "flagos:0" and child.data["copy_from_host"]["values"] == [7.0] * 6
    assert child.data["to_other_device"] == ["flagos:1", [0, 1, 2, 3, 4, 5], 6 * 8]
    assert child.data["across_devices"] == {
        "device": "flagos:1",
        "dtype": "torch.float32",
        "shape": [6],
        "values": [0, 1, 2, 3, 4, 5],
    }


def test_cpu_route_moves_data_without_reentering_the_router(run_child, write_conf):
    # _to_copy and copy_ routed (so the router logs them); hypot on the cpu route must not call them.
    path, _ = write_conf("cpu_hypot.conf", "default = native\n_to_copy = native\ncopy_ = native\nhypot = cpu\n")
    child = run_child(
        """
        import torch, torch_fl
        a, b = torch.randn(5), torch.randn(5)
        fa, fb = a.to("flagos"), b.to("flagos")
        mark("hypot")
        out = torch.hypot(fa, fb)
        mark("hypot:after")
        report("hypot", [str(out.device), torch.equal(out.cpu(), torch.hypot(a, b))])
        """,
        {"FLAGOS_BACKEND_CONFIG": str(path), "FLAGOS_LOG": "dispatch"},
    )
    assert child.dispatch("hypot") == [("hypot", "cpu")], child.describe()
    assert child.data["hypot"] == ["flagos:0", True]


def test_a_cpu_default_keeps_transfers_native(run_module, write_conf):
    path, _ = write_conf("cpu_default.conf", "default = cpu\n")
    child = run_module(["route", "_to_copy"], {"FLAGOS_BACKEND_CONFIG": str(path)})
    assert "_to_copy -> native" in child.stdout and "data-movement op kept native" in child.stdout, child.describe()
