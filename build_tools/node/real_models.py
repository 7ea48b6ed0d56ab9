"""Training workloads at real sizes for the node checks: a decoder-only LLM of 124M parameters (HF Llama, GQA,
bf16 autocast), torchvision's ResNet-50 (bf16 autocast), three more of the model zoo's decoders (a 152k tied
vocabulary; a sliding window in fp16 with GradScaler; a mixture of experts), all defined in harness/zoo_models.py,
and the bench's TransformerEncoder step. Each is built on the CPU from one seed and returns a ``step()`` that trains
once on ``device`` and returns the loss. ``tiny`` shrinks every model for a CPU-emulation dry run of the scripts that
use them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import neighbours
import torch

neighbours.reach("models", "harness")
import model_zoo  # noqa: E402  (imports transformers and torchvision the way the model suite does, offline)
from harness import workloads, zoo_models  # noqa: E402  (the benchmark's step model; the zoo's models)

Step = Callable[[], torch.Tensor]


def _zoo(name: str, device: str, tiny: bool, seed: int):
    """The model zoo's ``name`` (harness/zoo_models.py, where its config is defined once) and its batch, on
    ``device``, and its loss."""
    model, _, batch, loss_of = zoo_models.build(name, tiny, seed)
    return model.to(device), {k: v.to(device) for k, v in batch.items()}, loss_of


def _bf16_step(
    model: torch.nn.Module, batch: dict[str, torch.Tensor], loss_of: Callable, opt: torch.optim.Optimizer, device: str
) -> Step:
    """One optimizer step of ``model`` on ``batch`` under bfloat16 autocast; it returns the detached loss."""

    def step() -> torch.Tensor:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(torch.device(device).type, dtype=torch.bfloat16):
            loss = loss_of(model, batch)
        loss.backward()
        opt.step()
        return loss.detach()

    return step


def llama(device: str, tiny: bool = False, seed: int = 0) -> tuple[Step, torch.nn.Module]:
    model, batch, loss_of = _zoo("llama-gqa", device, tiny, seed)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    return _bf16_step(model, batch, loss_of, opt, device), model


def resnet50(device: str, tiny: bool = False, seed: int = 0) -> tuple[Step, torch.nn.Module]:
    if tiny:  # ResNet-18 at 32x32, the dry run whose samples qualify records (the zoo's tiny ResNet is another)
        torch.manual_seed(seed)
        model = model_zoo.torchvision.models.resnet18(num_classes=zoo_models.CLASSES).to(device)
        gen = torch.Generator().manual_seed(seed + 1)
        batch = {"x": torch.randn(4, 3, 32, 32, generator=gen), "y": torch.randint(0, 100, (4,), generator=gen)}
        batch, loss_of = {k: v.to(device) for k, v in batch.items()}, zoo_models.vision_loss
    else:
        model, batch, loss_of = _zoo("resnet50", device, tiny, seed)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    return _bf16_step(model, batch, loss_of, opt, device), model


def zoo_decoder(name: str) -> Callable[..., tuple[Step, torch.nn.Module]]:
    """The zoo's decoder ``name`` trained as the zoo trains it (harness/zoo_arm.py): its table row's autocast dtype,
    GradScaler where the row asks for one, fused AdamW."""
    arch = zoo_models.ARCHS[name]

    def build(device: str, tiny: bool = False, seed: int = 0) -> tuple[Step, torch.nn.Module]:
        model, batch, loss_of = _zoo(name, device, tiny, seed)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
        scaler = torch.amp.GradScaler(torch.device(device).type, enabled=arch.scaler)

        def step() -> torch.Tensor:
            opt.zero_grad(set_to_none=True)
            with torch.autocast(torch.device(device).type, dtype=getattr(torch, arch.dtype)):
                loss = loss_of(model, batch)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            return loss.detach()

        return step, model

    return build


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
    "qwen2-tied152k": zoo_decoder("qwen2-tied152k"),
    "mistral-sliding-fp16": zoo_decoder("mistral-sliding"),
    "mixtral-moe": zoo_decoder("mixtral-moe"),
    "encoder-d256": encoder(256),
    "encoder-d1024": encoder(1024),
}
