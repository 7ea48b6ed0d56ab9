"""Generic bodies the vendor replaces with a kernel of its own reach that kernel on flagos too: torch implements
_grouped_mm, addr, native_group_norm and a few others once for every device (CompositeExplicitAutograd) and CPU or
CUDA registers its own kernel over it. Without a name in the router flagos would run the generic body, where plain
CUDA runs the vendor's kernel (_grouped_mm's body reads the group offsets on the host, which no graph can hold). The
router takes them by name (torch_fl/routing/dispatcher.py); on a CUDA node _grouped_mm is among them."""

from __future__ import annotations

import pytest

CHECKS = r"""
import torch, torch_fl
from torch_fl.routing import dispatcher

replaced = sorted(dispatcher._vendor_replaced_composites())
report("replaced", replaced)
report("unreached", [op for op in replaced if not torch_fl.reaches_router(op)])
report("cuda_grouped_mm", dispatcher.has_kernel("_grouped_mm", "CUDA"))

torch.manual_seed(0)
a, b, m = torch.randn(5), torch.randn(3), torch.randn(5, 3)
mark("addr")
got = torch.addr(m.to("flagos"), a.to("flagos"), b.to("flagos"))
mark("addr:after")
report("addr", (got.cpu() - torch.addr(m, a, b)).abs().max().item())

x = torch.randn(8, 16, dtype=torch.bfloat16)
w = torch.randn(2, 16, 8, dtype=torch.bfloat16)
offs = torch.tensor([3, 8], dtype=torch.int32)
mark("grouped")
got = torch._grouped_mm(x.to("flagos"), w.to("flagos"), offs.to("flagos"))
mark("grouped:after")
report("grouped", (got.cpu().float() - torch._grouped_mm(x, w, offs).float()).abs().max().item())
"""


@pytest.fixture(scope="module")
def checks(module_child):
    return module_child(CHECKS, {"FLAGOS_LOG": "dispatch"})


def test_the_vendors_replacements_are_found_in_the_dispatcher_and_routed(checks):
    replaced = set(checks.data["replaced"])
    assert {"addr", "native_group_norm"} <= replaced, replaced
    assert ("_grouped_mm" in replaced) == checks.data["cuda_grouped_mm"], "CUDA's own kernel, where torch has it"
    assert checks.data["unreached"] == []


def test_addr_reaches_the_router_as_itself(checks):
    assert [op for op, _ in checks.dispatch("addr")] == ["addr"], checks.dispatch("addr")
    assert checks.data["addr"] < 1e-5


def test_grouped_mm_equals_the_hosts(checks):
    # On the emulation the host's kernel is the generic body itself; on CUDA the router reaches CUDA's kernel
    assert checks.data["grouped"] < 1e-2
