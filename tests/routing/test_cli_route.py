"""``python -m torch_fl route``: the op as torch names it, and what it says matches the route in force."""

from __future__ import annotations

import json


def test_route_takes_the_name_torch_prints(run_module):
    plain = json.loads(run_module(["route", "mm", "--json"]).stdout)
    prefixed = json.loads(run_module(["route", "aten::mm", "--json"]).stdout)
    assert prefixed == plain and plain["op"] == "mm"


def test_an_op_on_the_default_route_is_named_as_itself(run_module):
    route = json.loads(run_module(["route", "relu", "--json"]).stdout)
    assert route["op"] == "relu" and route["origin"].startswith("default")


def test_the_fast_path_is_claimed_only_on_the_native_route(run_module):
    native = run_module(["route", "add.Tensor"], env={"FLAGOS_OP_add__Tensor": "native"}).stdout
    assert "unboxed fast path" in native
    cpu = run_module(["route", "add.Tensor"], env={"FLAGOS_OP_add__Tensor": "cpu"})
    assert cpu.stdout.startswith("add.Tensor -> cpu") and "unboxed fast path" not in cpu.stdout
    assert json.loads(run_module(["route", "add.Tensor", "--json"], env={"FLAGOS_OP_add__Tensor": "cpu"}).stdout)[
        "fast_path"
    ] is False
