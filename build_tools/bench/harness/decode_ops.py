"""The op mix of a decoder LLM's eager decode step at batch 1, as single calls and as a whole token step, for
router_cost.py (issue 52).

A greedy decode step at batch 1 is thousands of calls on tiny tensors (a Llama layer: RMSNorm, q/k/v projections,
rotary embedding, the static cache's index_copy_, grouped-query expand, scaled dot product attention, the MLP), so
the router's host cost per call is most of what flagos adds to it. ``CASES`` builds each of those calls on one
device, its arguments made once on the host from one seed and moved; ``decoder`` is a plain-torch decoder of that
op mix (no transformers needed), the same weights on every device, whose ``step()`` decodes one token from a fixed
prefilled cache position, so every step does the same work.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

# hidden 64 over 4 heads of 16, 2 key/value heads, a static cache of 32 positions
HIDDEN, HEADS, KV_HEADS, HEAD_DIM, CACHE, MLP, VOCAB = 64, 4, 2, 16, 32, 128, 256


def _cases(torch: Any) -> dict[str, Callable[[str], Callable[[], Any]]]:
    F = torch.nn.functional
    g = torch.Generator().manual_seed(0)

    def t(*shape: int, dtype: Any = torch.float32) -> Any:
        return torch.randn(*shape, generator=g).to(dtype)

    x = t(1, 1, HIDDEN)  # one token's hidden state
    y = t(1, 1, HIDDEN)  # another: a copy of a tensor onto itself is skipped
    w = t(HIDDEN, HIDDEN)
    bias = t(HIDDEN)
    q = t(1, HEADS, 1, HEAD_DIM)
    k = t(1, KV_HEADS, CACHE, HEAD_DIM)
    kk = t(1, HEADS, CACHE, HEAD_DIM)
    vv = t(1, HEADS, CACHE, HEAD_DIM)
    mask = torch.zeros(1, 1, 1, CACHE)
    new_k = t(1, KV_HEADS, 1, HEAD_DIM)
    pos = torch.tensor([5])
    ids = torch.tensor([[7]])
    emb = t(VOCAB, HIDDEN)
    xb = t(1, 1, HIDDEN, dtype=torch.bfloat16)
    logits = t(1, 1, VOCAB)

    def on(dev: str, *tensors: Any) -> list[Any]:
        # A copy on every device, the host's too: .to("cpu") of a host tensor is the tensor itself, shared with the
        # other arms and cases. A tensor some C++ object also holds (a view's base) pays no Python reference on a
        # view's first C++ reference to it; one held by Python alone pays a GIL round trip, on every device alike.
        return [a.to(dev, copy=True) for a in tensors]

    def case(build: Callable[..., Callable[[], Any]], *tensors: Any) -> Callable[[str], Callable[[], Any]]:
        return lambda dev: build(dev, *on(dev, *tensors))

    def empty(dev: str) -> Callable[[], Any]:
        device = torch.device(dev)
        return lambda: torch.empty((1, HEADS, 1, HEAD_DIM), device=device)

    def empty_strided(dev: str) -> Callable[[], Any]:
        device = torch.device(dev)
        return lambda: torch.empty_strided((1, 1, HIDDEN), (HIDDEN, HIDDEN, 1), device=device)

    return {
        # views: metadata only on the vendor device
        "view": case(lambda d, a: lambda: a.view(1, 1, HEADS, HEAD_DIM), x),
        "transpose": case(lambda d, a: lambda: a.transpose(1, 2), q),
        "unsqueeze": case(lambda d, a: lambda: a.unsqueeze(1), x),
        "slice": case(lambda d, a: lambda: a[..., : HEAD_DIM // 2], q),
        "expand": case(lambda d, a: lambda: a[:, :, None].expand(1, KV_HEADS, 2, CACHE, HEAD_DIM), k),
        "reshape": case(lambda d, a: lambda: a.reshape(1, HIDDEN), x),
        "as_strided": case(lambda d, a: lambda: a.as_strided((HEADS, HEAD_DIM), (HEAD_DIM, 1)), x),
        "t": case(lambda d, a: lambda: a.t(), w),
        # small elementwise and reductions (RMSNorm, residuals, rotary, MLP, attention's softmax)
        "add": case(lambda d, a, b: lambda: a + b, x, x),
        "mul": case(lambda d, a, b: lambda: a * b, x, x),
        "neg": case(lambda d, a: lambda: -a, q),
        "rsqrt": case(lambda d, a: lambda: torch.rsqrt(a), x),
        "pow": case(lambda d, a: lambda: a.pow(2), x),
        "mean.dim": case(lambda d, a: lambda: a.mean(-1, keepdim=True), x),
        "silu": case(lambda d, a: lambda: F.silu(a), x),
        "softmax": case(lambda d, a: lambda: torch.softmax(a, dim=-1), logits),
        # projections
        "mm": case(lambda d, a, b: lambda: torch.mm(a, b), x.view(1, HIDDEN), w),
        "addmm": case(lambda d, c, a, b: lambda: torch.addmm(c, a, b), bias, x.view(1, HIDDEN), w),
        "bmm": case(
            lambda d, a, b: lambda: torch.bmm(a, b),
            q.view(HEADS, 1, HEAD_DIM),
            kk.view(HEADS, CACHE, HEAD_DIM).transpose(1, 2),
        ),
        "linear": case(lambda d, a, b: lambda: F.linear(a, b), x, w),
        # rotary's rotate_half, the static cache, the embedding, allocation, copies
        "cat": case(
            lambda d, a, b: lambda: torch.cat((-b, a), dim=-1), q[..., : HEAD_DIM // 2], q[..., HEAD_DIM // 2 :]
        ),
        "index_copy_": case(lambda d, c, p, n: lambda: c.index_copy_(2, p, n), k, pos, new_k),
        # the static cache's fallback write, cache[:, :, position] = key: index_put_
        "index_put_": case(lambda d, c, p, n: lambda: c.__setitem__((slice(None), slice(None), p), n), k, pos, new_k),
        "embedding": case(lambda d, i, e: lambda: F.embedding(i, e), ids, emb),
        "empty": empty,
        "empty_strided": empty_strided,
        "copy_": case(lambda d, a, b: lambda: a.copy_(b), x, y),
        "_to_copy": case(lambda d, a: lambda: a.float(), xb),
        "sdpa": case(
            lambda d, a, b, c, m: lambda: F.scaled_dot_product_attention(a, b, c, attn_mask=m), q, kk, vv, mask
        ),
        "argmax": case(lambda d, a: lambda: a.argmax(-1), logits),
    }


DECODE_OPS = (
    "view",
    "transpose",
    "unsqueeze",
    "slice",
    "expand",
    "reshape",
    "as_strided",
    "t",
    "add",
    "mul",
    "neg",
    "rsqrt",
    "pow",
    "mean.dim",
    "silu",
    "softmax",
    "mm",
    "addmm",
    "bmm",
    "linear",
    "cat",
    "index_copy_",
    "index_put_",
    "embedding",
    "empty",
    "empty_strided",
    "copy_",
    "_to_copy",
    "sdpa",
    "argmax",
)


def cases(torch: Any) -> dict[str, Callable[[str], Callable[[], Any]]]:
    """Per op of DECODE_OPS: given a device, the call to time."""
    return _cases(torch)


class _Decoder:
    """A Llama-like decoder in plain torch, eager, with a static key/value cache: HF Llama's op mix per token."""

    def __init__(self, torch: Any, layers: int, dtype: Any, device: str) -> None:
        self.torch, self.dtype, self.device = torch, dtype, torch.device(device)
        g = torch.Generator().manual_seed(0)

        def p(*shape: int) -> Any:
            return (torch.randn(*shape, generator=g) / math.sqrt(shape[-1])).to(dtype).to(device)

        self.embed = p(VOCAB, HIDDEN)
        self.layers = [
            {
                "norm1": torch.ones(HIDDEN, dtype=dtype).to(device),
                "q": p(HEADS * HEAD_DIM, HIDDEN),
                "k": p(KV_HEADS * HEAD_DIM, HIDDEN),
                "v": p(KV_HEADS * HEAD_DIM, HIDDEN),
                "o": p(HIDDEN, HEADS * HEAD_DIM),
                "norm2": torch.ones(HIDDEN, dtype=dtype).to(device),
                "gate": p(MLP, HIDDEN),
                "up": p(MLP, HIDDEN),
                "down": p(HIDDEN, MLP),
                "k_cache": torch.zeros(1, KV_HEADS, CACHE, HEAD_DIM, dtype=dtype).to(device),
                "v_cache": torch.zeros(1, KV_HEADS, CACHE, HEAD_DIM, dtype=dtype).to(device),
            }
            for _ in range(layers)
        ]
        self.norm = torch.ones(HIDDEN, dtype=dtype).to(device)
        self.lm_head = p(VOCAB, HIDDEN)
        self.inv_freq = (1.0 / (10000 ** (torch.arange(0, HEAD_DIM, 2, dtype=torch.float32) / HEAD_DIM))).to(device)
        self.token = torch.tensor([[3]]).to(device)
        self.position = torch.tensor([CACHE // 2]).to(device)
        mask = torch.full((1, 1, 1, CACHE), float("-inf"))
        mask[..., : CACHE // 2 + 1] = 0
        self.mask = mask.to(dtype).to(device)

    def _rms(self, h: Any, weight: Any) -> Any:
        torch = self.torch
        h32 = h.to(torch.float32)
        h32 = h32 * torch.rsqrt(h32.pow(2).mean(-1, keepdim=True) + 1e-6)
        return weight * h32.to(self.dtype)

    def _rotate_half(self, x: Any) -> Any:
        half = x.shape[-1] // 2
        return self.torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    def step(self) -> Any:
        torch = self.torch
        F = torch.nn.functional
        h = F.embedding(self.token, self.embed)
        # rotary: HF computes cos/sin per step from the position ids
        freqs = (self.inv_freq[None, :, None].float() @ self.position[None, None, :].float()).transpose(1, 2)
        angles = torch.cat((freqs, freqs), dim=-1)
        cos, sin = angles.cos().to(self.dtype), angles.sin().to(self.dtype)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        for layer in self.layers:
            residual = h
            x = self._rms(h, layer["norm1"])
            q = F.linear(x, layer["q"]).view(1, 1, HEADS, HEAD_DIM).transpose(1, 2)
            k = F.linear(x, layer["k"]).view(1, 1, KV_HEADS, HEAD_DIM).transpose(1, 2)
            v = F.linear(x, layer["v"]).view(1, 1, KV_HEADS, HEAD_DIM).transpose(1, 2)
            q = q * cos + self._rotate_half(q) * sin
            k = k * cos + self._rotate_half(k) * sin
            layer["k_cache"].index_copy_(2, self.position, k)
            layer["v_cache"].index_copy_(2, self.position, v)
            groups = HEADS // KV_HEADS
            kk = (
                layer["k_cache"][:, :, None]
                .expand(1, KV_HEADS, groups, CACHE, HEAD_DIM)
                .reshape(1, HEADS, CACHE, HEAD_DIM)
            )
            vv = (
                layer["v_cache"][:, :, None]
                .expand(1, KV_HEADS, groups, CACHE, HEAD_DIM)
                .reshape(1, HEADS, CACHE, HEAD_DIM)
            )
            a = F.scaled_dot_product_attention(q, kk, vv, attn_mask=self.mask)
            a = a.transpose(1, 2).contiguous().reshape(1, 1, HIDDEN)
            h = residual + F.linear(a, layer["o"])
            residual = h
            x = self._rms(h, layer["norm2"])
            h = residual + F.linear(F.silu(F.linear(x, layer["gate"])) * F.linear(x, layer["up"]), layer["down"])
        logits = F.linear(self._rms(h, self.norm), self.lm_head)
        return logits[:, -1, :].argmax(-1)


def decoder(torch: Any, device: str, layers: int = 2, dtype: Any = None) -> _Decoder:
    """The tiny decoder on ``device`` (bf16 by default, as the H100's decode runs)."""
    return _Decoder(torch, layers, dtype if dtype is not None else torch.bfloat16, device)
