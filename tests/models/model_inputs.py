"""What the real-model suite feeds its models and how it trains them: seeded batches, losses and optimizers.

model_zoo.py pairs each model with one of each; this module needs torch only.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

LR = 1e-3
VOCAB = 96
SEQ = 12
BATCH = 2


# ---- batches -------------------------------------------------------------------------------


def tokens(seed: int, rows: int = BATCH, cols: int = SEQ) -> torch.Tensor:
    """Token ids 3..VOCAB-1 (0-2 are the special ids of the configs below)."""
    return torch.randint(3, VOCAB, (rows, cols), generator=torch.Generator().manual_seed(seed))


def causal_lm_batch(seed: int) -> dict[str, torch.Tensor]:
    ids = tokens(seed)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}


def masked_lm_batch(seed: int) -> dict[str, torch.Tensor]:
    ids = tokens(seed)
    labels = torch.full_like(ids, -100)
    mask = torch.rand(ids.shape, generator=torch.Generator().manual_seed(seed + 1000)) < 0.3
    mask[:, 1] = True  # at least one masked position per row
    labels[mask] = ids[mask]
    inputs = ids.masked_fill(mask, 2)  # 2 = [MASK] of the config below
    return {"input_ids": inputs, "attention_mask": torch.ones_like(ids), "labels": labels}


def seq2seq_batch(seed: int) -> dict[str, torch.Tensor]:
    ids = tokens(seed)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": tokens(seed + 500, cols=SEQ - 4)}


def image_batch(seed: int, batch: int = BATCH, size: int = 32) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"x": torch.randn(batch, 3, size, size, generator=g), "y": torch.randint(0, 10, (batch,), generator=g)}


def cnn_batch(seed: int) -> dict[str, torch.Tensor]:
    """Images for the batch-norm CNN: 8 of 64x64, so that its last batch norms see 2x2 pixels of 8 images.

    With 2 images of 32x32 they normalise over 2 values per channel, and training is chaotic: on the CPU alone,
    scaling the weights by 1 + 1e-6 noise moved the losses of three steps by 3%, so the kernel differences
    between two devices (cudnn's batch norm against torch's own, on a GPU) could never match. With this batch and
    SGD (cnn_optimizer), 1e-7 noise moves the losses by 5e-7 and the parameters by 4e-7.
    """
    return image_batch(seed, batch=8, size=64)


def hf_loss(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    return model(**batch).loss


def hf_eval(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    return model(**batch).logits


def vision_loss(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(model(batch["x"]), batch["y"])


def vision_eval(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    return model(batch["x"])


def adamw(params: Iterable[torch.nn.Parameter]) -> torch.optim.Optimizer:
    """The optimizer of the transformers (the usual choice for them)."""
    return torch.optim.AdamW(params, lr=LR, weight_decay=0.01)


def cnn_optimizer(params: Iterable[torch.nn.Parameter]) -> torch.optim.Optimizer:
    """SGD with momentum, as ResNets are trained. Adam turns rounding noise on near-zero gradients into steps of
    up to its learning rate, which the batch norms of a CNN make common; SGD's steps follow the gradient."""
    return torch.optim.SGD(params, lr=1e-2, momentum=0.9, weight_decay=1e-4)
