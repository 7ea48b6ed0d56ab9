"""Graph breaks, guards and recompiles on flagos behave as torch's do elsewhere (reduce-overhead:
test_reduce_overhead.py)."""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.utils import counters

import torch_fl


@pytest.fixture(autouse=True)
def _seeded():
    # Compiled and eager float32 differ in rounding (fusion, reduction order); a fixed seed keeps each run's inputs
    # the same, and torch's float32 tolerance (the default of assert_close) is the bar
    torch.manual_seed(0)


def _graphs() -> int:
    return counters["stats"]["unique_graphs"]


def test_recompiles_on_a_new_shape():
    def f(x):
        return torch.nn.functional.gelu(x) * x.sum()

    compiled = torch.compile(f)
    before = _graphs()
    for shape in [(8,), (8,), (5, 3), (7, 2)]:
        x = torch.randn(shape).to("flagos")
        torch.testing.assert_close(compiled(x).cpu(), f(x).cpu())
    assert _graphs() - before >= 2, "the second shape should compile a second graph"


def test_guards_on_device_recompile_for_cpu_tensors():
    def f(x):
        return x.cos() + 2

    compiled = torch.compile(f)
    on_flagos = compiled(torch.ones(4).to("flagos"))
    on_cpu = compiled(torch.ones(4))
    assert on_flagos.device.type == "flagos" and on_cpu.device.type == "cpu"
    torch.testing.assert_close(on_flagos.cpu(), on_cpu)


def test_graph_break_splits_and_stays_correct():
    def f(x):
        y = x.exp() * 2
        torch._dynamo.graph_break()
        return y.log() + x

    compiled = torch.compile(f)
    before = _graphs()
    x = torch.rand(16).to("flagos") + 0.5
    torch.testing.assert_close(compiled(x).cpu(), f(x).cpu())
    assert _graphs() - before == 2


def test_compiled_code_runs_on_the_current_flagos_stream():
    # On a GPU the generated kernels are launched on the vendor's raw stream of the current flagos stream; work
    # queued on a side stream must be complete once that stream is synchronized (under emulation every stream is
    # one serial queue, and this checks the plumbing).
    def f(x):
        return (x * 3).tanh() + x

    compiled = torch.compile(f)
    x = torch.randn(1 << 16).to("flagos")
    want = f(x).cpu()
    side = torch.flagos.Stream()
    side.wait_stream(torch.flagos.current_stream())
    with torch.flagos.stream(side):
        got = compiled(x)
    side.synchronize()
    assert torch.flagos.current_stream() != side
    torch.testing.assert_close(got.cpu(), want)


def test_graph_buffers_come_from_flagos_own_allocation_call():
    # Inductor writes a direct allocation call for cpu and cuda buffers and a generic empty_strided(...,
    # device=...) for every other device; flagos' wrappers use torch_fl._core.empty_strided instead
    from torch._inductor.utils import run_and_get_code

    def f(x, w):
        y = (x @ w).relu()
        return (y * 2 + 1).sum(0), y.t().contiguous()

    x, w = torch.randn(8, 16), torch.randn(16, 4)
    got, codes = run_and_get_code(torch.compile(f), x.to("flagos"), w.to("flagos"))
    code = "\n".join(codes)
    allocations = [line for line in code.splitlines() if " = empty_strided" in line]
    assert allocations and all("empty_strided_flagos(" in line for line in allocations), allocations
    for g, want in zip(got, f(x, w), strict=True):
        assert g.device.type == "flagos"
        torch.testing.assert_close(g.cpu(), want, rtol=1e-5, atol=1e-5)


def test_the_allocation_call_allocates_on_the_current_flagos_device():
    t = torch_fl._core.empty_strided((2, 3), (1, 2), torch.float16)
    assert (t.device.type, t.shape, t.stride(), t.dtype) == ("flagos", (2, 3), (1, 2), torch.float16)
    with pytest.raises(RuntimeError, match="mismatch in length of strides and shape"):
        torch_fl._core.empty_strided((2, 3), (1,), torch.float32)


def test_compiled_callable_captured_by_a_flagos_graph_replays_its_work():
    # A flagos capture sees ATen calls through a dispatch mode; generated kernels are not ATen calls. Under the
    # mode Dynamo runs the callable's ATen ops where the capture sees them, so the replay redoes all of its work:
    # if compiled kernels ever ran unseen under a capture, this replay would leave `out` stale.
    compiled = torch.compile(lambda x: (x.sin() * 2 + 1).relu())
    x = torch.randn(64).to("flagos")
    compiled(x)
    g = torch.flagos.FlagosGraph()
    with torch.flagos.graph(g):
        out = compiled(x)
    new = torch.randn(64)
    x.copy_(new)
    g.replay()
    torch.testing.assert_close(out.cpu(), (new.sin() * 2 + 1).relu())
