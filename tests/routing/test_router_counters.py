"""The router's phase counters (csrc/dispatch/counters.h): off unless asked for, and when on, one row per operator
and router path with every call counted and its host time split into the re-tag's phases and the vendor kernel."""

from __future__ import annotations

import pytest

CHECKS = r"""
import torch, torch.nn.functional as F, torch_fl
from torch_fl import _core

x, y = torch.randn(64, 64).to("flagos"), torch.randn(64, 64).to("flagos")
for _ in range(5):
    x + y
report("off", _core.router_counters())

_core.set_router_counters(True)
for _ in range(7):
    x + y            # the unboxed fast path
for _ in range(3):
    F.softplus(x)    # no fast entry: the boxed router
torch.randn(4).to("flagos")  # a copy onto the device
_core.set_router_counters(False)
x + y                # not counted
report("on", [[op, path, calls, list(ns)] for op, path, calls, ns in _core.router_counters()])
_core.reset_router_counters()
report("reset", _core.router_counters())
"""


@pytest.fixture(scope="module")
def checks(module_child):
    return module_child(CHECKS)


def test_counters_are_off_by_default(checks):
    assert checks.data["off"] == []


def test_each_router_path_counts_its_calls_and_phases(checks):
    rows = {(op, path): (calls, ns) for op, path, calls, ns in checks.data["on"]}
    assert rows[("add.Tensor", "fast")][0] == 7, rows
    assert rows[("softplus", "boxed")][0] == 3, rows
    assert rows[("_copy_from", "copy")][0] == 1, rows
    for (op, path), (_, ns) in rows.items():
        arguments, kernel, _results, _release = ns
        assert min(ns) >= 0, (op, path, ns)
        assert kernel > 0 and arguments > 0, (op, path, ns)  # the vendor kernel and the re-tag both took time


def test_reset_clears_the_rows(checks):
    assert checks.data["reset"] == []
