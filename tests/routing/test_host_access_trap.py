"""FLAGOS_EMU_TRAP=1: emulated device memory cannot be read or written by the host, except through
the router's re-tagged calls and the device's own copies.

A host read of flagos memory works by accident under plain emulation (it is host memory) and fails
on an accelerator; with the trap it ends the process with a message that says what happened.
"""

from __future__ import annotations

import signal

import pytest

TRAP = {"FLAGOS_EMU_TRAP": "1"}

STRAY = """
import ctypes, torch, torch_fl
x = torch.arange(1024, dtype=torch.float32).to("flagos")
y = (x * 2).sum()              # routed calls open the memory they use
report("routed", y.item())
kind = {kind!r}
if kind == "read":
    value = ctypes.c_float.from_address(x.data_ptr() + 4 * 3).value
else:
    ctypes.c_float.from_address(x.data_ptr()).value = 5.0
    value = x[0].item()
report("host_access", value)
"""


@pytest.mark.parametrize("kind", ["read", "write"])
def test_host_access_to_flagos_memory_is_caught(run_child, kind):
    child = run_child(STRAY.format(kind=kind), TRAP, expect_ok=False)
    assert child.data["routed"] == 2 * sum(range(1024)), child.describe()
    assert "host_access" not in child.data, child.describe()
    assert child.rc == -signal.SIGSEGV, child.describe()
    assert "[flagos trap] host access to flagos device memory" in child.stderr, child.describe()


@pytest.mark.parametrize("kind", ["read", "write"])
def test_without_the_trap_the_same_access_goes_unnoticed(run_child, kind):
    # The control: what the trap catches is the host access, not something else in the script.
    child = run_child(STRAY.format(kind=kind), {"FLAGOS_EMU_TRAP": "0"})
    assert child.data["host_access"] == (3.0 if kind == "read" else 5.0)


def test_routed_work_runs_under_the_trap(run_child):
    # Every path that legitimately touches device memory: native and cpu routes, the fast path,
    # copies both ways and across devices, resizes, out=, views, autograd on its device thread, and
    # kernels on two threads at once.
    child = run_child(
        """
        import threading, torch, torch_fl
        torch.manual_seed(0)
        a = torch.randn(64, 64)
        fa = a.to("flagos")
        got = {}
        got["mm"] = torch.equal((fa @ fa).cpu(), a @ a)
        got["hypot_cpu_route"] = torch.equal(torch.hypot(fa, fa).cpu(), torch.hypot(a, a))
        out = torch.empty(0, device="flagos")
        torch.add(fa, 1, out=out)
        got["out_resized"] = torch.equal(out.cpu(), a + 1)
        got["view"] = torch.equal(fa.t()[3].cpu(), a.t()[3])
        if torch.flagos.device_count() > 1:
            got["across"] = torch.equal(fa.to("flagos:1").cpu(), a)
        w = fa.clone().requires_grad_()
        (w.sin() * 2).sum().backward()
        got["backward"] = torch.allclose(w.grad.cpu(), 2 * a.cos())
        results = []
        def work():
            results.append(torch.equal((fa * 3).cpu(), a * 3))
        threads = [threading.Thread(target=work) for _ in range(4)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        got["threads"] = results == [True] * 4
        got["storage_resize"] = fa.clone().resize_(128, 64)[:64].cpu().equal(a)
        report("got", got)
        """,
        {**TRAP, "FLAGOS_OP_hypot": "cpu"},
    )
    assert child.data["got"] and all(child.data["got"].values()), child.data


def test_a_bad_trap_value_is_refused(run_argv):
    child = run_argv(["-c", "import torch_fl"], {"FLAGOS_EMU_TRAP": "yes"}, expect_ok=False)
    assert "FLAGOS_EMU_TRAP='yes' is not 0 or 1" in child.stderr, child.describe()
