"""The fused attention hook's ops in compiled graphs: Meta kernels and extern calls."""

from __future__ import annotations

from typing import Any

import torch

from .fallback import inductor_decomposition_tables

# torch's hook for an out-of-tree device's fused attention (csrc/aten/attention_overrideable.cpp): the
# flagos choice answers ``overrideable`` wherever the vendor takes flash attention, so traced graphs hold these.
FUSED_ATTENTION_OPS = (
    "_scaled_dot_product_fused_attention_overrideable",
    "_scaled_dot_product_fused_attention_overrideable_backward",
)


def _fused_attention_overloads() -> list[Any]:
    return [getattr(torch.ops.aten, name).default for name in FUSED_ATTENTION_OPS]


# Python kernels this module registers with the dispatcher; a Library unregisters them when it is collected.
_LIBRARIES: list[Any] = []


def _fused_attention_backward_meta(
    grad_out: Any,
    query: Any,
    key: Any,
    value: Any,
    attn_bias: Any,
    grad_input_mask: Any,
    out: Any,
    logsumexp: Any,
    cum_seq_q: Any,
    cum_seq_k: Any,
    max_q: Any,
    max_k: Any,
    dropout_p: float,
    is_causal: bool,
    philox_seed: Any,
    philox_offset: Any,
    *,
    scale: float | None = None,
) -> tuple[Any, Any, Any, Any]:
    """The backward's shapes on fake tensors: each gradient is laid out like its input, as torch 2.13's own meta
    kernel says (tests/compile compares the two where both exist)."""
    bias = torch.empty_like(attn_bias) if attn_bias is not None else None
    return torch.empty_like(query), torch.empty_like(key), torch.empty_like(value), bias


def supply_fused_attention_backward_meta() -> None:
    """torch 2.11 (and older lines) has a Meta kernel for the fused attention hook's forward but none for its
    backward, so AOTAutograd cannot trace a compiled graph's backward through it. Where it is missing, flagos
    registers one with the same rule as torch's later kernel."""
    name = FUSED_ATTENTION_OPS[1]
    if hasattr(torch.ops.aten, name) and not _has_meta(name):
        lib = torch.library.Library("aten", "IMPL")
        lib.impl(name, _fused_attention_backward_meta, "Meta")
        _LIBRARIES.append(lib)


def _has_meta(name: str) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", "Meta")


def keep_fused_attention_extern() -> None:
    """Have Inductor call the fused attention hook through ATen, as an extern kernel, instead of decomposing it
    into matmuls and a softmax that keep the attention matrix. torch 2.9-2.14 declare both ops with
    ``lowering.make_fallback(op, sdpa_constraint)``; a line that lacks the declaration gets the same one here,
    and a decomposition of them, where a table has one, is dropped for the same reason."""
    from torch._inductor import lowering

    for op in _fused_attention_overloads():
        for table in inductor_decomposition_tables():
            table.pop(op, None)
        if op not in lowering.lowerings:
            lowering.make_fallback(op, lowering.sdpa_constraint, warn=False, override_decomp=True)


def _fused_attention_problems() -> list[str]:
    from torch._inductor import lowering

    found = []
    for name in FUSED_ATTENTION_OPS:
        if not hasattr(torch.ops.aten, name):
            found.append(f"aten::{name} (the fused attention hook)")
        elif name != FUSED_ATTENTION_OPS[1] and not _has_meta(name):  # the backward's: supplied where missing
            found.append(f"a Meta kernel of aten::{name} (fake tensors trace it)")
    if (
        not found
        and not callable(getattr(lowering, "sdpa_constraint", None))
        and any(op not in lowering.lowerings for op in _fused_attention_overloads())
    ):
        found.append("lowering.sdpa_constraint (the fused attention ops' fallback layout constraint)")
    return found
