"""The model zoo's architectures: eight models from transformers and torchvision, built from configs (random
weights from one seed, dropout off, nothing downloaded), at two sizes: ``full`` for a GPU node (real layer shapes,
few layers, so that a cold torch.compile of every model fits one node call) and ``tiny`` for the CPU emulation.

The table (zoo_models.toml, one row per architecture) is what the parent process plans with: it imports nothing of
torch, since the harness's parent never does. ``build`` imports torch, transformers and torchvision, in an arm's
process only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (the DCU image): pytest brings tomli there
    import tomli as tomllib


@dataclass(frozen=True)
class Arch:
    name: str
    family: str  # the architectural trait this model stands for in the zoo
    kind: str  # causal-lm, masked-lm, seq2seq or vision: how its batch and loss are made
    full: dict[str, Any]  # config fields (transformers) or constructor arguments (torchvision) at each size
    tiny: dict[str, Any]
    shape: dict[str, tuple[int, ...]]  # per size: (batch, sequence or image side[, target sequence])
    dtype: str = "bfloat16"  # the autocast dtype of its training step
    scaler: bool = False  # fp16 needs torch.amp.GradScaler
    optimizer: str = "adamw"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def decoder(self) -> bool:
        """Greedy decoding is timed for the decoder-only language models."""
        return self.kind == "causal-lm"


_TABLE = Path(__file__).with_name("zoo_models.toml")
_CLASSES = ("config", "model", "builder")  # the keys of a row that name its transformers or torchvision classes


def _arch(name: str, row: dict[str, Any]) -> Arch:
    row = dict(row)
    extra = {k: row.pop(k) for k in _CLASSES if k in row}
    shape = {size: tuple(dims) for size, dims in row.pop("shape").items()}
    return Arch(name=name, shape=shape, extra=extra, **row)


ARCHS: dict[str, Arch] = {n: _arch(n, row) for n, row in tomllib.loads(_TABLE.read_text(encoding="utf-8")).items()}

# What every arch's config gets beyond its table row: special token ids, no dropout, attention through sdpa.
_HF_COMMON = {
    "causal-lm": dict(pad_token_id=0, bos_token_id=1, eos_token_id=2, attention_dropout=0.0),
    "masked-lm": dict(pad_token_id=0, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
    "seq2seq": dict(pad_token_id=0, eos_token_id=2, decoder_start_token_id=0, dropout_rate=0.0),
}
CLASSES = 100  # vision heads (the node checks' ResNet-50 has 100 classes)


def size_of(tiny: bool) -> str:
    return "tiny" if tiny else "full"


def build(name: str, tiny: bool, seed: int = 0):
    """(model on the host, its config or None, one batch on the host, loss(model, batch)) for ``name``."""
    import torch

    arch = ARCHS[name]
    size = size_of(tiny)
    fields = arch.tiny if tiny else arch.full
    torch.manual_seed(seed)
    config = None
    if arch.kind == "vision":
        model = _vision(arch, fields)
    else:
        import transformers

        transformers.logging.set_verbosity_error()
        config = getattr(transformers, arch.extra["config"])(**fields, **_HF_COMMON[arch.kind])
        if arch.kind == "causal-lm":
            config.max_position_embeddings = max(arch.shape[size][1], 64) * 2
        config._attn_implementation = "sdpa"
        if tiny and "num_local_experts" in fields:
            # transformers counts tokens per expert with an int histc on every device but the host, and the
            # emulation's host kernel refuses int histc: the tiny MoE takes the experts loop instead (a product
            # gap the zoo found, left to the router; the GPU sizes keep transformers' default, grouped_mm)
            config._experts_implementation = "eager"
        model = getattr(transformers, arch.extra["model"])(config)
    return model, config, _batch(arch, size, config, seed + 1), _LOSS[arch.kind]


def _vision(arch: Arch, fields: dict[str, Any]):
    from torchvision import models
    from torchvision.models import resnet

    if arch.extra["builder"] == "ResNet":
        return models.ResNet(getattr(resnet, fields["block"]), fields["layers"], num_classes=CLASSES)
    return models.VisionTransformer(**fields, num_classes=CLASSES)


def _batch(arch: Arch, size: str, config, seed: int) -> dict:
    import torch

    g = torch.Generator().manual_seed(seed)
    shape = arch.shape[size]
    if arch.kind == "vision":
        return {
            "x": torch.randn(shape[0], 3, shape[1], shape[1], generator=g),
            "y": torch.randint(0, CLASSES, (shape[0],), generator=g),
        }
    ids = torch.randint(3, config.vocab_size, shape[:2], generator=g)
    if arch.kind == "causal-lm":
        return {"input_ids": ids, "labels": ids.clone()}
    if arch.kind == "seq2seq":
        return {"input_ids": ids, "labels": torch.randint(3, config.vocab_size, (shape[0], shape[2]), generator=g)}
    masked = torch.rand(ids.shape, generator=g) < 0.15  # masked-lm: BERT's share of masked positions
    masked[:, 1] = True
    return {"input_ids": ids.masked_fill(masked, 2), "labels": ids.masked_fill(~masked, -100)}


def _hf_loss(model, batch):
    return model(**batch).loss


def vision_loss(model, batch):
    import torch

    return torch.nn.functional.cross_entropy(model(batch["x"]), batch["y"])


_LOSS = {"causal-lm": _hf_loss, "masked-lm": _hf_loss, "seq2seq": _hf_loss, "vision": vision_loss}
