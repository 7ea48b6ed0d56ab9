"""Compiled equals eager on flagos, forward and backward: an MLP, a small CNN and a TransformerEncoderLayer.

Each model is built twice from one state; one copy runs eagerly on flagos (the router's kernels), the other
through torch.compile (Inductor's generated kernels for flagos). Outputs, every parameter gradient and the input
gradient must match within float32 reassociation tolerance, and the compiled results must live on flagos.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import nn

import torch_fl

RTOL, ATOL = 1e-4, 1e-5


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4))


def cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 8, 3, padding=1),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(8 * 4 * 4, 10),
    )


def encoder_layer() -> nn.Module:
    return nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)


CASES: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...]]] = {
    "mlp": (mlp, (8, 16)),
    "cnn": (cnn, (4, 3, 8, 8)),
    "transformer_encoder_layer": (encoder_layer, (2, 12, 32)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_compiled_equals_eager_forward_and_backward(case):
    make, shape = CASES[case]
    torch.manual_seed(0)
    eager = make()
    compiled_model = make()
    compiled_model.load_state_dict(eager.state_dict())
    eager.to("flagos").train()
    compiled_model.to("flagos").train()
    x = torch.randn(shape)
    x_eager = x.to("flagos").requires_grad_()
    x_compiled = x.to("flagos").requires_grad_()

    out_compiled = torch.compile(compiled_model)(x_compiled)
    out_eager = eager(x_eager)
    assert out_compiled.device.type == "flagos"
    torch.testing.assert_close(out_compiled.cpu(), out_eager.cpu(), rtol=RTOL, atol=ATOL)

    weights = torch.randn(out_eager.shape)  # a loss whose gradient is not uniform
    (out_compiled * weights.to("flagos")).sum().backward()
    (out_eager * weights.to("flagos")).sum().backward()
    assert x_compiled.grad is not None and x_compiled.grad.device.type == "flagos"
    torch.testing.assert_close(x_compiled.grad.cpu(), x_eager.grad.cpu(), rtol=RTOL, atol=ATOL)
    for (name, p_eager), p_compiled in zip(eager.named_parameters(), compiled_model.parameters(), strict=True):
        assert p_compiled.grad is not None, name
        torch.testing.assert_close(
            p_compiled.grad.cpu(), p_eager.grad.cpu(), rtol=RTOL, atol=ATOL, msg=lambda m, n=name: f"{n}: {m}"
        )
    # BatchNorm's running statistics: the compiled graph writes them back into the module's buffers
    for (name, b_eager), b_compiled in zip(eager.named_buffers(), compiled_model.buffers(), strict=True):
        torch.testing.assert_close(
            b_compiled.cpu(), b_eager.cpu(), rtol=RTOL, atol=ATOL, msg=lambda m, n=name: f"{n}: {m}"
        )
    assert torch_fl.compile.registered()


def assorted(x: torch.Tensor, index: torch.Tensor, table: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Reductions, scans, sorting, gathers and scatters with accumulation, integer and bfloat16 math in one graph:
    the C++ (or Triton) code paths beyond pointwise work."""
    rows = torch.arange(x.shape[0], device=x.device)
    return (
        x.sum(1),
        x.var(1),
        x.amax(0),
        x.cumsum(1),
        x.sort(1).values,
        x.argmax(1),
        torch.nn.functional.layer_norm(x, x.shape[1:]),
        torch.nn.functional.cross_entropy(x, rows % x.shape[1]),
        x.gather(1, index),
        torch.zeros_like(x).scatter_add(1, index, x[:, : index.shape[1]]),
        x.index_put((rows[:2],), torch.ones(2, x.shape[1], device=x.device), accumulate=True),
        torch.nn.functional.embedding(index, table).sum(-1),
        (x * 10).long() // 3 % 5,
        (x.bfloat16() @ x.bfloat16().t()).float(),
        torch.where(x > 0, x, x * 0.1).masked_fill(x < -1, 0.0),
    )


def test_assorted_ops_compiled_equal_eager():
    torch.manual_seed(0)
    x, index, table = torch.randn(6, 10), torch.randint(0, 10, (6, 4)), torch.randn(10, 5)
    args = [t.to("flagos") for t in (x, index, table)]
    got, want = torch.compile(assorted)(*args), assorted(*args)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.device.type == "flagos", i
        tol = 1e-2 if i == 13 else RTOL  # output 13: bfloat16 products
        torch.testing.assert_close(g.cpu(), w.cpu(), rtol=tol, atol=tol, msg=lambda m, i=i: f"output {i}: {m}")
