"""import torch_fl stays light: torch's compile stack is imported and flagos registered only when compiling."""

from __future__ import annotations

import pytest

LAZY = """
import sys, torch, torch_fl
report("dynamo_after_import", "torch._dynamo" in sys.modules)
report("inductor_after_import", "torch._inductor.compile_fx" in sys.modules)
report("registered_after_import", torch_fl.compile.registered())
out = torch.compile(lambda x: x * 2 + 1)(torch.arange(4.0).to("flagos"))
report("registered_after_compile", torch_fl.compile.registered())
report("out", out.cpu().tolist())
"""

EARLY = """
import torch._dynamo, torch._inductor.compile_fx   # the compile stack first, torch_fl after
import torch, torch_fl
report("registered_after_import", torch_fl.compile.registered())
report("out", torch.compile(lambda x: x - 1)(torch.arange(3.0).to("flagos")).cpu().tolist())
"""


def test_registration_waits_for_the_compile_stack(run_child):
    child = run_child(LAZY)
    assert child.data == {
        "dynamo_after_import": False,
        "inductor_after_import": False,
        "registered_after_import": False,
        "registered_after_compile": True,
        "out": [1.0, 3.0, 5.0, 7.0],
    }, child.describe()


def test_registration_when_the_compile_stack_came_first(run_child):
    child = run_child(EARLY)
    assert child.data == {"registered_after_import": True, "out": [-1.0, 0.0, 1.0]}, child.describe()


BROKEN = """
import warnings, torch, torch_fl
from torch_fl.compile import _register

def unknown_torch():
    raise AttributeError("an internal this torch line renamed")

_register.inductor = unknown_torch                 # as if _torch_compat did not know this torch line
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    on_cpu = torch.compile(lambda x: x * 2)(torch.ones(2))
report("cpu", on_cpu.tolist())
report("warned", [str(w.message) for w in caught if "cannot use flagos" in str(w.message)])
try:
    torch.compile(lambda x: x * 2)(torch.ones(2).to("flagos"))
    report("flagos", "ran")
except Exception as exc:
    report("flagos", type(exc).__name__)
"""


def test_a_failed_registration_warns_and_leaves_other_devices_alone(run_child):
    child = run_child(BROKEN)
    assert child.data["cpu"] == [2.0, 2.0], child.describe()
    assert len(child.data["warned"]) == 1 and "renamed" in child.data["warned"][0], child.describe()
    assert child.data["flagos"] != "ran", child.describe()


def test_this_torch_line_has_every_internal_the_registration_uses():
    # the one list of torch internals torch_fl's compile support leans on (torch_fl/compile/_torch_compat/)
    from torch_fl.compile import _torch_compat

    assert _torch_compat.problems(gpu=False) == []
    assert _torch_compat.problems(gpu=True) == []


FIRST_IN_TABLE = """
import torch, torch_fl
torch.compile(lambda x: x + 1)(torch.ones(2).to("flagos"))   # flagos registers before torch asks for any device
from torch._inductor.codegen.common import get_device_op_overrides
report("cuda", type(get_device_op_overrides("cuda")).__name__)
report("flagos", type(get_device_op_overrides("flagos")).__module__)
"""


def test_torch_s_own_devices_keep_their_device_calls(run_child):
    # torch 2.11 fills its table of device calls lazily, only while it is empty (later lines keep a flag): flagos
    # joining it first must not leave cuda with the CPU's calls
    child = run_child(FIRST_IN_TABLE)
    assert child.data == {"cuda": "CUDADeviceOpOverrides", "flagos": "torch_fl.compile.codegen"}, child.describe()


HEURISTICS = """
import torch, torch_fl
torch.compile(lambda x: x + 1)(torch.ones(2).to("flagos"))   # registers flagos (the emulation: its vendor is cpu)
from torch._inductor.template_heuristics import registry
table = registry._TEMPLATE_HEURISTIC_REGISTRY
def entries(device):
    return sorted(f"{k[0]}/{k[2]}: {heuristic.__qualname__}" for k, heuristic in table.items() if k[1] == device)
report("vendor", entries("cpu"))
report("flagos", entries("flagos"))
"""


def test_flagos_takes_its_vendors_matmul_template_heuristics(run_child):
    # without them every matmul lowering on a GPU logged "No template heuristic found ... device_type=flagos"
    pytest.importorskip("torch._inductor.template_heuristics.registry", reason="this torch line has no such table")
    child = run_child(HEURISTICS)
    assert child.data["vendor"], child.describe()
    assert child.data["flagos"] == child.data["vendor"], child.describe()
