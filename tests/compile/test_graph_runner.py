"""The graph runner of mode="reduce-overhead" (torch_fl/compile/graph_runner.py), driven with plain callables of
flagos ops in Inductor's boxed convention, on every vendor (the emulation's FlagosGraph records the op stream; on
CUDA it is a CUDA graph): replays equal eager work, inputs are copied or read in place as Inductor declares them,
keys record again, mutated inputs skip, and an overwritten output cannot be read silently; keys that never come
twice are named, the recordings of one function share its pool and one call expires what any earlier call
returned, and a vendor's refusal of a kernel's inner work under capture becomes a named skip with the function run
as compiled code."""

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
        args.clear()  # Inductor's convention: the callee frees its inputs
        return self.body(*values)


def _host(t: torch.Tensor) -> torch.Tensor:
    return t.detach().cpu()


def test_replays_equal_eager_and_run_no_python():
    model = Counted(lambda x, w, n: ((x * w + n).relu(), (x - w).sum()))
    runner = GraphRunner(model, static_input_idxs=[1])
    w = torch.randn(16).to("flagos")
    for _ in range(5):
        x = torch.randn(16)
        relu, total = runner([x.to("flagos"), w, 2])
        torch.testing.assert_close(_host(relu), (x * w.cpu() + 2).relu())
        torch.testing.assert_close(_host(total), (x - w.cpu()).sum())
    assert model.calls == 2, "a warm-up and a capture; the three later calls must be replays"
    assert isinstance(runner.recordings[(2, torch.Size([16]))], Recording)


def test_other_inputs_are_copied_static_ones_read_in_place():
    model = Counted(lambda x, w: x * w)
    runner = GraphRunner(model, static_input_idxs=[1])
    w = torch.ones(8).to("flagos")
    x = torch.arange(8.0).to("flagos")
    runner([x, w])
    runner([x, w])
    recording = runner.recordings[(torch.Size([8]),)]
    assert recording.buffers[1] is w, "a static input is the recording's own input"
    assert recording.buffers[0].data_ptr() != x.data_ptr(), "another input is copied into a buffer of its own"
    w.fill_(3.0)  # in place: the next replay reads it
    y = torch.full((8,), 2.0)
    torch.testing.assert_close(_host(runner([y.to("flagos"), w])), y * 3)
    assert model.calls == 2


def test_a_moved_static_input_records_again():
    model = Counted(lambda x, w: x + w)
    runner = GraphRunner(model, static_input_idxs=[1])
    x = torch.ones(4).to("flagos")
    runner([x, torch.zeros(4).to("flagos")])
    runner([x, torch.zeros(4).to("flagos")])  # another address: recorded for the new one
    moved = torch.full((4,), 5.0).to("flagos")
    torch.testing.assert_close(_host(runner([x, moved])), torch.full((4,), 6.0))
    assert runner.rerecords >= 1 and model.calls >= 3


def test_a_new_int_key_records_again():
    model = Counted(lambda x, n: x * n)
    runner = GraphRunner(model)
    x = torch.arange(6.0)
    for n in (2, 2, 2, 3, 3, 3, 2):
        torch.testing.assert_close(_host(runner([x.to("flagos"), n])), x * n)
    assert set(runner.recordings) == {(2, torch.Size([6])), (3, torch.Size([6]))}
    assert model.calls == 4, "a warm-up and a capture per key; every other call replays"


def test_a_new_shape_of_a_copied_input_records_again():
    runner = GraphRunner(Counted(lambda x: x.exp()))
    for size in (3, 3, 5, 5, 3):
        x = torch.randn(size)
        torch.testing.assert_close(_host(runner([x.to("flagos")])), x.exp())
    assert len(runner.recordings) == 2


@pytest.fixture
def skip_log():
    """The lines of Inductor's cudagraphs log (torch's handler writes to the stream it found at set-up)."""
    from torch._inductor import cudagraph_utils

    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    cudagraph_utils.cudagraphs_log.addHandler(handler)
    yield lines
    cudagraph_utils.cudagraphs_log.removeHandler(handler)


