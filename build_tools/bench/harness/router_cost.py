"""The router's host cost per call of single ops, backward ones beside forward ones, in one process (issue 52).

    python -m harness.router_cost [--rounds 30] [--calls 200] [--ops all] [--threads N]

A profile of ResNet-50 on the H100 showed flagos' backward ops costing far more host time per call than cuda's
(convolution_backward_overrideable 181 µs against convolution_backward's 46 µs). This times the same ops in one
process on small tensors, where the kernel is short and the router's own cost shows: each op called on flagos
tensors (flagos), directly on the vendor's tensors (plain) and directly again (plain again: the A/A control). The
arms take turns of --calls calls, the order rotated per round, over --rounds rounds; the figures are the medians
over the rounds of the µs per call, flagos minus plain (the router's cost) and the ratios. After the timing, one
counted pass (torch_fl._core.set_router_counters) splits flagos' host ns per call into the router's phases:
arguments re-tagged, kernel, results re-tagged, release. Python's call overhead is in every arm alike.

Then the same three arms time a small training step (four 1x1 convolutions with batch norm and ReLU), its forward
and its backward apart: a backward op runs on the autograd engine's flagos device thread, where a host op runs on
the caller's, so the step shows what the engine adds per backward node beside the router's own cost. Beside the
emulation the plain device is the host, so every arm shares one process. On a GPU node (FLAGOS_ACCELERATOR=cuda)
plain is cuda in the flagos process: single ops need no autograd, so their rows hold (the node's routercost mode),
but the step's backward would need plain cuda's autograd, which a process that loaded torch_fl cannot run
(docs/bench.md), so --steps is refused there.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from . import arms as arms_
from . import command_line, decode_ops

OPS = (
    "convolution_overrideable",
    "convolution_backward_overrideable",
    "relu",
    "threshold_backward",
    "native_batch_norm",
    "native_batch_norm_backward",
    "empty",
    "_foreach_add_",
)


def _cases(torch: Any) -> dict[str, Callable[[str], Callable[[], Any]]]:
    """Per op: given a device, the call to time (its arguments built once, on that device). On flagos the
    overrideable hooks are what autograd calls; on the vendor device their ordinary op is."""
    aten = torch.ops.aten
    g = torch.Generator().manual_seed(0)

    def t(*shape: int) -> Any:
        return torch.randn(*shape, generator=g)

    # the host's convolution kernels are slow beside the router: a 1x1 one on 2x2 pixels keeps them short
    x, w, gy = t(1, 2, 2, 2), t(2, 2, 1, 1), t(1, 2, 2, 2)
    c = [t(2), t(2), t(2).abs() + 0.5, t(2), t(2).abs() + 0.5]  # weight, mean, var, save_mean, save_invstd
    lists = [t(16) for _ in range(8)], [t(16) for _ in range(8)]
    conv = dict(stride=[1, 1], padding=[0, 0], dilation=[1, 1], transposed=False, output_padding=[0, 0], groups=1)
    s, p, d, tr, op, gr = conv.values()

    def on(dev: str) -> tuple[Any, ...]:
        return tuple(v.to(dev) for v in (x, w, gy, *c))

    def conv_fwd(dev: str) -> Callable[[], Any]:
        xx, ww, *_ = on(dev)
        fn = aten.convolution_overrideable if dev == "flagos" else aten.convolution
        return lambda: fn(xx, ww, None, s, p, d, tr, op, gr)

    def conv_bwd(dev: str) -> Callable[[], Any]:
        xx, ww, gg, *_ = on(dev)
        if dev == "flagos":
            return lambda: aten.convolution_backward_overrideable(gg, xx, ww, s, p, d, tr, op, gr, [True, True, False])
        return lambda: aten.convolution_backward(gg, xx, ww, None, s, p, d, tr, op, gr, [True, True, False])

    def relu(dev: str) -> Callable[[], Any]:
        xx = x.to(dev)
        return lambda: aten.relu(xx)

    def thr_bwd(dev: str) -> Callable[[], Any]:
        xx, _, gg, *_ = on(dev)
        return lambda: aten.threshold_backward(gg, xx, 0.0)

    def bn(dev: str) -> Callable[[], Any]:
        xx, _, _, wt, mean, var, _, _ = on(dev)
        return lambda: aten.native_batch_norm(xx, wt, None, mean.clone(), var.clone(), True, 0.1, 1e-5)

    def bn_bwd(dev: str) -> Callable[[], Any]:
        xx, _, gg, wt, mean, var, sm, si = on(dev)
        mask = [True, True, True]
        return lambda: aten.native_batch_norm_backward(gg, xx, wt, mean, var, sm, si, True, 1e-5, mask)

    def empty(dev: str) -> Callable[[], Any]:
        device = torch.device(dev)
        return lambda: aten.empty.memory_format([2, 4, 8, 8], dtype=torch.float32, device=device)

    def foreach(dev: str) -> Callable[[], Any]:
        a, b = [v.to(dev) for v in lists[0]], [v.to(dev) for v in lists[1]]
        return lambda: aten._foreach_add_.List(a, b)

    return dict(zip(OPS, (conv_fwd, conv_bwd, relu, thr_bwd, bn, bn_bwd, empty, foreach), strict=True))


def _quartiles(values: list[float]) -> tuple[float, float, float]:
    """(first quartile, median, third quartile); a single value is all three."""
    if len(values) < 2:
        return (values[0],) * 3
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def _per_call_us(call: Callable[[], Any], n: int) -> float:
    started = time.perf_counter_ns()
    for _ in range(n):
        call()
    return (time.perf_counter_ns() - started) / n / 1e3


def _rotated(arms: dict[str, Callable[[], Any]], rounds: int, calls: int) -> list[dict[str, float]]:
    """µs per call of each arm, per round: turns of ``calls`` calls, the arms' order rotated every round."""
    per_round = []
    order = list(arms)
    for r in range(rounds):
        k = r % len(order)
        per_round.append({a: _per_call_us(arms[a], calls) for a in order[k:] + order[:k]})
    return per_round


