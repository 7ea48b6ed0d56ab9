"""The graph runner across keys and refusals (torch_fl/compile/graph_runner.py), driven with plain callables of
flagos ops in Inductor's boxed convention on every vendor: keys that never come twice are named, the recordings of
one function share its pool and one call expires what any earlier call returned, and a vendor's refusal of a
kernel's inner work under capture becomes a named skip with the function run as compiled code."""

from __future__ import annotations

import logging

import pytest
import torch
from torch._dynamo.utils import counters
from torch._inductor import config as inductor_config

import torch_fl  # noqa: F401  (registers the flagos device)
from torch_fl.compile.graph_runner import GraphRunner, Recording


class Counted:
    """A boxed model that counts how often its Python body runs (a replay does not run it)."""

    def __init__(self, body):
        self.body = body
        self.calls = 0

    def __call__(self, args: list):
        self.calls += 1
        values = list(args)
        args.clear()
        return self.body(*values)


def _host(t: torch.Tensor) -> torch.Tensor:
    return t.detach().cpu()


@pytest.fixture
def skip_log():
    """The lines of Inductor's cudagraphs log."""
    from torch._inductor import cudagraph_utils

    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    cudagraph_utils.cudagraphs_log.addHandler(handler)
    yield lines
    cudagraph_utils.cudagraphs_log.removeHandler(handler)


@inductor_config.patch({"triton.cudagraph_dynamic_shape_warn_limit": 4})
def test_an_int_input_new_on_every_call_is_named_and_warned_about(skip_log):
    # A sliding-window cache's host-counted length: each decode step hands the graph an int it never saw
    model = Counted(lambda x, n: x * n)
    runner = GraphRunner(model)
    x = torch.arange(4.0)
    assert runner.reason() is None, "no call yet"
    for n in range(10, 16):
        torch.testing.assert_close(_host(runner([x.to("flagos"), n])), x * n)
    assert model.calls == 6 and not any(isinstance(r, Recording) for r in runner.recordings.values())
    reason = runner.reason()
    assert reason is not None and "each of 6 calls brought a new key" in reason and "int inputs at [1]" in reason
    warned = [line for line in skip_log if "distinct sizes" in line]
    assert len(warned) == 1, f"torch's warning past its limit, once, as the trees log it: {skip_log}"
    runner([x.to("flagos"), 15])  # a key seen before: recorded now, and nothing left to name
    assert runner.reason() is None and isinstance(runner.recordings[(15, torch.Size([4]))], Recording)


def test_a_function_warming_up_its_first_key_names_nothing():
    runner = GraphRunner(Counted(lambda x: x + 1))
    runner([torch.zeros(2).to("flagos")])
    assert runner.reason() is None and runner.skipped is None


def test_the_recordings_of_one_function_share_its_pool():
    runner = GraphRunner(Counted(lambda x, n: x * n))
    x = torch.arange(3.0)
    for n in (2, 2, 3, 3):
        runner([x.to("flagos"), n])
    recordings = [r for r in runner.recordings.values() if isinstance(r, Recording)]
    assert len(recordings) == 2
    assert recordings[0].graph.pool() == recordings[1].graph.pool() == runner.pool()
    assert GraphRunner(Counted(lambda x: x)).pool() != runner.pool(), "another function, another pool"


def test_a_call_with_another_key_expires_what_the_last_call_returned():
    # The pool is shared: the replay of one key may write where another key's outputs live
    runner = GraphRunner(Counted(lambda x, n: (x * n,)))
    x = torch.arange(4.0)
    for n in (2, 2, 3, 3):
        runner([x.to("flagos"), n])
    two = runner([x.to("flagos"), 2])[0]
    kept = two.clone()
    three = runner([(x + 1).to("flagos"), 3])[0]
    with pytest.raises(RuntimeError, match="Clone it"):
        _host(two)
    torch.testing.assert_close(_host(kept), x * 2)
    torch.testing.assert_close(_host(three), (x + 1) * 3)
    again = runner([x.to("flagos"), 2])[0]  # and back: the other key's outputs expire in turn
    with pytest.raises(RuntimeError, match="Clone it"):
        _host(three)
    torch.testing.assert_close(_host(again), x * 2)


CUDA_COPY_REFUSAL = (
    "Cannot copy between CPU and CUDA tensors during CUDA graph capture unless the CPU tensor is pinned."
)


@pytest.fixture(scope="module")
def failing_on_capture():
    """``fltest::second_call_fails(x, n)``: its second call per ``n`` (a runner's capture) raises the message at
    ``n`` (0: CUDA's refusal of a host copy inside a kernel during a capture; 1: an error of another kind); every
    other call adds one."""
    messages = [CUDA_COPY_REFUSAL, "the kernel's own failure"]
    library = torch.library.Library("fltest", "DEF")
    library.define("second_call_fails(Tensor x, int n) -> Tensor")
    calls = [0, 0]

    def kernel(x: torch.Tensor, n: int) -> torch.Tensor:
        calls[n] += 1
        if calls[n] == 2:
            raise RuntimeError(messages[n])
        return x + 1

    library.impl("second_call_fails", kernel, "PrivateUse1")
    yield torch.ops.fltest.second_call_fails
    library._destroy()


def test_a_kernel_refused_under_capture_skips_graphs_naming_it(failing_on_capture, skip_log):
    model = Counted(lambda x: failing_on_capture(x * 2, 0))
    runner = GraphRunner(model)
    before = counters["inductor"]["cudagraph_skips"]
    x = torch.arange(3.0)
    for _ in range(4):
        torch.testing.assert_close(_host(runner([x.to("flagos")])), x * 2 + 1)
    assert runner.skipped is not None and "fltest::second_call_fails" in runner.skipped
    assert "during CUDA graph capture" in runner.skipped, runner.skipped
    assert runner.reason() == runner.skipped
    assert counters["inductor"]["cudagraph_skips"] == before + 1
    assert any("skipping cudagraphs due to an uncapturable op" in line for line in skip_log)
    assert model.calls == 5, "a warm-up, the failed capture, then the compiled code as is on each call"


def test_another_error_of_a_kernel_under_capture_is_raised_not_skipped(failing_on_capture):
    runner = GraphRunner(Counted(lambda x: failing_on_capture(x, 1)))
    runner([torch.zeros(2).to("flagos")])
    with pytest.raises(RuntimeError, match="the kernel's own failure"):
        runner([torch.zeros(2).to("flagos")])
    assert runner.skipped is None
