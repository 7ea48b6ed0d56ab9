"""The models, batches and training loops of the sharded suite, shared by its ranks and by the test process,
which trains the same models in one process on the host as the reference.

Batches split evenly over 1, 2 and 4 ranks; every rank of a tensor-parallel group sees the whole batch.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

D_MODEL, HEADS, FFN = 32, 4, 64
STEPS = 2
LR = 1e-3


def transformer() -> nn.TransformerEncoder:
    """A 2-layer TransformerEncoder, dropout off: what FSDP2 shards layer by layer."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(D_MODEL, HEADS, FFN, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)


def batch(step: int) -> torch.Tensor:
    """The global batch of ``step``: 8 sequences of 8 tokens."""
    return torch.randn(8, 8, D_MODEL, generator=torch.Generator().manual_seed(300 + step))


# The loss weighs each output feature differently: a plain mean of squares would read the final LayerNorm's
# output, which is about 1 whatever the layers below it do, and leave them almost no gradient.
FEATURE_WEIGHTS = torch.linspace(-1.0, 2.0, D_MODEL)


def loss_of(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return (model(x) * FEATURE_WEIGHTS.to(x.device)).sum(-1).square().mean()


def train(
    model: nn.Module, rank: int, world: int, device: torch.device | str, *, make_batch=batch, loss_fn=loss_of
) -> list[float]:
    """STEPS SGD steps on this rank's share of each global batch; the rank's losses. Equal shares make the mean of
    the ranks' averaged gradients the whole batch's, so one process on the whole batch is the reference."""
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for step in range(STEPS):
        x = make_batch(step)
        per = x.shape[0] // world
        loss = loss_fn(model, x[rank * per : (rank + 1) * per].to(device))
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def mlp() -> nn.Sequential:
    torch.manual_seed(1)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 16))


def mlp_batch(step: int) -> torch.Tensor:
    return torch.randn(8, 16, generator=torch.Generator().manual_seed(400 + step))


def mlp_loss(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return model(x).square().mean()


class Attention(nn.Module):
    """Self-attention with separate q, k, v and output projections. The head count follows from the projections'
    width, so a rank of a tensor-parallel group runs its share of the heads unchanged."""

    def __init__(self) -> None:
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(D_MODEL, D_MODEL) for _ in range(4))
        self.head_dim = D_MODEL // HEADS

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape

        def heads(y: torch.Tensor) -> torch.Tensor:
            return y.view(b, t, -1, self.head_dim).transpose(1, 2)

        y = F.scaled_dot_product_attention(heads(self.q(x)), heads(self.k(x)), heads(self.v(x)), is_causal=True)
        return self.o(y.transpose(1, 2).reshape(b, t, -1))


def attention() -> Attention:
    torch.manual_seed(2)
    return Attention()


MLP_PLAN = (("0", "colwise"), ("2", "rowwise"))

# Tensor-parallel cases: name -> (build, input, plan as (module name, "colwise" | "rowwise") pairs)
TP_CASES = {
    "mlp": (mlp, lambda: torch.randn(4, 16, generator=torch.Generator().manual_seed(7)), MLP_PLAN),
    "attention": (
        attention,
        lambda: torch.randn(2, 8, D_MODEL, generator=torch.Generator().manual_seed(8)),
        (("q", "colwise"), ("k", "colwise"), ("v", "colwise"), ("o", "rowwise")),
    ),
}


def tp_step(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Forward, backward and one SGD step; the output."""
    out = model(x)
    out.square().mean().backward()
    torch.optim.SGD(model.parameters(), lr=LR).step()
    return out
