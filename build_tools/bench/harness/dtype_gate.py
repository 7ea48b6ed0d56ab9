"""The router's cost of a list on a provider route (the dtype gate), in one process on the emulation.

    python -m harness.dtype_gate [--rounds 40] [--calls 400] [--threads 1]

A route with a dtype list (``frac = bench[float32, bfloat16], native``) makes the router read each call's dtype
and test it against the route's mask. Each pair of arms times one call on a small float32 tensor, with its A/A
control, the route switched between turns (outside the timed calls):

- served: ``frac``'s provider route with a list that holds float32 against the same route without a list; the
  gate passes the call to the provider (a Python kernel, as every provider is on the emulation).
- left out: ``frac``'s provider route with a list that leaves float32 out against the native route itself; the
  gate sends the call to native. ``frac`` has no unboxed entry, so both arms take the boxed router: the
  difference is the gate's.
- left out, fast-path op: the same for ``neg``, whose native route has an unboxed entry (fast_kernel.h). A route
  that is not native, gated or not, takes the boxed router, so its left-out dtypes pay the boxed router's cost
  over the fast path's as well as the gate's.

A list may also name input requirements (``bench[float32, contiguous, no_0dim, same_shape, same_dtype]``): the
gate then reads every tensor argument's contiguity, rank, shape and dtype. Two more pairs, on ``atan2`` (two tensor
arguments, no unboxed entry) of float32[16] tensors:

- served, requirements: the list with all four requirements against the same list without them; the call meets
  them, so both reach the provider and the difference is the requirements' scan.
- refused, strided: its first argument a strided view; the list ``bench[float32, contiguous]`` against the
  native route itself: the cost a call that a requirement sends native pays over native.

Every arm's table also routes another operator (``sign``) to cpu: a table with no per-op route skips the router's
lookup, which real confs (hundreds of lines) never do, and which would otherwise count as the gate's cost.

The arms take turns of --calls calls, the order rotated per round; each figure is the median over the rounds of
a per-round ratio, with the A/A (the reference arm timed twice) and the spread (min-max over the rounds) beside it.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

from . import command_line

PROVIDER = "bench"
REQUIRED = "bench[float32, contiguous, no_0dim, same_shape, same_dtype], native"
PAIRS = {  # name -> (op, {arm: its chain})
    "served": ("frac", {"gated": "bench[float32, bfloat16], native", "ungated": "bench, native"}),
    "left out": ("frac", {"gated": "bench[bfloat16], native", "ungated": "native"}),
    "left out, fast-path op": ("neg", {"gated": "bench[bfloat16], native", "ungated": "native"}),
    "served, requirements": ("atan2", {"gated": REQUIRED, "ungated": "bench[float32], native"}),
    "refused, strided": ("atan2", {"gated": "bench[float32, contiguous], native", "ungated": "native"}),
}


def _per_call_us(call: Any, n: int) -> float:
    started = time.perf_counter_ns()
    for _ in range(n):
        call()
    return (time.perf_counter_ns() - started) / n / 1e3


def measure(rounds: int, calls: int) -> dict[str, dict[str, Any]]:
    import torch

    import torch_fl

    kernels = {"frac": torch.frac, "neg": torch.neg, "atan2": torch.atan2}
    torch_fl.register_provider(PROVIDER, kernels, version="bench")
    x, y = torch.randn(16).to("flagos"), torch.randn(16).to("flagos")
    strided = torch.randn(32).to("flagos")[::2]
    os.environ["FLAGOS_OP_sign"] = "cpu"
    calls_of = {
        "served": lambda: torch.frac(x),
        "left out": lambda: torch.frac(x),
        "left out, fast-path op": lambda: torch.neg(x),
        "served, requirements": lambda: torch.atan2(x, y),
        "refused, strided": lambda: torch.atan2(strided, y),
    }
    out = {}
    for pair, (op, chains) in PAIRS.items():
        arms = {**chains, "ungated again": chains["ungated"]}
        order = list(arms)
        call = calls_of[pair]

        def route(chain: str, op: str = op) -> None:
            os.environ[f"FLAGOS_OP_{op}"] = chain
            torch_fl.reload_routes()

        for chain in arms.values():  # warm: the provider's kernel registration and first-call caches
            route(chain)
            _per_call_us(call, 50)
        per_round = []
        for r in range(rounds):
            k = r % len(order)
            turn = {}
            for arm in order[k:] + order[:k]:
                route(arms[arm])
                call()
                turn[arm] = _per_call_us(call, calls)
            per_round.append(turn)
        ratios = [t["gated"] / t["ungated"] for t in per_round]
        aa = [t["ungated again"] / t["ungated"] for t in per_round]
        out[pair] = {
            "us": {a: statistics.median(t[a] for t in per_round) for a in order},
            "ratio": statistics.median(ratios),
            "ratio_spread": (min(ratios), max(ratios)),
            "aa": statistics.median(aa),
            "aa_spread": (min(aa), max(aa)),
            "delta_us": statistics.median(t["gated"] - t["ungated"] for t in per_round),
        }
        os.environ.pop(f"FLAGOS_OP_{op}", None)
    os.environ.pop("FLAGOS_OP_sign", None)
    torch_fl.reload_routes()
    return out


def table(results: dict[str, dict[str, Any]]) -> str:
    head = (
        f"{'float32[16]':24s} {'ungated µs':>10s} {'gated µs':>9s} {'+µs':>6s} {'gated/ungated':>14s} "
        f"{'min-max':>13s} {'A/A':>6s} {'A/A min-max':>13s}"
    )
    lines = [head]
    for pair, r in results.items():
        lo, hi = r["ratio_spread"]
        alo, ahi = r["aa_spread"]
        lines.append(
            f"{pair:24s} {r['us']['ungated']:10.2f} {r['us']['gated']:9.2f} {r['delta_us']:6.2f} "
            f"{r['ratio']:14.3f} {lo:6.3f}-{hi:6.3f} {r['aa']:6.3f} {alo:6.3f}-{ahi:6.3f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = command_line.in_process_pairs("dtype_gate", __doc__, rounds=40, calls=400).parse_args(argv)
    threads = command_line.apply_threads(args)
    print(f"dtype gate: {args.rounds} rounds of {args.calls} calls per arm, {threads} threads")
    print(table(measure(args.rounds, args.calls)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
