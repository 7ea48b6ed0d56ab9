"""Compile under the host-read trap (FLAGOS_EMU_TRAP=1, csrc/runtime/host_access.h): Inductor's C++ kernels read
flagos memory on the host legitimately, so the wrapper opens their arguments' blocks for each call
(torch_fl/compile/host.py); without that opening the same kernels fault, which shows they are what the trap
guards."""

from __future__ import annotations

import signal

TRAP = {"FLAGOS_EMU_TRAP": "1"}

TRAIN = """
import torch, torch_fl
{prepare}
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2)).to("flagos")
x = torch.randn(4, 8).to("flagos")
out = torch.compile(model)(x)
out.sum().backward()
want = model(x)
report("same", torch.allclose(out.cpu(), want.cpu(), atol=1e-6))
report("grad", model[0].weight.grad is not None)
"""


def test_compiled_kernels_run_under_the_trap(run_child):
    child = run_child(TRAIN.format(prepare=""), TRAP)
    assert child.data == {"same": True, "grad": True}, child.describe()


def test_without_opening_the_blocks_the_trap_catches_the_kernels(run_child):
    # the control: the same compiled kernels, called without opening their blocks, are stopped by the trap
    prepare = "import torch_fl.compile.host as host\nhost.call = host._plain"
    child = run_child(TRAIN.format(prepare=prepare), TRAP, expect_ok=False)
    assert child.rc == -signal.SIGSEGV, child.describe()
    assert "[flagos trap] host access to flagos device memory" in child.stderr, child.describe()
