"""Autograd through the router, and one training step of a small MLP, against CPU."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

import torch_fl  # noqa: F401  (registers the flagos device)

DEVICE = "flagos"


def leaf(*shape: int, seed: int, device: str) -> torch.Tensor:
    host = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
    return host.to(device).requires_grad_()


X, W = (4, 5), (4, 5)
GRAPHS = {
    # name: (loss(x, w), shape of x, shape of w)
    "pointwise": (lambda x, w: ((x * w).tanh() + x.sigmoid() * 2 - w.exp() / 3).sum(), X, W),
    "matmul": (lambda x, w: (x @ w.t()).relu().pow(2).mean(), X, (6, 5)),
    "softmax_ce": (lambda x, w: F.cross_entropy(x @ w.t(), torch.tensor([0, 3, 1, 2], device=x.device)), X, (7, 5)),
    "layer_norm": (lambda x, w: F.layer_norm(x, (5,), w[0], w[1]).square().sum(), X, (2, 5)),
    "indexing": (
        lambda x, w: (
            (x[:, 1:4] * w[1:, ::2].sum(0)).sum()
            + x.index_select(0, torch.tensor([2, 2, 0], device=x.device)).sum()
            + x.gather(1, torch.tensor([[0], [4], [1], [1]], device=x.device)).pow(2).sum()
            + x[x > 0].sum()
        ),
        X,
        W,
    ),
    "reductions": (lambda x, w: x.amax(1).sum() + w.logsumexp(0).sum() + x.norm() + w.var(), X, W),
    "views": (
        lambda x, w: (x.t().reshape(-1)[::3] * w.flatten()[:7]).sum() + x.unsqueeze(0).expand(2, 4, 5).sum(),
        X,
        W,
    ),
    "where_clamp": (lambda x, w: torch.where(x > 0, x, w * 2).clamp(-1, 1).sum() + F.gelu(w).sum(), X, W),
    "cat_stack": (lambda x, w: torch.cat([x, w], 0).std() + torch.stack([x[0], w[0]]).prod(), X, W),
    "bmm_softmax": (lambda x, w: torch.bmm(x.view(2, 2, 5), w.view(2, 5, 2)).softmax(-1)[..., 0].sum(), X, W),
}


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_backward_matches_cpu(name, assert_same):
    graph, x_shape, w_shape = GRAPHS[name]
    grads = {}
    for device in ("cpu", DEVICE):
        x, w = leaf(*x_shape, seed=1, device=device), leaf(*w_shape, seed=2, device=device)
        loss = graph(x, w)
        loss.backward()
        grads[device] = [loss.detach(), x.grad, w.grad]
    for grad in grads[DEVICE][1:]:
        assert grad is not None and grad.device.type == "flagos"
    assert_same(grads[DEVICE], grads["cpu"], exact=False)


def test_autograd_grad_and_retain_graph(assert_same):
    results = {}
    for device in ("cpu", DEVICE):
        x = leaf(3, 3, seed=4, device=device)
        y = (x.sin() * x).sum()
        (g,) = torch.autograd.grad(y, x, create_graph=True)
        (gg,) = torch.autograd.grad(g.sum(), x)  # second order through the router
        results[device] = [g.detach(), gg]
    assert_same(results[DEVICE], results["cpu"], exact=False)


def test_inplace_in_graph(assert_same):
    results = {}
    for device in ("cpu", DEVICE):
        x = leaf(4, 4, seed=5, device=device)
        y = x * 2
        y.add_(1).mul_(x)
        y[:, 0] = 0
        (y.relu() * y).sum().backward()
        results[device] = [y.detach(), x.grad]
    assert_same(results[DEVICE], results["cpu"], exact=False)


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


@pytest.mark.parametrize("momentum", [0.0, 0.9], ids=["sgd", "sgd_momentum"])
def test_mlp_training_step_matches_cpu(momentum, assert_same):
    torch.manual_seed(0)
    host_model = MLP()
    initial = host_model.fc1.weight.detach().clone()
    dev_model = copy.deepcopy(host_model).to(DEVICE)
    for p in dev_model.parameters():
        assert p.device.type == "flagos"
    g = torch.Generator().manual_seed(1)
    x, target = torch.randn(10, 8, generator=g), torch.randn(10, 3, generator=g)
    losses = {}
    for model, device in ((host_model, "cpu"), (dev_model, DEVICE)):
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=momentum)
        for _ in range(2):  # the second step uses the momentum buffer
            opt.zero_grad()
            loss = F.mse_loss(model(x.to(device)), target.to(device))
            loss.backward()
            opt.step()
        losses[device] = loss.detach()
    assert_same(losses[DEVICE], losses["cpu"], exact=False)
    pairs = zip(dev_model.named_parameters(), host_model.named_parameters(), strict=True)
    for (name, p_dev), (_, p_host) in pairs:
        assert_same(p_dev.detach(), p_host.detach(), exact=False, path=f"{name} after the step")
        assert_same(p_dev.grad, p_host.grad, exact=False, path=f"{name}.grad")
    # the step changed the weights (a step that did nothing on both would also "match")
    assert not torch.equal(dev_model.fc1.weight.detach().cpu(), initial)


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: torch.nn.RNN(3, 4, batch_first=True), id="RNN"),
        # torch picks the CUDA-only fused cells for flagos; the router decomposes them where they are missing
        pytest.param(lambda: torch.nn.LSTM(3, 4, batch_first=True), id="LSTM"),
        pytest.param(lambda: torch.nn.GRU(3, 4, batch_first=True), id="GRU"),
    ],
)
def test_recurrent_layer_forward_backward(make, assert_same):
    torch.manual_seed(0)
    host_layer = make()
    dev_layer = copy.deepcopy(host_layer).to(DEVICE)
    x = torch.randn(2, 5, 3, generator=torch.Generator().manual_seed(1))
    results = {}
    for layer, device in ((host_layer, "cpu"), (dev_layer, DEVICE)):
        out = layer(x.to(device))[0]
        out.square().sum().backward()
        results[device] = [out.detach(), *[p.grad for p in layer.parameters()]]
    assert_same(results[DEVICE], results["cpu"], exact=False)


def test_conv2d_backward_matches_cpu():
    # convolution reaches out-of-tree devices through torch's overrideable hooks (forward and backward)
    g = torch.Generator().manual_seed(3)
    host = [torch.randn(s, generator=g, requires_grad=True) for s in ((2, 3, 8, 8), (4, 3, 3, 3), (4,))]
    dev = [t.detach().to("flagos").requires_grad_() for t in host]
    for x, w, b in (host, dev):
        torch.nn.functional.conv2d(x, w, b, padding=1, stride=2).square().sum().backward()
    for h, d in zip(host, dev, strict=True):
        assert d.grad.device.type == "flagos"
        torch.testing.assert_close(d.grad.cpu(), h.grad, rtol=1e-4, atol=1e-4)