def test_a_mutated_input_that_is_not_static_skips_graphs(skip_log):
    model = Counted(lambda x: x.add_(1))
    runner = GraphRunner(model, mutated_input_idxs=[0])
    before = counters["inductor"]["cudagraph_skips"]
    x = torch.zeros(3).to("flagos")
    for _ in range(3):
        runner([x])
    assert counters["inductor"]["cudagraph_skips"] == before + 1
    assert "mutated inputs" in runner.skipped
    assert any("skipping cudagraphs due to mutated inputs" in line for line in skip_log), "logged as Inductor does"
    assert model.calls == 3 and not runner.recordings, "skipped: the compiled code runs as is, every call"
    torch.testing.assert_close(_host(x), torch.full((3,), 3.0))


def test_a_mutated_static_input_is_updated_once_per_call():
    # A KV cache marked static and written by the graph: the warm-up, the capture and each replay add one step
    model = Counted(lambda x, cache: (cache.add_(x), cache.sum())[1])
    runner = GraphRunner(model, static_input_idxs=[1], mutated_input_idxs=[1])
    cache = torch.zeros(4).to("flagos")
    for step in range(1, 6):
        total = runner([torch.ones(4).to("flagos"), cache])
        torch.testing.assert_close(_host(cache), torch.full((4,), float(step)))
        assert float(_host(total)) == 4.0 * step
    assert runner.skipped is None and model.calls == 2


def test_the_previous_output_is_unreadable_after_the_next_call():
    runner = GraphRunner(Counted(lambda x: (x * 2, x + 1)), stack_traces=['  File "model.py", line 7, in forward'])
    x = torch.arange(4.0)
    runner([x.to("flagos")])  # warm-up: its results are fresh tensors of their own
    first = runner([x.to("flagos")])
    kept, view = first[0].clone(), first[0][1:]
    second = runner([(x + 10).to("flagos")])
    for stale in (first[0], view):
        with pytest.raises(RuntimeError, match=r"overwritten its memory.*Clone it") as info:
            _host(stale)
        assert "model.py" in str(info.value), "the message says where the output was made"
    torch.testing.assert_close(_host(kept), x * 2)
    torch.testing.assert_close(_host(second[0]), (x + 10) * 2)
    torch.testing.assert_close(_host(second[1]), x + 11)


def test_an_output_fed_back_as_the_next_input_is_read_before_it_expires():
    runner = GraphRunner(Counted(lambda x: (x * 2,)))
    x = torch.ones(4).to("flagos")
    for _ in range(5):
        (x,) = runner([x])
    torch.testing.assert_close(_host(x), torch.full((4,), 32.0))


def test_an_output_that_views_a_static_input_stays_readable():
    runner = GraphRunner(Counted(lambda x, w: (x * w, w[:2])), static_input_idxs=[1])
    w = torch.arange(4.0).to("flagos")
    outs = [runner([torch.ones(4).to("flagos"), w]) for _ in range(4)]
    assert outs[1][1].data_ptr() == w.data_ptr()
    torch.testing.assert_close(_host(outs[1][1]), torch.arange(2.0))  # the caller's memory: never overwritten


def test_an_uncapturable_op_skips_graphs_naming_it(skip_log):
    model = Counted(lambda x: x * float(x.sum().item()))  # a host read: a replay would keep the captured value
    runner = GraphRunner(model)
    for scale in (1.0, 2.0, 3.0):
        x = torch.full((2,), scale)
        torch.testing.assert_close(_host(runner([x.to("flagos")])), x * (2 * scale))
    assert runner.skipped is not None and "_local_scalar_dense" in runner.skipped
    assert any("uncapturable op" in line for line in skip_log) and model.calls == 4


def _address_checks():
    from torch_fl.compile._torch_compat import cudagraphs

    checks = [cudagraphs.addresses_stayed]
    native = getattr(torch._C, "_tensors_data_ptrs_at_indices_equal", None)
    if callable(native):  # CUDA builds of torch: the runner uses torch's own check, which must read the same way
        checks.append(native)
    return checks


@pytest.mark.parametrize("check", _address_checks(), ids=lambda c: c.__name__)
def test_static_addresses_are_read_indexed_like_the_inputs(check):
    # pointers has one entry per input (None where nothing is checked), as torch's check reads it: a list of only
    # the checked pointers would be read out of range
    x, w, v = (torch.zeros(4).to("flagos") for _ in range(3))
    pointers = [None, w.data_ptr(), None, v.data_ptr()]
    assert check([x, w, 3, v], pointers, [1, 3])
    assert not check([x, x, 3, v], pointers, [1, 3]), "a moved static input must be noticed"
    assert not check([x, w, 3, x], pointers, [1, 3])


# ---- keys that never recur, one pool per function, refusals under capture -------------------------------------


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
