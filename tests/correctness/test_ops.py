"""Common operators on flagos equal the same operators on CPU, over dtypes and memory layouts.

Each case names a function of some tensors. Its data inputs are made on the host in the test's
dtype (seeded), moved to flagos, and the function runs on both copies; ``strided`` inputs are
every-other-column views of twice-as-wide tensors, built on each device, so the flagos kernels
see non-contiguous memory. Extra inputs (indices, masks) do not depend on the dtype.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
import torch
import torch.nn.functional as F

F32, F16, BF16, I64 = torch.float32, torch.float16, torch.bfloat16, torch.int64
FLOATS = (F32, F16, BF16)
ALL = (F32, F16, BF16, I64)
DEVICE = "flagos"


@dataclass(frozen=True)
class Case:
    name: str
    fn: Callable[..., object]
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[torch.dtype, ...] = ALL
    exact: bool = True  # deterministic and correctly rounded: float32 compares bit for bit
    domain: str = "any"  # any | pos (positive, away from 0) | small (integer-valued, many ties)
    extras: Callable[[torch.Generator], tuple[torch.Tensor, ...]] | None = None
    scale: float = 1.0  # tolerance multiplier for fp16/bf16 (long accumulations)
    marks: tuple = field(default=())


def ints(*shape: int, high: int, low: int = 0) -> Callable[[torch.Generator], torch.Tensor]:
    return lambda g: torch.randint(low, high, shape, generator=g)


def perm_rows(rows: int, cols: int, take: int) -> Callable[[torch.Generator], torch.Tensor]:
    """Per row, ``take`` distinct column indices (scatter without duplicate targets is deterministic)."""
    return lambda g: torch.rand(rows, cols, generator=g).argsort(dim=1)[:, :take]


def extras(*makers: Callable[[torch.Generator], torch.Tensor]) -> Callable[[torch.Generator], tuple]:
    return lambda g: tuple(make(g) for make in makers)


def topk_checked(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # tie order may differ between kernels: check the values, and that the indices point at them
    values, indices = a.topk(3, dim=1)
    return values, a.gather(1, indices)


def setitem(fn: Callable[[torch.Tensor], None]) -> Callable[..., torch.Tensor]:
    def run(a: torch.Tensor, *rest: torch.Tensor) -> torch.Tensor:
        c = a.clone()
        fn(c, *rest)
        return c

    return run


def _set_fancy(c, v, idx):
    c[idx] = v


def _set_mask(c):
    c[c > 0] = 0


def _set_slice(c):
    c[:, 1:3] = 5


def _set_tensor(c, v):
    c[1] = v


M = (4, 6)  # the common matrix shape; broadcast partners below
CASES = [
    # ---- pointwise binary, with broadcasting -------------------------------------------------
    Case("add", lambda a, b: a + b, (M, (6,))),
    Case("add_alpha", lambda a, b: torch.add(a, b, alpha=2), ((4, 1), (1, 6))),
    Case("sub", lambda a, b: a - b, ((3, 4, 6), (4, 1))),
    Case("rsub_scalar", lambda a: 3 - a, (M,)),
    Case("mul", lambda a, b: a * b, (M, M)),
    Case("mul_scalar", lambda a: a * 3, (M,)),
    Case("div", lambda a, b: a / b, (M, (6,)), domain="pos"),
    Case("div_floor", lambda a, b: torch.div(a, b, rounding_mode="floor"), (M, M), domain="pos"),
    Case("remainder", torch.remainder, (M, (6,)), domain="pos", exact=False),
    Case("fmod", torch.fmod, (M, M), domain="pos", exact=False),
    Case("pow", torch.pow, (M, M), dtypes=FLOATS, domain="pos", exact=False),
    Case("pow_scalar", lambda a: a**2, (M,), exact=False),
    Case("maximum", torch.maximum, (M, (6,))),
    Case("minimum", torch.minimum, ((4, 1), (6,))),
    Case("atan2", torch.atan2, (M, M), dtypes=FLOATS, exact=False),
    Case("eq", torch.eq, (M, (6,)), domain="small"),
    Case("ne", torch.ne, (M, M), domain="small"),
    Case("lt", torch.lt, (M, (6,)), domain="small"),
    Case("le", lambda a, b: a <= b, (M, M), domain="small"),
    Case("gt", lambda a: a > 0, (M,), domain="small"),
    Case("ge", torch.ge, ((4, 1), (1, 6)), domain="small"),
    Case("where", lambda a, b: torch.where(a > 0, a, b), (M, (6,))),
    Case("where_scalar", lambda a: torch.where(a > 0, a, 0), (M,)),
    Case("clamp", lambda a: a.clamp(-1, 1), (M,)),
    Case("clamp_tensor", lambda a, b: torch.clamp(a, min=b), (M, (6,))),
    Case("logical_and", lambda a, b: torch.logical_and(a > 0, b > 0), (M, M)),
    Case("bitwise_and", torch.bitwise_and, (M, M), dtypes=(I64,)),
    Case("lerp", lambda a, b: torch.lerp(a, b, 0.3), (M, M), dtypes=FLOATS, exact=False),
    Case("addcmul", lambda a, b, c: torch.addcmul(a, b, c, value=0.5), (M, M, (6,)), dtypes=FLOATS, exact=False),
    # ---- pointwise unary ------------------------------------------------------------------
    Case("neg", torch.neg, (M,)),
    Case("abs", torch.abs, (M,)),
    Case("square", torch.square, (M,)),
    Case("sign", torch.sign, (M,)),
    Case("relu", torch.relu, (M,)),
    Case("exp", torch.exp, (M,), dtypes=FLOATS, exact=False),
    Case("log", torch.log, (M,), dtypes=FLOATS, domain="pos", exact=False),
    Case("sqrt", torch.sqrt, (M,), dtypes=FLOATS, domain="pos", exact=False),
    Case("rsqrt", torch.rsqrt, (M,), dtypes=FLOATS, domain="pos", exact=False),
    Case("reciprocal", torch.reciprocal, (M,), dtypes=FLOATS, domain="pos", exact=False),
    Case("sin", torch.sin, (M,), dtypes=FLOATS, exact=False),
    Case("cos", torch.cos, (M,), dtypes=FLOATS, exact=False),
    Case("tanh", torch.tanh, (M,), dtypes=FLOATS, exact=False),
    Case("sigmoid", torch.sigmoid, (M,), dtypes=FLOATS, exact=False),
    Case("erf", torch.erf, (M,), dtypes=FLOATS, exact=False),
    Case("gelu", F.gelu, (M,), dtypes=FLOATS, exact=False),
    Case("silu", F.silu, (M,), dtypes=FLOATS, exact=False),
    Case("leaky_relu", lambda a: F.leaky_relu(a, 0.1), (M,), dtypes=FLOATS, exact=False),
    Case("floor", torch.floor, (M,), dtypes=FLOATS),
    Case("ceil", torch.ceil, (M,), dtypes=FLOATS),
    Case("round", torch.round, (M,), dtypes=FLOATS),
    Case("trunc", torch.trunc, (M,), dtypes=FLOATS),
    Case("to_float", lambda a: a.to(torch.float32), (M,)),
    Case("to_int32", lambda a: a.to(torch.int32), (M,)),
    Case("to_half", lambda a: a.half(), (M,)),
    Case("isnan", lambda a: torch.isnan(a / a), (M,), domain="small"),
    # ---- reductions -----------------------------------------------------------------------
    Case("sum", torch.sum, ((6, 7),), exact=False, scale=4),
    Case("sum_dim", lambda a: a.sum(1), ((6, 7),), exact=False, scale=2),
    Case("sum_keepdim", lambda a: a.sum(0, keepdim=True), ((6, 7),), exact=False, scale=2),
    Case("sum_dtype", lambda a: a.sum(1, dtype=torch.float64), ((6, 7),), exact=False),
    Case("mean", lambda a: a.mean(1), ((6, 7),), dtypes=FLOATS, exact=False, scale=2),
    Case("prod", lambda a: a.prod(1), ((6, 5),), exact=False, scale=4),
    Case("amax", lambda a: a.amax(1), ((6, 7),)),
    Case("amin", lambda a: a.amin(0), ((6, 7),)),
    Case("argmax", lambda a: a.argmax(1), ((6, 7),)),
    Case("argmin", lambda a: a.argmin(), ((6, 7),)),
    Case("max_dim", lambda a: a.max(1), ((6, 7),)),
    Case("min_dim", lambda a: a.min(0, keepdim=True), ((6, 7),)),
    Case("max_all", torch.max, ((6, 7),)),
    Case("std", lambda a: a.std(1), ((6, 7),), dtypes=FLOATS, exact=False, scale=2),
    Case("var", lambda a: a.var(0, unbiased=False), ((6, 7),), dtypes=FLOATS, exact=False, scale=2),
    Case("norm", lambda a: a.norm(dim=1), ((6, 7),), dtypes=FLOATS, exact=False, scale=2),
    Case("cumsum", lambda a: a.cumsum(1), ((6, 7),), exact=False, scale=4),
    Case("cumprod", lambda a: a.cumprod(1), ((6, 5),), dtypes=FLOATS, exact=False, scale=4),
    Case("logsumexp", lambda a: a.logsumexp(1), ((6, 7),), dtypes=FLOATS, exact=False, scale=2),
    Case("all_any", lambda a: ((a > 0).all(1), (a > 0).any(0)), ((6, 7),), domain="small"),
    Case("count_nonzero", lambda a: torch.count_nonzero(a, dim=1), ((6, 7),), domain="small"),
    Case("sort", lambda a: a.sort(dim=1, stable=True), ((6, 7),), domain="small"),
    Case("argsort", lambda a: a.argsort(dim=0, stable=True), ((6, 7),), domain="small"),
    Case("topk", topk_checked, ((6, 7),)),
    Case("item", lambda a: a.sum().item(), ((3, 3),), domain="small"),
    # ---- linear algebra -------------------------------------------------------------------
    Case("matmul", torch.matmul, ((3, 4), (4, 5)), dtypes=FLOATS, exact=False, scale=2),
    Case("matmul_t", lambda a, b: a.t() @ b, ((4, 3), (4, 5)), dtypes=FLOATS, exact=False, scale=2),
    Case("matmul_batched", torch.matmul, ((2, 3, 4), (4, 5)), dtypes=FLOATS, exact=False, scale=2),
    Case("mm", torch.mm, ((3, 4), (4, 5)), dtypes=FLOATS, exact=False, scale=2),
    Case("bmm", torch.bmm, ((2, 3, 4), (2, 4, 5)), dtypes=FLOATS, exact=False, scale=2),
    Case("mv", torch.mv, ((3, 4), (4,)), dtypes=FLOATS, exact=False, scale=2),
    Case("addmm", lambda c, a, b: torch.addmm(c, a, b), ((5,), (3, 4), (4, 5)), dtypes=FLOATS, exact=False, scale=2),
    Case("linear", F.linear, ((3, 4), (5, 4), (5,)), dtypes=FLOATS, exact=False, scale=2),
    Case(
        "einsum",
        lambda a, b: torch.einsum("bij,bkj->bik", a, b),
        ((2, 3, 4), (2, 5, 4)),
        dtypes=FLOATS,
        exact=False,
        scale=2,
    ),
    # ---- indexing ---------------------------------------------------------------------------
    Case("getitem_slice", lambda a: a[1:3, ::2], (M,)),
    Case("getitem_int", lambda a: a[2], (M,)),
    Case("getitem_tensor", lambda a, i: a[i], (M,), extras=extras(ints(5, high=4))),
    Case("getitem_tensor_cols", lambda a, i: a[:, i], (M,), extras=extras(ints(3, high=6))),
    Case("getitem_bool", lambda a: a[a > 0], (M,)),
    Case("getitem_two_tensors", lambda a, i, j: a[i, j], (M,), extras=extras(ints(5, high=4), ints(5, high=6))),
    Case("setitem_tensor", setitem(_set_fancy), (M, (6,)), extras=extras(lambda g: torch.tensor([2, 0]))),
    Case("setitem_mask", setitem(_set_mask), (M,)),
    Case("setitem_slice", setitem(_set_slice), (M,)),
    Case("setitem_row", setitem(_set_tensor), (M, (6,))),
    Case("index_select", lambda a, i: a.index_select(1, i), (M,), extras=extras(ints(4, high=6))),
    Case("gather", lambda a, i: a.gather(1, i), (M,), extras=extras(ints(4, 3, high=6))),
    Case("scatter", lambda a, b, i: a.scatter(1, i, b), (M, (4, 3)), extras=extras(perm_rows(4, 6, 3))),
    Case(
        "scatter_add",
        lambda a, b, i: a.scatter_add(1, i, b),
        (M, (4, 3)),
        extras=extras(ints(4, 3, high=6)),
        exact=False,
    ),
    Case("index_add", lambda a, b, i: a.index_add(0, i, b), (M, (2, 6)), extras=extras(lambda g: torch.tensor([3, 1]))),
    Case(
        "index_put_accumulate",
        lambda a, b, i: a.index_put((i,), b, accumulate=True),
        (M, (6,)),
        extras=extras(lambda g: torch.tensor([1, 1, 2])),
        exact=False,
    ),
    Case("masked_fill", lambda a: a.masked_fill(a > 0, -1), (M,)),
    Case("masked_select", lambda a, b: a.masked_select(b > 0), (M, (6,))),
    Case("masked_scatter", lambda a, b: a.masked_scatter(a > 0, b), (M, M)),
    Case("nonzero", lambda a: torch.nonzero(a > 0), (M,), domain="small"),
    Case("take", torch.take, (M,), extras=extras(ints(7, high=24))),
    Case("embedding", lambda w, i: F.embedding(i, w), ((10, 4),), dtypes=FLOATS, extras=extras(ints(3, 5, high=10))),
    Case("tril_triu", lambda a: (a.tril(), a.triu(1)), ((5, 5),)),
    Case("flip", lambda a: a.flip(0, 1), (M,)),
    Case("roll", lambda a: a.roll(2, 1), (M,)),
    # ---- joining and splitting (list inputs, tuple outputs) ------------------------------
    Case("cat", lambda a, b, c: torch.cat([a, b, c], 0), ((2, 6), (3, 6), (1, 6))),
    Case("cat_dim1", lambda a, b: torch.cat((a, b), dim=1), ((4, 2), (4, 5))),
    Case("stack", lambda a, b: torch.stack([a, b], 1), (M, M)),
    Case("split", lambda a: a.split([2, 4], dim=1), (M,)),
    Case("split_size", lambda a: a.split(3), ((7, 6),)),
    Case("chunk", lambda a: a.chunk(3, dim=1), (M,)),
    Case("unbind", lambda a: a.unbind(0), (M,)),
    Case("contiguous_t", lambda a: a.t().contiguous(), (M,)),
    Case("permute_reshape", lambda a: a.permute(2, 0, 1).reshape(4, -1), ((2, 3, 4),)),
    Case("expand_contiguous", lambda a: a.expand(3, 4, 6).contiguous(), ((4, 6),)),
    Case("repeat", lambda a: a.repeat(2, 3), ((2, 3),)),
    Case("narrow_unsqueeze", lambda a: a.narrow(1, 1, 3).unsqueeze(0).squeeze(), (M,)),
    # ---- nn -------------------------------------------------------------------------------
    Case("softmax", lambda a: torch.softmax(a, -1), (M,), dtypes=FLOATS, exact=False),
    Case("softmax_dim0", lambda a: F.softmax(a, dim=0), (M,), dtypes=FLOATS, exact=False),
    Case("log_softmax", lambda a: F.log_softmax(a, -1), (M,), dtypes=FLOATS, exact=False),
    Case(
        "layer_norm", lambda a, w, b: F.layer_norm(a, (6,), w, b), (M, (6,), (6,)), dtypes=FLOATS, exact=False, scale=2
    ),
    Case("layer_norm_plain", lambda a: F.layer_norm(a, (6,)), (M,), dtypes=FLOATS, exact=False, scale=2),
    Case("mse_loss", F.mse_loss, (M, M), dtypes=FLOATS, exact=False, scale=2),
    Case(
        "cross_entropy",
        lambda a, t: F.cross_entropy(a, t),
        (M,),
        dtypes=FLOATS,
        extras=extras(ints(4, high=6)),
        exact=False,
        scale=2,
    ),
    Case(
        "conv2d",
        lambda x, w, b: F.conv2d(x, w, b, padding=1),
        ((1, 2, 5, 5), (3, 2, 3, 3), (3,)),
        dtypes=FLOATS,
        exact=False,
        scale=4,
    ),
    Case(
        "batch_norm",
        lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
        ((4, 3, 5), (3,), (3,)),
        dtypes=FLOATS,
        exact=False,
        scale=2,
    ),
    Case("group_norm", lambda x: F.group_norm(x, 2), ((2, 4, 5),), dtypes=FLOATS, exact=False, scale=2),
    Case("max_pool2d", lambda x: F.max_pool2d(x, 2), ((1, 2, 4, 6),), dtypes=FLOATS),
    Case("avg_pool2d", lambda x: F.avg_pool2d(x, 2), ((1, 2, 4, 6),), dtypes=FLOATS, exact=False),
]

DTYPE_IDS = {F32: "f32", F16: "f16", BF16: "bf16", I64: "i64"}


def _params():
    for case in CASES:
        for dtype in case.dtypes:
            for layout in ("contig", "strided"):
                yield pytest.param(case, dtype, layout, id=f"{case.name}-{DTYPE_IDS[dtype]}-{layout}", marks=case.marks)


def make_input(shape: tuple[int, ...], dtype: torch.dtype, domain: str, g: torch.Generator) -> torch.Tensor:
    if domain == "small":
        t = torch.randint(-3, 4, shape, generator=g).to(dtype)
    elif dtype.is_floating_point:
        t = torch.randn(shape, generator=g) * 2
        if domain == "pos":
            t = t.abs() + 0.5
        t = t.to(dtype)
    else:
        t = torch.randint(1 if domain == "pos" else -9, 10, shape, generator=g, dtype=dtype)
    return t


def pair(shape: tuple[int, ...], dtype: torch.dtype, domain: str, layout: str, g: torch.Generator):
    """The same values as a CPU tensor and a flagos tensor; ``strided`` makes both non-contiguous."""
    if layout == "contig" or not shape:
        host = make_input(shape, dtype, domain, g)
        return host, host.to(DEVICE)
    wide = make_input((*shape[:-1], 2 * shape[-1]), dtype, domain, g)
    host, dev = wide[..., ::2], wide.to(DEVICE)[..., ::2]
    assert not dev.is_contiguous() or shape[-1] == 1
    return host, dev


@pytest.mark.parametrize("case, dtype, layout", list(_params()))
def test_op_matches_cpu(case: Case, dtype: torch.dtype, layout: str, assert_same):
    g = torch.Generator().manual_seed(zlib.crc32(case.name.encode()))
    pairs = [pair(shape, dtype, case.domain, layout, g) for shape in case.shapes]
    extra = case.extras(g) if case.extras else ()
    host_args = [h for h, _ in pairs] + list(extra)
    dev_args = [d for _, d in pairs] + [e.to(DEVICE) for e in extra]
    host_before = [a.clone() for a in host_args]
    try:
        want = case.fn(*host_args)
    except Exception as exc:  # noqa: BLE001  (flagos must fail the same way, not silently succeed)
        with pytest.raises(type(exc)) as raised:
            case.fn(*dev_args)
        assert type(raised.value) is type(exc), f"CPU raised {exc!r}, flagos raised {raised.value!r}"
        return
    got = case.fn(*dev_args)
    assert_same(got, want, exact=case.exact, scale=case.scale)
    # out-of-place ops leave their inputs alone
    assert_same(dev_args, host_before, path="inputs after the call")
