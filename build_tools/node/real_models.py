"""Training workloads at real sizes for the node checks: a decoder-only LLM of 124M parameters (HF Llama, GQA,
bf16 autocast), torchvision's ResNet-50 (bf16 autocast) and the bench's TransformerEncoder step. Each is built on
the CPU from one seed and returns a ``step()`` that trains once on ``device`` and returns the loss. ``tiny``
shrinks every model for a CPU-emulation dry run of the scripts that use them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import neighbours
import torch

neighbours.reach("models", "harness")
import model_zoo  # noqa: E402  (imports transformers and torchvision the way the model suite does, offline)
from harness import workloads  # noqa: E402  (the benchmark's step model)

Step = Callable[[], torch.Tensor]


def llama(device: str, tiny: bool = False, seed: int = 0) -> tuple[Step, torch.nn.Module]:
    transformers = model_zoo.transformers
    size = (
        dict(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=256,
        )
        if tiny
        else dict(
            hidden_size=768,
            intermediate_size=2048,
            num_hidden_layers=12,
            num_attention_heads=12,
            num_key_value_heads=4,
            vocab_size=32000,
        )
    )
    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(
        **size,
        max_position_embeddings=1024,
        tie_word_embeddings=False,
        attention_dropout=0.0,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    model = transformers.LlamaForCausalLM(cfg).to(device)
    seq, batch = (32, 2) if tiny else (512, 4)
    gen = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(3, size["vocab_size"], (batch, seq), generator=gen).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)

    def step() -> torch.Tensor:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(torch.device(device).type, dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        return loss.detach()

    return step, model


def resnet50(device: str, tiny: bool = False, seed: int = 0) -> tuple[Step, torch.nn.Module]:
    torchvision = model_zoo.torchvision
    torch.manual_seed(seed)
    model = (torchvision.models.resnet18 if tiny else torchvision.models.resnet50)(num_classes=100).to(device)
    gen = torch.Generator().manual_seed(seed + 1)
    n, size = (4, 32) if tiny else (32, 128)
    x = torch.randn(n, 3, size, size, generator=gen).to(device)
    y = torch.randint(0, 100, (n,), generator=gen).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)

    def step() -> torch.Tensor:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(torch.device(device).type, dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    return step, model


def encoder(d_model: int) -> Callable[[str, bool], tuple[Step, torch.nn.Module]]:
    """The bench's training step (the model of workloads.build_step), returning its loss."""

    def build(device: str, tiny: bool = False, seed: int = 0) -> tuple[Step, torch.nn.Module]:
        d = 32 if tiny else d_model
        torch.manual_seed(seed)
        layer = torch.nn.TransformerEncoderLayer(d, workloads.STEP_HEADS, 4 * d, dropout=0.0, batch_first=True)
        model = torch.nn.TransformerEncoder(layer, workloads.STEP_LAYERS, enable_nested_tensor=False).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
        x = torch.randn(workloads.STEP_BATCH, workloads.STEP_SEQ, d).to(device)

        def step() -> torch.Tensor:
            opt.zero_grad(set_to_none=True)
            loss = model(x).square().mean()
            loss.backward()
            opt.step()
            return loss.detach()

        return step, model

    return build


WORKLOADS: dict[str, Callable[..., tuple[Step, Any]]] = {
    "llama-124m-bf16": llama,
    "resnet50-bf16": resnet50,
    "encoder-d256": encoder(256),
    "encoder-d1024": encoder(1024),
}
