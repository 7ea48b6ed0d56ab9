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
    assert (
        json.loads(run_module(["route", "add.Tensor", "--json"], env={"FLAGOS_OP_add__Tensor": "cpu"}).stdout)[
            "fast_path"
        ]
        is False
    )


# a composite and a device kernel, text and --json, in one child (the composite's parts come from OpInfo's samples,
# whose import is most of the child's time); addmm overridden so the parts show the route each really took
COMPOSITE_CALLS = r"""
import contextlib, io
import torch_fl.__main__ as cli
for label, argv in {"linear": ["route", "linear", "--json"], "linear_text": ["route", "linear"],
                    "kernel": ["route", "empty.memory_format", "--json"]}.items():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = cli.main(argv)
    report(label, [rc, out.getvalue()])
"""


def test_route_names_the_ops_a_composite_becomes(run_child):
    data = run_child(COMPOSITE_CALLS, env={"FLAGOS_OP_addmm": "cpu"}).data
    rc, out = data["linear"]
    route = json.loads(out)
    assert rc == 0 and route["reaches_router"] is False and route["device_kernel"] is False
    assert ["addmm", "cpu"] in route["becomes"], route["becomes"]
    rc, text = data["linear_text"]
    assert "torch decomposes linear" in text and "addmm -> cpu" in text, text
    rc, out = data["kernel"]
    kernel = json.loads(out)
    assert kernel["device_kernel"] is True and kernel["becomes"] is None


# torch's OpInfo database imports numpy and expecttest, which a plain torch install lacks; numpy is made absent here
WITHOUT_TEST_DATABASE = r"""
import contextlib, io, sys
sys.modules["numpy"] = None  # import numpy now raises ImportError, as in a venv holding only torch
import torch_fl.__main__ as cli
out = io.StringIO()
with contextlib.redirect_stdout(out):
    rc = cli.main(["route", "linear"])
report("linear", [rc, out.getvalue()])
"""


def test_a_composite_without_torchs_test_database_gets_the_note(run_child):
    rc, text = run_child(WITHOUT_TEST_DATABASE).data["linear"]
    assert rc == 0 and "torch decomposes linear" in text and "FLAGOS_LOG=dispatch" in text, text
    assert "numpy and expecttest" in text, text
