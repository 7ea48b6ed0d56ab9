"""The real-model suite's models and the one training/evaluation run every device performs.

Each model is built on the CPU from a small config (random weights, seeded, dropout off, nothing
downloaded), then moved to the device under test. ``run_model`` trains it ``STEPS`` optimizer steps on fixed
batches and records what the comparison needs: losses, every parameter and buffer after training, the
parameter count and sharing, greedy ``generate`` tokens (language models) and eval-mode outputs.

This module never imports torch_fl: the plain-device reference (reference.py) and the step timer
(steptime.py) use it in processes where flagos must not exist. Importing it needs transformers and
torchvision; a missing one is an error, never a skip.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

# Build from config objects only: transformers must never reach the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import torch  # noqa: E402
import vision_import  # noqa: E402
from model_inputs import (  # noqa: E402
    VOCAB,
    adamw,
    causal_lm_batch,
    cnn_batch,
    cnn_optimizer,
    hf_eval,
    hf_loss,
    image_batch,
    masked_lm_batch,
    seq2seq_batch,
    tokens,
    vision_eval,
    vision_loss,
)

STEPS = 3
NEW_TOKENS = 6


def _missing(name: str) -> ImportError:
    return ImportError(
        f"the model suite needs {name}; install the test requirements "
        "(docker/cpu/requirements-test.txt and requirements-models.txt)"
    )


torchvision = vision_import.load()
try:
    import transformers
except ImportError as exc:
    raise _missing("transformers") from exc
transformers.logging.set_verbosity_error()


# ---- the models ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelSpec:
    name: str
    family: str  # what kind of architecture it stands for, for the README and test ids
    build: Callable[[], torch.nn.Module]
    batch: Callable[[int], dict[str, torch.Tensor]]
    loss: Callable[[torch.nn.Module, dict[str, torch.Tensor]], torch.Tensor]
    evaluate: Callable[[torch.nn.Module, dict[str, torch.Tensor]], torch.Tensor]
    generates: bool  # greedy generate is compared
    optimizer: Callable[[Iterable[torch.nn.Parameter]], torch.optim.Optimizer] = adamw


TINY = dict(vocab_size=VOCAB, pad_token_id=0, bos_token_id=1, eos_token_id=2)
DECODER = dict(
    TINY,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
    attention_dropout=0.0,
)


def _hf(cls_name: str, config_name: str, **config: Any) -> Callable[[], torch.nn.Module]:
    def build() -> torch.nn.Module:
        cfg = getattr(transformers, config_name)(**config)
        return getattr(transformers, cls_name)(cfg)

    return build


MODELS: dict[str, ModelSpec] = {
    s.name: s
    for s in [
        ModelSpec(
            "gpt2",
            "decoder-only, tied embeddings",
            _hf(
                "GPT2LMHeadModel",
                "GPT2Config",
                **TINY,
                n_embd=32,
                n_layer=2,
                n_head=2,
                n_positions=64,
                resid_pdrop=0.0,
                embd_pdrop=0.0,
                attn_pdrop=0.0,
            ),
            causal_lm_batch,
            hf_loss,
            hf_eval,
            True,
        ),
        ModelSpec(
            "bert",
            "encoder-only (masked LM, tied decoder)",
            _hf(
                "BertForMaskedLM",
                "BertConfig",
                vocab_size=VOCAB,
                pad_token_id=0,
                hidden_size=32,
                num_hidden_layers=2,
                num_attention_heads=2,
                intermediate_size=64,
                max_position_embeddings=64,
                hidden_dropout_prob=0.0,
                attention_probs_dropout_prob=0.0,
            ),
            masked_lm_batch,
            hf_loss,
            hf_eval,
            False,
        ),
        ModelSpec(
            "t5",
            "encoder-decoder, shared embeddings, relative position bias",
            _hf(
                "T5ForConditionalGeneration",
                "T5Config",
                vocab_size=VOCAB,
                pad_token_id=0,
                eos_token_id=2,
                decoder_start_token_id=0,
                d_model=32,
                d_kv=16,
                d_ff=64,
                num_layers=2,
                num_decoder_layers=2,
                num_heads=2,
                dropout_rate=0.0,
            ),
            seq2seq_batch,
            hf_loss,
            hf_eval,
            True,
        ),
        ModelSpec(
            "bart",
            "encoder-decoder, shared embeddings, learned positions",
            _hf(
                "BartForConditionalGeneration",
                "BartConfig",
                **TINY,
                decoder_start_token_id=2,
                d_model=32,
                encoder_layers=2,
                decoder_layers=2,
                encoder_attention_heads=2,
                decoder_attention_heads=2,
                encoder_ffn_dim=64,
                decoder_ffn_dim=64,
                max_position_embeddings=64,
                dropout=0.0,
                attention_dropout=0.0,
                activation_dropout=0.0,
                encoder_layerdrop=0.0,
                decoder_layerdrop=0.0,
            ),
            seq2seq_batch,
            hf_loss,
            hf_eval,
            True,
        ),
        ModelSpec(
            "llama",
            "decoder-only, untied, RoPE, grouped-query attention",
            _hf("LlamaForCausalLM", "LlamaConfig", **DECODER, tie_word_embeddings=False),
            causal_lm_batch,
            hf_loss,
            hf_eval,
            True,
        ),
        ModelSpec(
            "mistral",
            "decoder-only, untied, sliding-window attention",
            _hf("MistralForCausalLM", "MistralConfig", **DECODER, sliding_window=8, tie_word_embeddings=False),
            causal_lm_batch,
            hf_loss,
            hf_eval,
            True,
        ),
        ModelSpec(
            "qwen2",
            "decoder-only, tied embeddings, qkv bias",
            _hf("Qwen2ForCausalLM", "Qwen2Config", **DECODER, tie_word_embeddings=True),
            causal_lm_batch,
            hf_loss,
            hf_eval,
            True,
        ),
        ModelSpec(
            "opt",
            "decoder-only, tied embeddings, learned positions",
            _hf(
                "OPTForCausalLM",
                "OPTConfig",
                **TINY,
                hidden_size=32,
                word_embed_proj_dim=32,
                ffn_dim=64,
                num_hidden_layers=2,
                num_attention_heads=2,
                max_position_embeddings=64,
                dropout=0.0,
                attention_dropout=0.0,
                layerdrop=0.0,
            ),
            causal_lm_batch,
            hf_loss,
            hf_eval,
            True,
        ),
        ModelSpec(
            "gpt_neox",
            "decoder-only, untied, parallel attention/MLP, partial RoPE",
            _hf(
                "GPTNeoXForCausalLM",
                "GPTNeoXConfig",
                **TINY,
                hidden_size=32,
                intermediate_size=64,
                num_hidden_layers=2,
                num_attention_heads=2,
                max_position_embeddings=64,
                hidden_dropout=0.0,
                attention_dropout=0.0,
                tie_word_embeddings=False,
            ),
            causal_lm_batch,
            hf_loss,
            hf_eval,
            True,
        ),
        ModelSpec(
            "resnet18",
            "CNN, batch norm (torchvision)",
            lambda: torchvision.models.resnet18(num_classes=10),
            cnn_batch,
            vision_loss,
            vision_eval,
            False,
            cnn_optimizer,
        ),
        ModelSpec(
            "vit",
            "vision transformer (torchvision)",
            lambda: torchvision.models.VisionTransformer(
                image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64, num_classes=10
            ),
            image_batch,
            vision_loss,
            vision_eval,
            False,
        ),
    ]
}


def build(name: str, seed: int = 0) -> torch.nn.Module:
    """The model ``name`` on the CPU, with weights from ``seed``; the same in every process."""
    torch.manual_seed(seed)
    return MODELS[name].build()


# ---- what is compared ------------------------------------------------------------------------


def sharing(model: torch.nn.Module) -> dict[str, Any]:
    """The parameter structure: unique parameters, elements, and the names that share one parameter."""
    groups: dict[int, list[str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        groups.setdefault(id(p), []).append(name)
    return {
        "count": len(groups),
        "elements": sum(p.numel() for p in model.parameters()),
        "shared": sorted(sorted(g) for g in groups.values() if len(g) > 1),
    }


def _to(batch: dict[str, torch.Tensor], device: torch.device | str) -> dict[str, torch.Tensor]:
    return {k: v.to(device) for k, v in batch.items()}


def _generate(spec: ModelSpec, model: torch.nn.Module, device: torch.device | str) -> torch.Tensor:
    prompt = tokens(99, cols=5)
    return model.generate(
        input_ids=prompt.to(device),
        attention_mask=torch.ones_like(prompt).to(device),
        max_new_tokens=NEW_TOKENS,
        min_new_tokens=NEW_TOKENS,
        do_sample=False,
        num_beams=1,
        pad_token_id=0,
    ).cpu()


@contextlib.contextmanager
def full_float32() -> Iterator[None]:
    """TensorFloat-32 off for convolutions and matmuls while a model runs; the flags are restored after.

    cudnn convolves float32 in TF32 by default. flagos runs the same cudnn convolutions (bit for bit on the H200),
    but its batch norm is torch's own kernel where plain CUDA takes cudnn's, and the two differ by about 5e-7. TF32
    rounds convolution inputs to 10 mantissa bits, so that difference grows to 1e-3 in ResNet-18's logits, as much
    as between plain CUDA and the CPU; with TF32 off it stays at 3e-6. The comparison is made in full float32.
    """
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def learning_rate(name: str) -> float:
    """The learning rate of ``name``'s optimizer."""
    return MODELS[name].optimizer([torch.nn.Parameter(torch.zeros(1))]).param_groups[0]["lr"]


def run_model(name: str, model: torch.nn.Module, device: torch.device | str, steps: int = STEPS) -> dict[str, Any]:
    """Train ``model`` (already on ``device``) ``steps`` steps of its optimizer and record the results on the CPU."""
    with full_float32():
        return _run_model(name, model, device, steps)


def _run_model(name: str, model: torch.nn.Module, device: torch.device | str, steps: int) -> dict[str, Any]:
    spec = MODELS[name]
    model.train()
    opt = spec.optimizer(model.parameters())
    losses = []
    for step in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = spec.loss(model, _to(spec.batch(step), device))
        loss.backward()
        opt.step()
        losses.append(loss.detach().cpu())
    model.eval()
    with torch.no_grad():
        out = spec.evaluate(model, _to(spec.batch(1000), device)).cpu()
        tokens = _generate(spec, model, device) if spec.generates else None
    return {
        "losses": torch.stack(losses),
        "params": {n: p.detach().cpu() for n, p in model.named_parameters()},
        "buffers": {n: b.detach().cpu() for n, b in model.named_buffers()},
        "structure": sharing(model),
        "eval": out,
        "tokens": tokens,
    }
