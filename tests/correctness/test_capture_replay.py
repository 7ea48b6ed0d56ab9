"""Graph capture and replay on flagos (torch.flagos.FlagosGraph, graph, graph_pool_handle): the semantics a CUDA
graph has, on every vendor: a replay reads the captured inputs and writes the captured outputs in place, the
capture itself leaves existing memory alone, pools are shared by token, and an op a replay could not repeat is
refused at capture time by name."""

from __future__ import annotations

import pytest
import torch

import torch_fl  # noqa: F401
from torch_fl.graphs import CaptureError

DEV = "flagos"


def _capture(fn, pool=None):
    g = torch.flagos.FlagosGraph()
    with torch.flagos.graph(g, pool=pool):
        out = fn()
    return g, out


def test_replay_writes_outputs_in_place_from_captured_inputs():
    x = torch.randn(4, 5, device=DEV)
    y = torch.randn(4, 5, device=DEV)
    g, out = _capture(lambda: (x * 2 + y).relu())
    storage = out.untyped_storage().data_ptr()
    for _ in range(3):
        new_x, new_y = torch.randn(4, 5), torch.randn(4, 5)
        x.copy_(new_x)
        y.copy_(new_y)
        g.replay()
        assert out.untyped_storage().data_ptr() == storage
        torch.testing.assert_close(out.cpu(), (new_x * 2 + new_y).relu())


def test_capture_leaves_existing_memory_and_replay_applies_updates():
    w = torch.zeros(3, device=DEV)
    step = torch.ones(3, device=DEV)
    g, _ = _capture(lambda: w.add_(step))
    assert torch.equal(w.cpu(), torch.zeros(3)), "a capture runs nothing on a GPU: it must not update w"
    for _ in range(4):
        g.replay()
    assert torch.equal(w.cpu(), torch.full((3,), 4.0))
    step.fill_(0.5)
    g.replay()
    assert torch.equal(w.cpu(), torch.full((3,), 4.5))


def test_views_and_intermediates_follow_the_replay():
    x = torch.randn(2, 6, device=DEV)

    def body():
        mid = x.exp()
        return mid.view(3, 4).t().sum(dim=1)

    g, out = _capture(body)
    new = torch.randn(2, 6)
    x.copy_(new)
    g.replay()
    torch.testing.assert_close(out.cpu(), new.exp().view(3, 4).t().sum(dim=1))


def test_host_scalar_is_frozen_at_capture():
    x = torch.ones(3, device=DEV)
    scale = torch.tensor(2.0)
    g, out = _capture(lambda: x * scale)
    scale.fill_(5.0)
    g.replay()
    assert torch.equal(out.cpu(), torch.full((3,), 2.0))


def test_two_graphs_share_a_pool_and_chain():
    x = torch.randn(8, device=DEV)
    g1, mid = _capture(lambda: x + 1)
    g2, out = _capture(lambda: mid * 3, pool=g1.pool())
    assert g2.pool() == g1.pool()
    handle = torch.flagos.graph_pool_handle()
    assert handle != g1.pool()
    g3, other = _capture(lambda: x - 1, pool=handle)
    assert g3.pool() == handle
    new = torch.randn(8)
    x.copy_(new)
    g1.replay()
    g2.replay()
    g3.replay()
    torch.testing.assert_close(out.cpu(), (new + 1) * 3)
    torch.testing.assert_close(other.cpu(), new - 1)


@pytest.mark.parametrize(
    ("body", "op"),
    [
        (lambda x: x.sum().item(), "_local_scalar_dense"),
        (lambda x: x.cpu(), "_to_copy"),
        (lambda x: x.nonzero(), "nonzero"),
        (lambda x: x + torch.ones(4).to(DEV), "_to_copy"),
        (lambda x: x.copy_(torch.ones(4)), "copy_"),
    ],
    ids=["item", "cpu", "nonzero", "host-to-device", "copy-from-host"],
)
def test_uncapturable_op_is_refused_by_name(body, op):
    x = torch.ones(4, device=DEV)
    g = torch.flagos.FlagosGraph()
    with pytest.raises(CaptureError, match=rf"\b{op}\b.*cannot be captured"):
        with torch.flagos.graph(g):
            body(x)
    assert not torch.flagos.is_current_stream_capturing()
    assert torch.equal(x.cpu(), torch.ones(4))
    with pytest.raises(CaptureError, match="needs a finished capture"):
        g.replay()


def test_refusal_caught_inside_the_region_still_fails_the_capture():
    x = torch.ones(4, device=DEV)
    g = torch.flagos.FlagosGraph()
    with pytest.raises(CaptureError, match="_local_scalar_dense"):
        with torch.flagos.graph(g):
            try:
                x.sum().item()
            except CaptureError:
                pass


def test_host_state_write_is_refused():
    counter = torch.zeros(())
    x = torch.ones(2, device=DEV)
    with pytest.raises(CaptureError, match=r"add_.*writes a host tensor.*capturable=True"):
        with torch.flagos.graph(torch.flagos.FlagosGraph()):
            counter.add_(1)
            x.mul_(2)


def test_cpu_route_is_refused(monkeypatch):
    monkeypatch.setenv("FLAGOS_OP_sin", "cpu")
    torch_fl.reload_routes()
    try:
        x = torch.ones(4, device=DEV)
        with pytest.raises(CaptureError, match=r"\bsin\b.*route is 'cpu'.*FLAGOS_OP_sin=native\b"):
            with torch.flagos.graph(torch.flagos.FlagosGraph()):
                x.sin()
    finally:
        monkeypatch.delenv("FLAGOS_OP_sin")
        torch_fl.reload_routes()
    with torch.flagos.graph(torch.flagos.FlagosGraph()):  # native again: a capture asks the reloaded table
        x.sin()


def test_capture_state_and_misuse():
    g = torch.flagos.FlagosGraph()
    with pytest.raises(CaptureError, match="needs a finished capture"):
        g.replay()
    with pytest.raises(ValueError, match="capture_error_mode"):
        g.capture_begin(capture_error_mode="strict")
    x = torch.ones(2, device=DEV)
    with torch.flagos.graph(g):
        assert torch.flagos.is_current_stream_capturing()
        x + 1
    assert not torch.flagos.is_current_stream_capturing()
    with pytest.raises(CaptureError, match="captured; call reset"):
        g.capture_begin()
    with pytest.raises(CaptureError, match="capture_end.*needs capture_begin"):
        g.capture_end()
    g.reset()
    with torch.flagos.graph(g):
        out = x * 4
    g.replay()
    assert torch.equal(out.cpu(), torch.full((2,), 4.0))


@pytest.mark.skipif(not torch_fl._core.register_graph_impl(), reason="this torch has no graph registry")
def test_accelerator_graph_builds_a_flagos_graph():
    x = torch.ones(3, device=DEV)
    g = torch.accelerator.Graph()
    with g:  # its __enter__ empties the host cache first, which flagos answers (torch_fl/_startup.py)
        out = x * 3
    x.fill_(2.0)
    g.replay()
    assert torch.equal(out.cpu(), torch.full((3,), 6.0))
    side = torch.flagos.Stream()
    shared = torch.accelerator.Graph(pool=g.pool())
    with torch.flagos.stream(side):
        shared.capture_begin()
        twice = out + out
        shared.capture_end()
    shared.replay()
    assert shared.pool() == g.pool()
    assert torch.equal(twice.cpu(), torch.full((3,), 12.0))
