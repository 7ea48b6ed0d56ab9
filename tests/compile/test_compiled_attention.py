"""Attention under torch.compile on flagos: the choice is answered under tracing as in eager mode, and the fused
kernel behind torch's overrideable hook stays in the compiled graph as an extern call (Inductor neither lowers
nor decomposes it), so compiled attention computes what eager attention does."""

from __future__ import annotations

import contextlib

import pytest
import torch
import torch.nn.functional as F
from torch._inductor.utils import run_and_get_code
from torch.fx.experimental.proxy_tensor import make_fx
from torch.nn.attention import SDPBackend, sdpa_kernel

import torch_fl
from torch_fl.compile import _torch_compat

FUSED = "aten._scaled_dot_product_fused_attention_overrideable.default"
FUSED_BACKWARD = "aten._scaled_dot_product_fused_attention_overrideable_backward.default"


EMULATION = torch_fl.accelerator() == "cpu"
# flash kernels of GPUs take half precision only
DTYPE = torch.float32 if EMULATION else torch.bfloat16


def _flash_only():
    """Where the vendor has other fused kernels it prefers (cuDNN on recent GPUs), ask for flash by name."""
    return contextlib.nullcontext() if EMULATION else sdpa_kernel([SDPBackend.FLASH_ATTENTION])


def _qkv(heads_kv: int = 4, *, requires_grad: bool = True):
    g = torch.Generator().manual_seed(0)
    shapes = [(2, 4, 16, 8), (2, heads_kv, 16, 8), (2, heads_kv, 16, 8)]
    return [torch.randn(s, generator=g).to(DTYPE).to("flagos").requires_grad_(requires_grad) for s in shapes]


def test_the_choice_is_answered_under_tracing():
    # scaled_dot_product_attention asks the device's choice itself, with fake tensors while it is traced
    q, k, v = _qkv(requires_grad=False)
    with _flash_only():
        graph = make_fx(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), tracing_mode="fake")(
            q, k, v
        )
        eager = torch._fused_sdp_choice(q, k, v, None, 0.0, True)
    targets = {str(n.target) for n in graph.graph.nodes if n.op == "call_function"}
    if eager == SDPBackend.OVERRIDEABLE.value:
        assert FUSED in targets, targets
    assert "aten._scaled_dot_product_attention_math.default" not in targets and "aten.bmm.default" not in targets
    assert eager == SDPBackend.OVERRIDEABLE.value  # the vendor takes flash for these shapes


def test_this_torch_has_what_the_fused_kernel_needs():
    torch_fl.compile.register()
    assert not _torch_compat._fused_attention_problems()
    # the backward's Meta kernel is there, torch's own or the one flagos supplies where a line lacks it
    assert _torch_compat._has_meta(_torch_compat.FUSED_ATTENTION_OPS[1])


@pytest.mark.parametrize("bias", [False, True])
def test_the_supplied_backward_meta_agrees_with_torchs_own(bias):
    """Where torch has the backward's Meta kernel, the one flagos supplies for older lines gives the same shapes
    and strides (a transposed key shows that a gradient is laid out like its input)."""
    meta = torch.device("meta")
    q = torch.empty(2, 4, 8, 16, device=meta)
    k = torch.empty(2, 8, 4, 16, device=meta).transpose(1, 2)
    v = torch.empty(2, 4, 8, 16, device=meta)
    b = torch.empty(2, 4, 8, 8, device=meta) if bias else None
    lse, empty = torch.empty(2, 4, 8, device=meta), torch.empty(0, device=meta)
    args = (
        torch.empty_like(q),
        q,
        k,
        v,
        b,
        [True, True, True, bias],
        torch.empty_like(q),
        lse,
        empty,
        empty,
        8,
        8,
        0.0,
        False,
        empty,
        empty,
    )
    torch_fl.compile.register()
    name = _torch_compat.FUSED_ATTENTION_OPS[1]
    if not _torch_compat._has_meta(name):
        pytest.fail(f"this torch has no Meta kernel of aten::{name}: torch_fl.compile's registration supplies one")
    theirs = getattr(torch.ops.aten, name).default(*args)
    ours = _torch_compat._fused_attention_backward_meta(*args)
    for got, want in zip(ours, theirs, strict=True):
        if want is None:
            assert got is None
        else:
            assert (got.shape, got.stride(), got.dtype) == (want.shape, want.stride(), want.dtype)


