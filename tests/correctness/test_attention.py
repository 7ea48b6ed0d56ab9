"""scaled_dot_product_attention on flagos: the choice, and the fused kernel behind torch's overrideable hook.

Where the vendor takes flash attention, flagos' choice answers ``overrideable`` and torch calls
``_scaled_dot_product_fused_attention_overrideable`` (and its backward), which run the vendor's flash kernel
(csrc/aten/attention_overrideable.cpp). Under the emulation that kernel is the CPU's, so the results equal
the CPU flash kernel's bit for bit; on every vendor they equal the math path within tolerance.
"""

from __future__ import annotations

import contextlib

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import torch_fl

aten = torch.ops.aten
OVERRIDEABLE = "aten::_scaled_dot_product_fused_attention_overrideable"
MATH = "aten::_scaled_dot_product_attention_math"
EMULATION = torch_fl.accelerator() == "cpu"

# (query heads, key/value heads, query length, key length, head size), is_causal, scale, with a mask
CASES = {
    "plain": ((4, 4, 16, 16, 8), False, None, False),
    "causal": ((4, 4, 16, 16, 8), True, None, False),
    "scale": ((4, 4, 16, 24, 16), False, 0.3, False),
    "causal-rect": ((2, 2, 8, 24, 16), True, None, False),
    "gqa": ((4, 2, 16, 16, 8), False, None, False),
    "mask": ((2, 2, 16, 16, 8), False, None, True),
}


def _inputs(case: str, dtype: torch.dtype = torch.float32, *, seq_major: bool = False):
    (hq, hkv, lq, lk, e), causal, scale, with_mask = CASES[case]
    g = torch.Generator().manual_seed(len(case))

    def make(h: int, length: int) -> torch.Tensor:
        if seq_major:  # (B, L, H, E) memory seen as (B, H, L, E), as attention layers make them
            return torch.randn(2, length, h, e, generator=g).to(dtype).transpose(1, 2)
        return torch.randn(2, h, length, e, generator=g).to(dtype)

    q, k, v = make(hq, lq), make(hkv, lk), make(hkv, lk)
    mask = torch.randn(lq, lk, generator=g).to(dtype) if with_mask else None
    kwargs = {"is_causal": causal, "scale": scale, "enable_gqa": hq != hkv}
    return q, k, v, mask, kwargs


def _to_flagos(*tensors):
    return [None if t is None else t.to("flagos") for t in tensors]


def _ops_called(fn) -> set[str]:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    return {e.name for e in prof.events()}


def _cpu_takes_flash(q, k, v, mask, kwargs) -> bool:
    choice = torch._fused_sdp_choice(
        q, k, v, mask, 0.0, kwargs["is_causal"], scale=kwargs["scale"], enable_gqa=kwargs["enable_gqa"]
    )
    return choice == SDPBackend.FLASH_ATTENTION.value


@pytest.mark.parametrize("case", sorted(CASES))
def test_choice_is_overrideable_where_the_host_takes_flash(case):
    q, k, v, mask, kwargs = _inputs(case)
    fq, fk, fv, fmask = _to_flagos(q, k, v, mask)
    got = torch._fused_sdp_choice(
        fq, fk, fv, fmask, 0.0, kwargs["is_causal"], scale=kwargs["scale"], enable_gqa=kwargs["enable_gqa"]
    )
    if EMULATION:
        want = SDPBackend.OVERRIDEABLE if _cpu_takes_flash(q, k, v, mask, kwargs) else SDPBackend.MATH
        assert got == want.value, f"flagos chose {got}, the host's choice maps to {want}"
    called = _ops_called(lambda: F.scaled_dot_product_attention(fq, fk, fv, attn_mask=fmask, **kwargs))
    if got == SDPBackend.OVERRIDEABLE.value:
        assert OVERRIDEABLE in called and MATH not in called, sorted(called)


