"""Random operators, judged by the distribution of their values rather than the values themselves.

An operator is random when torch tags it ``nondeterministic_seeded`` (``bernoulli_``, ``normal_``, ``uniform_``,
``native_dropout``, ``randn_like``, ``exponential_``, the attention kernels with dropout ...) and native's results
for one sample differ between two seeds; a tagged operator whose results agree (attention without dropout) is
compared by value like any other. For a random one, native and the provider each draw, under seeds of their own,
until ``MIN_VALUES`` values per result (at most ``MAX_CALLS`` calls), and then:

- the metadata of every provider result equals native's exactly: dtype, shape, strides, device;
- every provider result keeps the operator's fixed points (``FIXED_POINTS``): dropout's output is its input
  times its mask times 1/(1-p), uniform values lie in [from, to], bernoulli's are 0 or 1, exponential's are not
  negative, randperm's are a permutation;
- each result's values pass a two-sample Kolmogorov–Smirnov test against native's at level ``ALPHA``.

scipy is not in the test images, so the statistic and its asymptotic p-value are computed here with torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from .verdict import PASS, WRONG_METADATA, WRONG_VALUES, Outcome

MIN_VALUES = 4096  # values of each result per side: a shift of a tenth of a standard deviation is seen
MAX_CALLS = 64
ALPHA = 1e-3  # the KS p-value below which the provider's distribution differs from native's
SEEDS = (20261206, 7)  # native's and the provider's: independent draws, the same ones on every run

Meta = tuple[str, tuple[int, ...], tuple[int, ...], str]  # dtype, shape, strides, device type


def tagged(func: Any) -> bool:
    return torch.Tag.nondeterministic_seeded in getattr(func, "tags", ())


def meta(values: list[Any]) -> list[Meta | None]:
    """What a call's results are, read before they leave the device."""
    return [
        (str(v.dtype).removeprefix("torch."), tuple(v.shape), tuple(v.stride()), v.device.type)
        if isinstance(v, torch.Tensor)
        else None
        for v in values
    ]


Draw = tuple[list[Meta | None], list[Any]]  # (metadata, host values) of one call's results
Call = Callable[[], Draw]


def calls_for(first: Draw) -> int:
    """How many calls give every tensor result ``MIN_VALUES`` values, at most ``MAX_CALLS``, after ``first``."""
    per_call = min((v.numel() for v in first[1] if isinstance(v, torch.Tensor)), default=0)
    return MAX_CALLS if per_call == 0 else min(MAX_CALLS, math.ceil(MIN_VALUES / per_call))


def draw(call: Call, seed: int, first: Call | None = None) -> list[Draw]:
    """Calls of ``call`` under ``seed`` until every tensor result has ``MIN_VALUES`` values (``calls_for``); the
    first one through ``first`` where given (the worker times it as tuning)."""
    torch.manual_seed(seed)
    out = [(first or call)()]
    return out + [call() for _ in range(calls_for(out[0]) - 1)]


def differs(a: Draw, b: Draw) -> bool:
    """Whether two draws' values differ: native under two seeds, for a tagged operator."""
    for x, y in zip(a[1], b[1], strict=True):
        if isinstance(x, torch.Tensor):
            if x.shape != y.shape or not torch.equal(x.nan_to_num(), y.nan_to_num()):
                return True
        elif x != y:
            return True
    return False


def ks_2samp(a: torch.Tensor, b: torch.Tensor) -> tuple[float, float]:
    """The two-sample Kolmogorov–Smirnov statistic D of two 1-d samples and its asymptotic p-value (Stephens'
    small-sample correction). Ties count as in the empirical distribution functions, evaluated at every value."""
    a, b = a.double().sort().values, b.double().sort().values
    n, m = a.numel(), b.numel()
    both = torch.cat([a, b])
    gap = torch.searchsorted(a, both, right=True) / n - torch.searchsorted(b, both, right=True) / m
    d = float(gap.abs().max())
    root = math.sqrt(n * m / (n + m))
    lam = (root + 0.12 + 0.11 / root) * d
    if lam < 0.2:  # the series converges slowly near 0, where the p-value is 1 to many digits
        return d, 1.0
    p = 2 * sum((-1) ** (j - 1) * math.exp(-2 * j * j * lam * lam) for j in range(1, 101))
    return d, min(1.0, max(0.0, p))


