"""Graphs in training: make_graphed_callables on a small MLP (forward and backward equal to eager), and a whole
eager training step (forward, backward, optimizer) captured once and replayed, against the same steps uncaptured."""

from __future__ import annotations

import copy

import pytest
import torch

import torch_fl  # noqa: F401

DEV = "flagos"


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.GELU(), torch.nn.Linear(16, 3))


def _batches(n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(1)
    return [(torch.randn(5, 6, generator=gen), torch.randn(5, 3, generator=gen)) for _ in range(n)]


def test_graphed_module_forward_and_backward_equal_eager():
    eager = _mlp().to(DEV)
    graphed = copy.deepcopy(eager)
    sample = torch.randn(5, 6, device=DEV, requires_grad=True)
    graphed = torch.flagos.make_graphed_callables(graphed, (sample,))
    for x_host, _ in _batches(3):
        xs = [x_host.to(DEV).requires_grad_() for _ in range(2)]
        outs = [model(x) for model, x in zip((eager, graphed), xs, strict=True)]
        torch.testing.assert_close(outs[1].cpu(), outs[0].cpu())
        for out in outs:
            (out**2).sum().backward()
        torch.testing.assert_close(xs[1].grad.cpu(), xs[0].grad.cpu())
        for p_eager, p_graphed in zip(eager.parameters(), graphed.parameters(), strict=True):
            torch.testing.assert_close(p_graphed.grad.cpu(), p_eager.grad.cpu())
    graphed.eval()  # another training state than the capture's: the eager forward runs
    torch.testing.assert_close(graphed(sample).cpu(), eager(sample).cpu())


def test_graphed_functions_share_a_pool_and_chain():
    w = torch.randn(4, 4, device=DEV, requires_grad=True)

    def first(x, w):
        return x @ w

    def second(y):
        return y.tanh()

    a = torch.randn(3, 4, device=DEV, requires_grad=True)
    b = torch.randn(3, 4, device=DEV, requires_grad=True)
    g_first, g_second = torch.flagos.make_graphed_callables((first, second), ((a, w), (b,)))
    x = torch.randn(3, 4, device=DEV, requires_grad=True)
    out = g_second(g_first(x, w))
    out.sum().backward()
    x_ref = x.detach().clone().requires_grad_()
    w_grad = w.grad.clone()
    w.grad = None
    (x_ref @ w).tanh().sum().backward()
    torch.testing.assert_close(out.detach().cpu(), (x_ref @ w).tanh().detach().cpu())
    torch.testing.assert_close(x.grad.cpu(), x_ref.grad.cpu())
    torch.testing.assert_close(w_grad.cpu(), w.grad.cpu())


def test_graphed_callables_refuse_host_inputs():
    with pytest.raises(ValueError, match="cpu tensor among the inputs"):
        torch.flagos.make_graphed_callables(lambda x: x * 2, (torch.ones(2, requires_grad=True),))


def _train(model, optimizer, batches, captured: bool) -> None:
    def step(x, y):
        optimizer.zero_grad(set_to_none=False)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()

    if not captured:
        for x, y in batches:
            step(x.to(DEV), y.to(DEV))
        return
    static_x, static_y = batches[0][0].to(DEV), batches[0][1].to(DEV)
    # A warm-up step on a side stream creates the gradients and the optimizer's state outside the graph, as the
    # CUDA graph recipe does.
    side = torch.flagos.Stream()
    side.wait_stream(torch.flagos.current_stream())
    with torch.flagos.stream(side):
        step(static_x, static_y)
    torch.flagos.synchronize()
    g = torch.flagos.FlagosGraph()
    with torch.flagos.graph(g):
        step(static_x, static_y)
    for x, y in batches[1:]:
        static_x.copy_(x)
        static_y.copy_(y)
        g.replay()


def test_captured_training_step_equals_eager():
    batches = _batches(6)
    models = [_mlp().to(DEV) for _ in range(2)]
    for model, captured in zip(models, (False, True), strict=True):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        _train(model, optimizer, batches, captured)
    for p_eager, p_captured in zip(*(m.parameters() for m in models), strict=True):
        torch.testing.assert_close(p_captured.cpu(), p_eager.cpu())
