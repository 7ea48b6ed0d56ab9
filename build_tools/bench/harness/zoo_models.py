"""The model zoo's architectures: eight models from transformers and torchvision, built from configs (random
weights from one seed, dropout off, nothing downloaded), at two sizes: ``full`` for a GPU node (real layer shapes,
few layers, so that a cold torch.compile of every model fits one node call) and ``tiny`` for the CPU emulation.

The table below is what the parent process plans with: it imports nothing of torch, since the harness's parent
never does. ``build`` imports torch, transformers and torchvision, in an arm's process only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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


def _hf(hidden: int, mlp: int, layers: int, heads: int, vocab: int, **more: Any) -> dict[str, Any]:
    """A transformers config's fields by their common names: width, MLP width, layers, heads, vocabulary, then
    the model's own (``more``)."""
    fields = dict(hidden_size=hidden, intermediate_size=mlp, num_hidden_layers=layers, num_attention_heads=heads)
    return {**fields, "vocab_size": vocab, **more}


_SPECIAL = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)
_TOP2 = dict(num_experts_per_tok=2, tie_word_embeddings=False)  # Mixtral's routing: two experts per token

ARCHS: dict[str, Arch] = {
    a.name: a
    for a in [
        Arch(
            "llama-gqa",
            "decoder, grouped-query attention (Llama)",
            "causal-lm",
            # the node checks' 124M Llama (real_models.py builds it here)
            _hf(768, 2048, 12, 12, 32000, num_key_value_heads=4, tie_word_embeddings=False),
            _hf(64, 128, 2, 4, 256, num_key_value_heads=2, tie_word_embeddings=False),
            {"full": (4, 512), "tiny": (2, 32)},
            extra={"config": "LlamaConfig", "model": "LlamaForCausalLM"},
        ),
        Arch(
            "qwen2-tied152k",
            "decoder, 152k tied vocabulary (Qwen2)",
            "causal-lm",
            _hf(896, 4864, 4, 14, 151936, num_key_value_heads=2, tie_word_embeddings=True),
            _hf(32, 64, 1, 4, 512, num_key_value_heads=2, tie_word_embeddings=True),
            {"full": (4, 512), "tiny": (2, 16)},
            extra={"config": "Qwen2Config", "model": "Qwen2ForCausalLM"},
        ),
        Arch(
            "mistral-sliding",
            "decoder, sliding-window attention (Mistral), fp16 with GradScaler",
            "causal-lm",
            _hf(1024, 3584, 4, 16, 32000, num_key_value_heads=8, sliding_window=256, tie_word_embeddings=False),
            _hf(32, 64, 1, 4, 128, num_key_value_heads=2, sliding_window=8, tie_word_embeddings=False),
            {"full": (4, 1024), "tiny": (2, 16)},
            dtype="float16",
            scaler=True,
            extra={"config": "MistralConfig", "model": "MistralForCausalLM"},
        ),
        Arch(
            "mixtral-moe",
            "decoder, mixture of experts, 8 experts top-2 (Mixtral)",
            "causal-lm",
            _hf(768, 1536, 4, 12, 32000, num_key_value_heads=4, num_local_experts=8, **_TOP2),
            _hf(32, 64, 1, 4, 128, num_key_value_heads=2, num_local_experts=4, **_TOP2),
            {"full": (4, 512), "tiny": (2, 16)},
            extra={"config": "MixtralConfig", "model": "MixtralForCausalLM"},
        ),
        Arch(
            "bert",
            "encoder, masked LM (BERT)",
            "masked-lm",
            _hf(768, 3072, 6, 12, 30522, max_position_embeddings=512),
            _hf(32, 64, 1, 2, 128, max_position_embeddings=64),
            {"full": (8, 512), "tiny": (2, 16)},
            extra={"config": "BertConfig", "model": "BertForMaskedLM"},
        ),
        Arch(
            "t5",
            "encoder-decoder, relative position bias (T5)",
            "seq2seq",
            dict(d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_decoder_layers=6, num_heads=8, vocab_size=32128),
            dict(d_model=32, d_kv=16, d_ff=64, num_layers=1, num_decoder_layers=1, num_heads=2, vocab_size=128),
            {"full": (8, 512, 128), "tiny": (2, 16, 8)},
            extra={"config": "T5Config", "model": "T5ForConditionalGeneration"},
        ),
        Arch(
            "vit-b16",
            "vision transformer (torchvision ViT-B/16)",
            "vision",
            dict(image_size=224, patch_size=16, num_layers=12, num_heads=12, hidden_dim=768, mlp_dim=3072),
            dict(image_size=32, patch_size=8, num_layers=1, num_heads=2, hidden_dim=32, mlp_dim=64),
            {"full": (32, 224), "tiny": (2, 32)},
            extra={"builder": "VisionTransformer"},
        ),
        Arch(
            "resnet50",
            "CNN with batch norm (torchvision ResNet-50)",
            "vision",
            dict(layers=[3, 4, 6, 3], block="Bottleneck"),
            dict(layers=[1, 1, 1, 1], block="BasicBlock"),
            # full: the node checks' ResNet-50 step (real_models.py); tiny: batch norm over 2 small images trains
            # chaotically, so that two devices' rounding drifts apart within 3 steps
            {"full": (32, 128), "tiny": (8, 64)},
            optimizer="sgd",
            extra={"builder": "ResNet"},
        ),
    ]
}
# What every arch's config gets beyond its table row: special token ids, no dropout, attention through sdpa.
_HF_COMMON = {
    "causal-lm": dict(_SPECIAL, attention_dropout=0.0),
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