def measure(ops: list[str], rounds: int, calls: int) -> list[dict[str, Any]]:
    import torch

    import torch_fl

    vendor = arms_.devices()[1]
    cases = {**_cases(torch), **decode_ops.cases(torch)}
    out = []
    for name in ops:
        arms = {"flagos": cases[name]("flagos"), "plain": cases[name](vendor), "plain-again": cases[name](vendor)}
        for call in arms.values():  # warm: first-call caches (schemas, kernels, the alias pool) filled
            _per_call_us(call, 20)
        per_round = _rotated(arms, rounds, calls)
        torch_fl._core.reset_router_counters()
        torch_fl._core.set_router_counters(True)
        try:
            _per_call_us(arms["flagos"], calls)
        finally:
            torch_fl._core.set_router_counters(False)
        rows = [r for r in torch_fl._core.router_counters() if r[2] >= calls]
        med = {a: statistics.median(r[a] for r in per_round) for a in arms}
        out.append(
            {
                "op": name,
                "us": med,
                "overhead_us": statistics.median(r["flagos"] - r["plain"] for r in per_round),
                "ratio": statistics.median(r["flagos"] / r["plain"] for r in per_round),
                "ratio_q": _quartiles([r["flagos"] / r["plain"] for r in per_round]),
                "aa": statistics.median(r["plain-again"] / r["plain"] for r in per_round),
                "aa_q": _quartiles([r["plain-again"] / r["plain"] for r in per_round]),
                "router": [
                    {"op": op, "path": path, "us": [v / calls_ / 1e3 for v in ns]} for op, path, calls_, ns in rows
                ],
            }
        )
    return out


def _net(torch: Any, dev: str) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """A small step's forward (returning the loss) and, given it, its backward."""
    torch.manual_seed(0)
    layers = []
    for _ in range(4):
        layers += [torch.nn.Conv2d(4, 4, 1, bias=False), torch.nn.BatchNorm2d(4), torch.nn.ReLU()]
    model, x = torch.nn.Sequential(*layers).to(dev), torch.randn(2, 4, 4, 4).to(dev)
    return (lambda: model(x).sum()), (lambda: model(x).sum().backward())


def measure_step(rounds: int, steps: int) -> dict[str, Any]:
    """Per arm the µs of the forward alone and of forward plus backward; the backward is their difference."""
    import torch

    vendor = arms_.devices()[1]
    nets = {a: _net(torch, d) for a, d in (("flagos", "flagos"), ("plain", vendor), ("plain-again", vendor))}
    for _, step in nets.values():
        _per_call_us(step, 10)
    per_round = []
    order = list(nets)
    for r in range(rounds):
        k = r % len(order)
        per_round.append(
            {a: (_per_call_us(nets[a][0], steps), _per_call_us(nets[a][1], steps)) for a in order[k:] + order[:k]}
        )
    out: dict[str, Any] = {}
    for part, of in (("forward", lambda f, s: f), ("backward", lambda f, s: s - f), ("step", lambda f, s: s)):
        us = {a: statistics.median(of(*r[a]) for r in per_round) for a in nets}
        out[part] = {
            "us": us,
            "ratio": statistics.median(of(*r["flagos"]) / of(*r["plain"]) for r in per_round),
            "aa": statistics.median(of(*r["plain-again"]) / of(*r["plain"]) for r in per_round),
        }
    return out


def step_table(step: dict[str, Any]) -> str:
    lines = [f"{'small training step':36s} {'plain µs':>9s} {'flagos µs':>9s} {'+µs':>7s} {'ratio':>6s} {'A/A':>6s}"]
    for part, r in step.items():
        us = r["us"]
        lines.append(
            f"{part:36s} {us['plain']:9.1f} {us['flagos']:9.1f} {us['flagos'] - us['plain']:7.1f} "
            f"{r['ratio']:6.2f} {r['aa']:6.3f}"
        )
    return "\n".join(lines)


