"""import torch_fl stays light: torch's compile stack is imported and flagos registered only when compiling."""

from __future__ import annotations

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