def _attention(q, k, v, **kwargs):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, **kwargs) * 2


def _step(fn, q, k, v, **kwargs):
    q, k, v = (t.detach().requires_grad_(True) for t in (q, k, v))
    out = fn(q, k, v, **kwargs)
    out.backward(torch.ones_like(out))
    return [out.detach(), q.grad, k.grad, v.grad]


@pytest.mark.parametrize("heads_kv", [4, 2], ids=["mha", "gqa"])
def test_the_fused_kernel_is_an_extern_call_and_equals_eager(heads_kv):
    q, k, v = _qkv(heads_kv)
    kwargs = {"enable_gqa": heads_kv != 4}
    with _flash_only():
        if torch._fused_sdp_choice(q, k, v, None, 0.0, True, enable_gqa=kwargs["enable_gqa"]) != (
            SDPBackend.OVERRIDEABLE.value
        ):
            pytest.fail("the vendor takes no flash kernel for these shapes: the test would compare math with math")
        compiled = torch.compile(_attention, backend="inductor")
        got, codes = run_and_get_code(lambda: _step(compiled, q, k, v, **kwargs))
        want = _step(_attention, q, k, v, **kwargs)
    code = "\n".join(codes)
    if EMULATION:
        assert FUSED in code and FUSED_BACKWARD in code, code
        assert "_scaled_dot_product_attention_math" not in code and "bmm" not in code, code
    else:  # a training graph on a GPU vendor keeps the math path (csrc/aten/attention_choice.cpp says why)
        assert FUSED not in code, code
    for g, w in zip(got, want, strict=True):
        assert g.device.type == "flagos"
        if EMULATION:
            torch.testing.assert_close(g.cpu(), w.cpu(), rtol=0, atol=0)
        else:  # the math path in bf16 against the eager flash kernel
            torch.testing.assert_close(g.cpu().float(), w.cpu().float(), rtol=2e-2, atol=2e-2)


def test_dynamic_shapes_stay_dynamic():
    # the choice reads symbolic sizes as the vendor's own choice function does: one graph for every length
    from torch._dynamo.utils import counters

    compiled = torch.compile(lambda q: F.scaled_dot_product_attention(q, q, q, is_causal=True), dynamic=True)
    before = counters["stats"]["unique_graphs"]
    g = torch.Generator().manual_seed(0)
    with _flash_only():
        for length in (16, 24, 40):
            q = torch.randn(2, 4, length, 8, generator=g).to(DTYPE).to("flagos")
            want = F.scaled_dot_product_attention(q, q, q, is_causal=True)
            torch.testing.assert_close(compiled(q).cpu(), want.cpu(), rtol=0, atol=0)
    if EMULATION:
        assert counters["stats"]["unique_graphs"] - before == 1


class _Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = torch.nn.Linear(32, 96)
        self.out = torch.nn.Linear(32, 32)

    def forward(self, x):
        b, length, _ = x.shape
        q, k, v = self.qkv(x).view(b, length, 3, 4, 8).unbind(2)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, length, 32))


def test_a_compiled_attention_block_matches_eager():
    torch.manual_seed(0)
    block = _Block().to("flagos")
    x = torch.randn(2, 16, 32).to("flagos")
    compiled = torch.compile(block, backend="inductor")

    def run(model):
        model.zero_grad()
        out = model(x)
        out.pow(2).sum().backward()
        return [out.detach()] + [p.grad.clone() for p in model.parameters()]

    got, codes = run_and_get_code(lambda: run(compiled))
    want = run(block)
    if EMULATION:  # float32: the host takes flash (a GPU's float32 attention is its memory-efficient kernel)
        assert FUSED in "\n".join(codes)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g.cpu(), w.cpu())