def _flash_only():
    """Where the vendor has other fused kernels it prefers (cuDNN on recent GPUs), ask for flash by name."""
    return contextlib.nullcontext() if EMULATION else sdpa_kernel([SDPBackend.FLASH_ATTENTION])


# flash kernels of GPUs take half precision only
FLASH_DTYPE = torch.float32 if EMULATION else torch.bfloat16


def test_the_plain_case_takes_the_fused_kernel():
    # the cases below would silently compare math with math if the choice never took the hook
    q, k, v, mask, kwargs = _inputs("plain", FLASH_DTYPE)
    fq, fk, fv = _to_flagos(q, k, v)
    with _flash_only():
        assert OVERRIDEABLE in _ops_called(lambda: F.scaled_dot_product_attention(fq, fk, fv, **kwargs))


@pytest.mark.skipif(EMULATION, reason="the host's flash kernel takes every head size")
def test_a_gpu_head_size_off_a_multiple_of_8_keeps_math():
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 16, 12, generator=g).to(torch.bfloat16).to("flagos")
    with _flash_only():
        assert torch._fused_sdp_choice(q, q, q) == SDPBackend.MATH.value


def test_choice_needing_a_mask_gradient_is_math():
    q, k, v, mask, kwargs = _inputs("mask")
    fq, fk, fv, fmask = _to_flagos(q, k, v, mask)
    fmask.requires_grad_(True)
    choice = torch._fused_sdp_choice(fq, fk, fv, fmask, 0.0, False)
    assert choice != SDPBackend.OVERRIDEABLE.value


def _strided(t: torch.Tensor, layout: str) -> torch.Tensor:
    if layout == "seq_major":
        return t.transpose(1, 2).contiguous().transpose(1, 2)
    if layout == "last_dim_strided":  # no flash kernel takes it
        return torch.stack((t, t), dim=-1)[..., 0]
    return t