def _base(op: str) -> str:
    return op.partition(".")[0].rstrip("_")


def _argument(sample: Any, func: Any, name: str, default: Any) -> Any:
    for i, arg in enumerate(func._schema.arguments):
        if arg.name == name:
            if name in sample.kwargs:
                return sample.kwargs[name]
            return sample.args[i] if i < len(sample.args) else default
    return default


def _dropout(sample: Any, func: Any, values: list[Any]) -> str | None:
    p, train = float(_argument(sample, func, "p", 0.5)), _argument(sample, func, "train", True)
    if not train or not 0 < p < 1 or len(values) < 2:
        return None
    out, mask = values[0], values[1]
    if mask.dtype != torch.bool:
        return f"the mask is {mask.dtype}, not bool"
    expected = (sample.args[0].double() * mask * (1 / (1 - p))).to(out.dtype)
    try:
        torch.testing.assert_close(out, expected, equal_nan=True)
    except AssertionError:
        return "the output is not its input times its mask times 1/(1-p)"
    return None


def _within(low: float, high: float) -> Callable[[Any, Any, list[Any]], str | None]:
    def check(sample: Any, func: Any, values: list[Any]) -> str | None:
        lo = float(_argument(sample, func, "from", low))
        hi = float(_argument(sample, func, "to", high))
        v = values[0].double()
        if v.numel() and (v.min() < lo or v.max() > hi):
            return f"values from {float(v.min()):.4g} to {float(v.max()):.4g}, outside [{lo:g}, {hi:g}]"
        return None

    return check


def _binary(sample: Any, func: Any, values: list[Any]) -> str | None:
    v = values[0]
    if v.numel() and not bool(((v == 0) | (v == 1)).all()):
        return "values other than 0 and 1"
    return None


def _permutation(sample: Any, func: Any, values: list[Any]) -> str | None:
    v = values[0]
    if not torch.equal(v.sort().values, torch.arange(v.numel(), dtype=v.dtype)):
        return "not a permutation of 0..n-1"
    return None


FIXED_POINTS: dict[str, Callable[[Any, Any, list[Any]], str | None]] = {
    "native_dropout": _dropout,
    "uniform": _within(0.0, 1.0),
    "bernoulli": _binary,
    "exponential": _within(0.0, math.inf),
    "randperm": _permutation,
}


def judge(sample: Any, func: Any, native: list[Draw], provider: list[Draw]) -> Outcome:
    """The verdict of a random operator's sample from native's draws and the provider's."""
    want = native[0][0]
    fixed = FIXED_POINTS.get(_base(sample.op))
    for k, (got, values) in enumerate(provider):
        if got != want:
            what = "(dtype, shape, strides, device)"
            return Outcome(WRONG_METADATA, f"call {k + 1}: results {got} where native gives {want} {what}")
        why = fixed(sample, func, values) if fixed else None
        if why:
            return Outcome(WRONG_VALUES, f"call {k + 1}: {why}")
    for i, kind in enumerate(want):
        if kind is None:
            continue
        a = torch.cat([d[1][i].flatten().double() for d in native])
        b = torch.cat([d[1][i].flatten().double() for d in provider])
        a, b = a[a.isfinite()], b[b.isfinite()]
        if not a.numel() or not b.numel():
            continue
        d, p = ks_2samp(a, b)
        if p < ALPHA:
            return Outcome(
                WRONG_VALUES,
                f"result {i}: its distribution differs from native's (Kolmogorov–Smirnov D={d:.3g}, p={p:.3g} < "
                f"{ALPHA:g}; {b.numel()} values, mean {float(b.mean()):.4g} where native's {a.numel()} have "
                f"{float(a.mean()):.4g})",
            )
    return Outcome(PASS, "same distribution as native's", False)
