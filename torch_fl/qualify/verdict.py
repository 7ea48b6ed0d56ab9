"""Verdicts: how one provider result compares with the native one, and how samples add up per (op, dtype)."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from .._chain import INPUT_CLASSES

PASS = "pass"
WRONG_VALUES = "wrong values"
WRONG_METADATA = "wrong metadata"
CRASH = "crash"
TIMEOUT = "timeout"
UNSUPPORTED = "unsupported"
NO_SAMPLE = "no sample"  # no sample can be made (native refuses every one, or an argument has no plausible value)
UNTESTED = "untested"  # samples ran, but none reached the provider: kept native, as every failure is
# Every failing sample falls in an input class (strided, 0dim, broadcast: torch_fl/_chain.py), and at least
# MIN_SERVED samples outside those classes pass: the provider serves the calls outside them ("pass except strided").
PASS_EXCEPT = "pass except"
# Worst first: an (op, dtype) takes the worst verdict among its samples.
ORDER = (CRASH, TIMEOUT, WRONG_METADATA, WRONG_VALUES, UNSUPPORTED, NO_SAMPLE, UNTESTED, PASS_EXCEPT, PASS)
VERDICTS = ORDER
# The passing samples outside the excepted classes that a "pass except" needs: with fewer, the failures may have
# a cause the classes only happen to cover, so the (op, dtype) keeps its failure.
MIN_SERVED = 3
# The failures an input class may explain: a sample's own outcome. A crash reaches a verdict only as a sample
# that crashed an earlier worker and was skipped by this one (runner.py reruns an operator past its crashes), so
# every other sample of it ran. A hang never does: its worker ends and its operator is not run again.
EXPLAINABLE = (CRASH, WRONG_METADATA, WRONG_VALUES, UNSUPPORTED)


def worst(verdicts: list[str]) -> str:
    return min(verdicts, key=ORDER.index) if verdicts else UNTESTED


def finer(outcomes: list[tuple[str, tuple[str, ...]]], min_served: int = MIN_SERVED) -> tuple[str, tuple[str, ...]]:
    """The verdict of one (op, dtype) from its samples' (verdict, input classes), and the classes it passes
    except: ``(PASS_EXCEPT, ("strided",))`` where every failing sample is strided and at least ``min_served``
    samples that are not all pass. The fewest classes that explain every failure win, then the ones that leave
    the most samples served; with none, the worst verdict and ``()``."""
    verdicts = [v for v, _ in outcomes]
    plain = worst(verdicts)
    if plain == PASS or any(v != PASS and v not in EXPLAINABLE for v in verdicts):
        return plain, ()
    failing = [set(classes) for v, classes in outcomes if v != PASS]
    for size in range(1, len(INPUT_CLASSES) + 1):
        best: tuple[int, tuple[str, ...]] | None = None
        for excepted in combinations(INPUT_CLASSES, size):
            if not all(f & set(excepted) for f in failing):
                continue
            served = sum(1 for _, classes in outcomes if not set(classes) & set(excepted))
            if served >= min_served and (best is None or served > best[0]):
                best = (served, excepted)
        if best is not None:
            return PASS_EXCEPT, best[1]
    return plain, ()


@dataclass(frozen=True)
class Outcome:
    verdict: str
    detail: str = ""
    bitwise: bool = False


def results(op: Any, args: tuple, kwargs: dict, returned: Any) -> list[Any]:
    """What a call produced: its returns, then every argument its schema says it writes (in-place, out=)."""
    written = []
    for i, arg in enumerate(op._schema.arguments):
        if arg.alias_info is not None and arg.alias_info.is_write:
            written.append(kwargs[arg.name] if arg.name in kwargs else args[i] if i < len(args) else None)
    return [*tree_flatten(returned)[0], *tree_flatten(written)[0]]


def host(values: list[Any]) -> list[Any]:
    return [v.detach().to("cpu") if isinstance(v, torch.Tensor) else v for v in values]


def compare(native: list[Any], provider: list[Any], attempt: str = "") -> Outcome:
    """Compare the host copies of a native and a provider result: metadata first, then values (bitwise, else
    within torch.testing's default tolerance for the dtype, the bar OpInfo tests use). ``attempt`` names which
    provider call this was ("replayed call") in a failure's detail."""
    outcome = _compare(native, provider)
    if attempt and outcome.verdict != PASS:
        return Outcome(outcome.verdict, f"{attempt}: {outcome.detail}", outcome.bitwise)
    return outcome


def _compare(native: list[Any], provider: list[Any]) -> Outcome:
    if len(native) != len(provider):
        return Outcome(WRONG_METADATA, f"{len(provider)} results where native gives {len(native)}")
    bitwise = True
    for i, (n, p) in enumerate(zip(native, provider, strict=True)):
        if isinstance(n, torch.Tensor) != isinstance(p, torch.Tensor):
            return Outcome(WRONG_METADATA, f"result {i} is a {type(p).__name__} where native gives {type(n).__name__}")
        if not isinstance(n, torch.Tensor):
            if n != p and not (n != n and p != p):  # NaN equals NaN here
                return Outcome(WRONG_VALUES, f"result {i} is {p!r} where native gives {n!r}")
            continue
        if n.dtype != p.dtype or n.shape != p.shape:
            return Outcome(
                WRONG_METADATA,
                f"result {i} is {str(p.dtype).removeprefix('torch.')}{list(p.shape)} where native gives "
                f"{str(n.dtype).removeprefix('torch.')}{list(n.shape)}",
            )
        if n.numel() == 0:
            continue
        if torch.equal(n, p) or (
            n.is_floating_point() and torch.equal(n.isnan(), p.isnan()) and torch.equal(n.nan_to_num(), p.nan_to_num())
        ):
            continue
        bitwise = False
        try:
            torch.testing.assert_close(p, n, equal_nan=True, check_stride=False)
        except AssertionError:
            diff = (p.double() - n.double()).abs().nan_to_num(nan=float("inf"))
            worst_at = int(diff.argmax())
            return Outcome(
                WRONG_VALUES,
                f"result {i} differs beyond torch's tolerance for {str(n.dtype).removeprefix('torch.')}: max abs "
                f"diff {float(diff.max()):.4g} at flat index {worst_at} "
                f"(provider {p.flatten()[worst_at].item()!r}, native {n.flatten()[worst_at].item()!r})",
            )
    return Outcome(PASS, "bitwise" if bitwise else "within tolerance", bitwise)


def classify_error(exc: BaseException, attempt: str = "") -> Outcome:
    """A provider call that raised: the router's result check (wrong metadata), a device fault (crash, and the
    process is unusable after it), or any other refusal (unsupported)."""
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    first = (f"{attempt}: " if attempt else "") + (text[0] if text else type(exc).__name__)
    message = str(exc)
    if "returned a wrong result" in message:
        return Outcome(WRONG_METADATA, first)
    if is_device_fault(message):
        return Outcome(CRASH, first)
    return Outcome(UNSUPPORTED, first)


def is_device_fault(message: str) -> bool:
    lowered = message.lower()
    return any(
        s in lowered
        for s in (
            "illegal memory access",
            "cuda error",
            "hip error",
            "triton error",
            "device-side assert",
            "unspecified launch failure",
            "misaligned address",
        )
    )