@pytest.mark.skipif(not EMULATION, reason="compares with the host's own choice")
@pytest.mark.parametrize("mask_on", ["none", "flagos", "host"])
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("layout", ["contiguous", "seq_major", "last_dim_strided"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
def test_choice_maps_the_hosts_on_every_path(dtype, layout, grad, mask_on):
    # An eager call of flagos tensors that need no grad asks the host's choice of pooled vendor aliases, any other
    # of metadata-only tensors (attention_choice.cpp): both answer what the host answers, flash becoming
    # overrideable.
    q, k, v, mask, _ = _inputs("mask", dtype)
    q, k, v = (_strided(t, layout) for t in (q, k, v))
    if grad:
        q.requires_grad_(True)
    mask = None if mask_on == "none" else mask
    host = torch._fused_sdp_choice(q, k, v, mask, 0.0, False)
    fq, fk, fv = (t.detach().to("flagos").requires_grad_(t.requires_grad) for t in (q, k, v))
    fq, fk, fv = (_strided(t, layout) if layout == "last_dim_strided" else t for t in (fq, fk, fv))
    fmask = None if mask is None else (mask if mask_on == "host" else mask.to("flagos"))
    assert [t.stride() for t in (fq, fk, fv)] == [t.stride() for t in (q, k, v)]
    got = torch._fused_sdp_choice(fq, fk, fv, fmask, 0.0, False)
    want = SDPBackend.OVERRIDEABLE.value if host == SDPBackend.FLASH_ATTENTION.value else host
    assert got == want, (host, got)


def _forward_backward(q, k, v, mask, kwargs):
    q, k, v = (t.detach().requires_grad_(True) for t in (q, k, v))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kwargs)
    grad = torch.linspace(-1, 1, out.numel(), dtype=torch.float32).reshape(out.shape).to(out.dtype)
    out.backward(grad.to(out.device))
    return out, q.grad, k.grad, v.grad


def _kernel_taken(fq, fk, fv, fmask, kwargs) -> bool:
    choice = torch._fused_sdp_choice(
        fq, fk, fv, fmask, 0.0, kwargs["is_causal"], scale=kwargs["scale"], enable_gqa=kwargs["enable_gqa"]
    )
    return choice == SDPBackend.OVERRIDEABLE.value


@pytest.mark.parametrize("seq_major", [False, True], ids=["bhle", "blhe"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_forward_backward_match_math(case, seq_major, assert_same):
    q, k, v, mask, kwargs = _inputs(case, seq_major=seq_major)
    fq, fk, fv, fmask = _to_flagos(q, k, v, mask)
    got = _forward_backward(fq, fk, fv, fmask, kwargs)
    with sdpa_kernel(SDPBackend.MATH):
        want = _forward_backward(q, k, v, mask, kwargs)
    assert_same(list(got), list(want), exact=False, scale=10.0)


@pytest.mark.skipif(not EMULATION, reason="the vendor's flash kernel is the host's under the emulation only")
@pytest.mark.parametrize("seq_major", [False, True], ids=["bhle", "blhe"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_forward_backward_equal_the_host_flash_kernel(case, seq_major, assert_same):
    q, k, v, mask, kwargs = _inputs(case, seq_major=seq_major)
    fq, fk, fv, fmask = _to_flagos(q, k, v, mask)
    if not _kernel_taken(fq, fk, fv, fmask, kwargs):
        assert not _cpu_takes_flash(q, k, v, mask, kwargs)
        return
    got = _forward_backward(fq, fk, fv, fmask, kwargs)
    want = _forward_backward(q, k, v, mask, kwargs)  # the host takes its flash kernel for the same shapes
    assert_same(list(got), list(want), exact=True)


@pytest.mark.skipif(not EMULATION, reason="the vendor's flash kernel is the host's under the emulation only")
@pytest.mark.parametrize("seq_major", [False, True], ids=["bhle", "blhe"])
def test_the_op_returns_the_host_kernel_bits_in_the_meta_layout(seq_major, assert_same):
    q, k, v, _, _ = _inputs("causal", seq_major=seq_major)
    fq, fk, fv = _to_flagos(q, k, v)
    res = aten._scaled_dot_product_fused_attention_overrideable(fq, fk, fv, None, 0.0, True, scale=0.5)
    out, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, True, scale=0.5)
    assert_same([res[0], res[1]], [out, lse], exact=True)
    assert (res[4], res[5]) == (q.shape[2], k.shape[2])
    # the layouts torch's meta kernel gives (what a compiled graph assumes)
    with torch._subclasses.FakeTensorMode() as mode:
        meta = aten._scaled_dot_product_fused_attention_overrideable(
            *(mode.from_tensor(t) for t in (fq, fk, fv)), None, 0.0, True, scale=0.5
        )
    assert res[0].stride() == meta[0].stride() and res[1].stride() == meta[1].stride()

    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(3))
    got = aten._scaled_dot_product_fused_attention_overrideable_backward(
        grad.to("flagos"),
        fq,
        fk,
        fv,
        None,
        [True, True, True, False],
        *res[:4],
        res[4],
        res[5],
        0.0,
        True,
        res[6],
        res[7],
        scale=0.5,
    )
    want = aten._scaled_dot_product_flash_attention_for_cpu_backward(grad, q, k, v, out, lse, 0.0, True, scale=0.5)
    assert_same(list(got[:3]), list(want), exact=True)
    assert got[3] is None
    assert [g.stride() for g in got[:3]] == [t.stride() for t in (q, k, v)]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_matches_math(dtype, assert_same):
    q, k, v, mask, kwargs = _inputs("causal", dtype)
    fq, fk, fv = _to_flagos(q, k, v)
    got = _forward_backward(fq, fk, fv, None, kwargs)
    with sdpa_kernel(SDPBackend.MATH):
        want = _forward_backward(q, k, v, None, kwargs)
    assert_same(list(got), list(want), exact=False, scale=4.0)
    if EMULATION:
        assert_same(list(got), list(_forward_backward(q, k, v, None, kwargs)), exact=True)