def table(results: list[dict[str, Any]]) -> str:
    head = (
        f"{'op':36s} {'plain µs':>9s} {'flagos µs':>9s} {'+µs':>7s} {'ratio':>6s} {'ratio q1-q3':>11s} "
        f"{'A/A':>6s} {'A/A q1-q3':>11s}  router phases µs"
    )
    lines = [head + " (op path: arguments kernel results release)"]
    for r in results:
        phases = "; ".join(f"{x['op']} {x['path']}: " + " ".join(f"{v:.1f}" for v in x["us"]) for x in r["router"])
        rq, aq = r["ratio_q"], r["aa_q"]
        lines.append(
            f"{r['op']:36s} {r['us']['plain']:9.2f} {r['us']['flagos']:9.2f} {r['overhead_us']:7.2f} "
            f"{r['ratio']:6.2f} {rq[0]:5.2f}-{rq[2]:5.2f} {r['aa']:6.3f} {aq[0]:5.2f}-{aq[2]:5.2f}  {phases}"
        )
    return "\n".join(lines)


def measure_decode(rounds: int, steps: int, layers: int = 2) -> dict[str, Any]:
    """One token of the tiny decoder (decode_ops.py) per call, in the three arms: µs per token, the ratio and the
    A/A with their quartiles over the rounds, and how many router calls a token makes on flagos (counted)."""
    import torch

    import torch_fl

    vendor = arms_.devices()[1]
    arms = {
        a: decode_ops.decoder(torch, d, layers)
        for a, d in (("flagos", "flagos"), ("plain", vendor), ("plain-again", vendor))
    }
    tokens = {a: int(m.step().item()) for a, m in arms.items()}
    assert len(set(tokens.values())) == 1, f"the arms decode different tokens: {tokens}"
    calls = {a: m.step for a, m in arms.items()}
    for call in calls.values():
        _per_call_us(call, 5)
    with torch.no_grad():
        per_round = _rotated(calls, rounds, steps)
    torch_fl._core.reset_router_counters()
    torch_fl._core.set_router_counters(True)
    try:
        with torch.no_grad():
            calls["flagos"]()
    finally:
        torch_fl._core.set_router_counters(False)
    counted = torch_fl._core.router_counters()
    return {
        "layers": layers,
        "us": {a: statistics.median(r[a] for r in per_round) for a in calls},
        "overhead_us": statistics.median(r["flagos"] - r["plain"] for r in per_round),
        "ratio": statistics.median(r["flagos"] / r["plain"] for r in per_round),
        "ratio_q": _quartiles([r["flagos"] / r["plain"] for r in per_round]),
        "aa": statistics.median(r["plain-again"] / r["plain"] for r in per_round),
        "aa_q": _quartiles([r["plain-again"] / r["plain"] for r in per_round]),
        "router_calls": sum(c for _, _, c, _ in counted),
        "router_paths": {path: sum(c for _, p, c, _ in counted if p == path) for path in {p for _, p, _, _ in counted}},
    }


def decode_table(d: dict[str, Any]) -> str:
    us, rq, aq = d["us"], d["ratio_q"], d["aa_q"]
    paths = ", ".join(f"{p} {n}" for p, n in sorted(d["router_paths"].items()))
    return "\n".join(
        [
            f"{'tiny decode token':36s} {'plain µs':>9s} {'flagos µs':>9s} {'+µs':>7s} {'ratio':>6s} "
            f"{'ratio q1-q3':>11s} {'A/A':>6s} {'A/A q1-q3':>11s}  routed calls per token",
            f"{str(d['layers']) + ' layers':36s} {us['plain']:9.1f} {us['flagos']:9.1f} {d['overhead_us']:7.1f} "
            f"{d['ratio']:6.3f} {rq[0]:5.2f}-{rq[2]:5.2f} {d['aa']:6.3f} {aq[0]:5.2f}-{aq[2]:5.2f}  "
            f"{d['router_calls']} ({paths})",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    p = command_line.in_process_pairs("router_cost", __doc__, rounds=30, calls=200)
    p.add_argument(
        "--ops",
        default="all",
        help=f"all, none, decode (a decode step's op mix: {', '.join(decode_ops.DECODE_OPS)}) or some of "
        f"{', '.join(OPS)} and those",
    )
    p.add_argument("--steps", type=int, default=20, help="small training steps per turn (0: no step)")
    p.add_argument("--decode", type=int, default=0, help="tiny decoder tokens per turn (0: no decode step)")
    p.add_argument("--layers", type=int, default=2, help="the tiny decoder's layers (default 2)")
    args = p.parse_args(argv)
    if args.steps and arms_.devices()[1] != "cpu":
        p.error(
            "--steps runs a training step's backward on plain cuda, which a process that loaded torch_fl cannot run; "
            "pass --steps 0 on a GPU node (the single ops and --decode need no autograd)"
        )
    threads = command_line.apply_threads(args)
    ops = {"all": list(OPS), "none": [], "decode": list(decode_ops.DECODE_OPS)}.get(args.ops, args.ops.split(","))
    print(f"router cost: {args.rounds} rounds of {args.calls} calls per arm, {threads} intra-op threads")
    if ops:
        print(table(measure(ops, args.rounds, args.calls)))
    if args.decode:
        print(decode_table(measure_decode(args.rounds, args.decode, args.layers)))
    if args.steps:
        print(step_table(measure_step(args.rounds, args.steps)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
