"""Where a flagos training step spends host time, op by op, with no process noise: the step's own op stream,
replayed in one process on flagos tensors and on plain vendor tensors.

  python step_ops.py [--d-model 256,1024] [--rounds 8] [--top 30]

One eager step of the benchmark's model (build_step of build_tools/bench/harness/workloads.py: a 2-layer
TransformerEncoder, forward, backward and AdamW) runs on flagos under a TorchDispatchMode that records every ATen
call it makes: the forward, the backward kernels (the mode reaches autograd's threads) and the optimizer's list
ops, about 340 calls. The replay then calls the same ops with the same arguments, under no_grad and without
the autograd engine:

- ``flagos``: on the step's own flagos tensors;
- ``flagos, reuse off``: the same, with vendor aliases built anew on every call (torch_fl._core.set_alias_reuse);
- ``plain``: on plain vendor tensors (cuda on a GPU, cpu under the emulation) made from the flagos ones storage by
  storage, so views still share memory and every argument has the layout the step gave it;
- ``flagos, compact``: on flagos copies made the same way. The step's own tensors were made among everything else
  a step allocates, the copies one after another, and that alone moves µs-scale host times (ops that never reach
  torch_fl, views and ``detach``, came out dearer on the step's own tensors); this arm and ``plain`` differ in
  the device alone.

Plain vendor tensors never reach torch_fl, so one process holds all four arms: PyTorch's one-accelerator rule
only concerns autograd, which the replay does not run. Each round replays the stream 3 times per arm, the arm
order rotated; each call is timed on the host (no synchronisation inside a replay, one after it). A row is an op
name: its calls per step and the sum of its per-call medians per arm; the differences are flagos' host overhead
for that op in the step's real sequence (cold caches, real sizes), which hot loops of one small op underrate.
The first line per d_model gives the whole stream's host time per arm and the medians of flagos - plain and
flagos compact - plain per replay. Kernels run on the vendor device as usual; their values are whatever the
replayed in-place ops leave.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import time
from typing import Any

import neighbours

neighbours.reach("harness")
from harness import workloads  # noqa: E402  (the benchmark's step model; it imports no torch)


def record_step(torch: Any, d_model: int) -> list[tuple[Any, tuple, dict]]:
    from torch.utils._python_dispatch import TorchDispatchMode

    step = workloads.build_step(torch.device("flagos"), d_model)
    for _ in range(3):  # the optimizer's state exists from here on, as in a long run
        step()
    calls: list[tuple[Any, tuple, dict]] = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            kwargs = kwargs or {}
            calls.append((func, args, kwargs))
            return func(*args, **kwargs)

    with Record():
        step()
    torch.flagos.synchronize()
    return calls


def copied(torch: Any, calls: list[tuple[Any, tuple, dict]], device: str) -> list[tuple[Any, tuple, dict]]:
    """The calls with every flagos tensor replaced by one on `device` (a plain vendor device, or flagos again)
    over a copy of its storage (one per storage), the copies made one after another."""
    from torch.utils._pytree import tree_map

    storages: dict[tuple[int, int], Any] = {}
    tensors: dict[int, Any] = {}

    def convert(x: Any) -> Any:
        if isinstance(x, torch.device) and x.type == "flagos":
            return torch.device(device, x.index or 0)
        if not isinstance(x, torch.Tensor) or x.device.type != "flagos":
            return x
        if id(x) in tensors:
            return tensors[id(x)]
        storage = x.untyped_storage()
        key = (storage.data_ptr(), storage.nbytes())
        if key not in storages:
            raw = torch.empty(0, dtype=torch.uint8, device=x.device).set_(storage)
            storages[key] = raw.cpu().to(device).untyped_storage()
        t = torch.empty(0, dtype=x.dtype, device=device).set_(storages[key], x.storage_offset(), x.size(), x.stride())
        try:
            leaf = x.requires_grad and x.is_leaf
        except RuntimeError:  # a view autograd will not describe (made under no_grad, its base changed since)
            leaf = False
        if leaf:
            t.requires_grad_(True)
        tensors[id(x)] = t
        return t

    return [(func, tree_map(convert, args), tree_map(convert, kwargs)) for func, args, kwargs in calls]


def as_plain(torch: Any, calls: list[tuple[Any, tuple, dict]], plain: str) -> list[tuple[Any, tuple, dict]]:
    """The calls a plain device makes where flagos makes others: flagos reaches the vendor's flash attention
    through torch's overrideable hook (csrc/dispatch/attention_overrideable.cpp), which has no kernel for a plain
    device, and the plain device calls its flash kernel by name."""
    aten = torch.ops.aten
    hook, hook_backward = (
        aten._scaled_dot_product_fused_attention_overrideable.default,
        aten._scaled_dot_product_fused_attention_overrideable_backward.default,
    )
    out = []
    for func, args, kwargs in calls:
        if func is hook:
            q, k, v, bias, dropout, causal, debug = (list(args) + [None, 0.0, False, False])[:7]
            if plain == "cpu":
                func, args = aten._scaled_dot_product_flash_attention_for_cpu.default, (q, k, v, dropout, causal)
                kwargs = {"attn_mask": bias, "scale": kwargs.get("scale")}
            else:
                func, args = aten._scaled_dot_product_flash_attention.default, (q, k, v, dropout, causal, debug)
                kwargs = {"scale": kwargs.get("scale")}
        elif func is hook_backward:
            (grad, q, k, v, bias, _mask, o, lse, cum_q, cum_k, max_q, max_k, dropout, causal, seed, offset) = args
            if plain == "cpu":
                func = aten._scaled_dot_product_flash_attention_for_cpu_backward.default
                args = (grad, q, k, v, o, lse, dropout, causal)
                kwargs = {"attn_mask": bias, "scale": kwargs.get("scale")}
            else:
                func = aten._scaled_dot_product_flash_attention_backward.default
                args = (grad, q, k, v, o, lse, cum_q, cum_k, max_q, max_k, dropout, causal, seed, offset)
                kwargs = {"scale": kwargs.get("scale")}
        out.append((func, args, kwargs))
    return out


def measure(d_model: int, rounds: int, top: int, counted: int = 0) -> None:
    import torch

    import torch_fl

    plain = "cuda" if torch_fl.accelerator() in ("cuda", "dcu") else "cpu"
    sync = torch.cuda.synchronize if plain == "cuda" else (lambda: None)
    calls = record_step(torch, d_model)
    # the plain copies and the compact flagos ones are made alike, storage after storage, so they lie alike
    arms = {
        "flagos": calls,
        "flagos, reuse off": calls,
        "plain": as_plain(torch, copied(torch, calls, plain), plain),
        "flagos, compact": copied(torch, calls, "flagos"),
    }

    def replay(arm: str) -> list[float]:
        torch_fl._core.set_alias_reuse(arm != "flagos, reuse off")
        out = [0.0] * len(calls)
        with torch.no_grad():
            for i, (func, args, kwargs) in enumerate(arms[arm]):
                start = time.perf_counter()
                func(*args, **kwargs)
                out[i] = time.perf_counter() - start
        sync()
        return out

    try:
        for arm in arms:
            replay(arm)  # warm-up
        times: dict[str, list[list[float]]] = {arm: [] for arm in arms}
        order = list(arms)
        for r in range(rounds):
            for arm in order[r % len(order) :] + order[: r % len(order)]:
                times[arm] += [replay(arm) for _ in range(3)]
    finally:
        torch_fl._core.set_alias_reuse(True)
    median = {arm: [statistics.median(t[i] for t in times[arm]) * 1e6 for i in range(len(calls))] for arm in arms}
    total = {arm: [sum(t) * 1e6 for t in times[arm]] for arm in arms}

    def gap(arm: str) -> float:
        return statistics.median(f - p for f, p in zip(total[arm], total["plain"], strict=True))

    print(
        f"d_model {d_model}: {len(calls)} ATen calls per step, plain device {plain}; whole stream, host µs per "
        f"replay (median of {len(times['plain'])}): "
        + ", ".join(f"{arm} {statistics.median(t):.0f}" for arm, t in total.items())
        + f"; flagos - plain {gap('flagos'):+.0f}, flagos compact - plain {gap('flagos, compact'):+.0f} µs per replay"
    )
    # per op: calls, then the sums of per-call medians of plain, flagos, flagos with reuse off, compact flagos
    rows: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0, 0.0])
    for i, (func, _, _) in enumerate(calls):
        row = rows[str(func)]
        row[0] += 1
        for j, arm in enumerate(("plain", "flagos", "flagos, reuse off", "flagos, compact"), start=1):
            row[j] += median[arm][i]
    head = (
        f"{'calls':>5s} {'plain µs':>9s} {'flagos µs':>9s} {'flagos-plain':>12s} {'reuse off-plain':>15s} "
        f"{'compact-plain':>13s}"
    )
    print(f"  {'op':56s} {head}")
    ranked = sorted(rows.items(), key=lambda kv: kv[1][1] - kv[1][2])
    for name, (n, p, f, off, compact) in ranked[:top]:
        print(f"  {name[:56]:56s} {int(n):5d} {p:9.1f} {f:9.1f} {f - p:+12.1f} {off - p:+15.1f} {compact - p:+13.1f}")
    p, f, off, compact = (sum(median[arm]) for arm in ("plain", "flagos", "flagos, reuse off", "flagos, compact"))
    label = "all ops (sums of per-call medians)"
    print(f"  {label:56s} {len(calls):5d} {p:9.1f} {f:9.1f} {f - p:+12.1f} {off - p:+15.1f} {compact - p:+13.1f}")
    if counted:
        router_phases(torch_fl, lambda: replay("flagos"), counted, top)


def router_phases(torch_fl: Any, replay: Any, replays: int, top: int) -> None:
    """The router's own clock (torch_fl._core.set_router_counters) over `replays` more flagos replays, kept apart
    from the timed ones: per op and router path, µs per replay in each phase. The kernel column is the vendor
    kernel as flagos calls it; the other three are the re-tag's."""
    torch_fl._core.reset_router_counters()
    torch_fl._core.set_router_counters(True)
    try:
        for _ in range(replays):
            replay()
    finally:
        torch_fl._core.set_router_counters(False)
    rows = sorted(torch_fl._core.router_counters(), key=lambda r: -sum(r[3]))
    phases = ("arguments", "kernel", "results", "release")
    print(f"  router phases, µs per replay (mean of {replays} replays with the counters on):")
    print(f"    {'op':44s} {'path':5s} {'calls':>5s} " + " ".join(f"{h:>9s}" for h in phases) + f" {'re-tag':>8s}")
    totals = [0.0] * 4
    for op, path, n, ns in rows:
        per = [v / replays / 1e3 for v in ns]
        totals = [a + b for a, b in zip(totals, per, strict=True)]
        if top > 0:
            top -= 1
            retag = per[0] + per[2] + per[3]
            print(
                f"    {op[:44]:44s} {path:5s} {n // replays:5d} "
                + " ".join(f"{v:9.1f}" for v in per)
                + f" {retag:8.1f}"
            )
    label = "all routed calls"
    print(
        f"    {label:44s} {'':5s} {'':5s} "
        + " ".join(f"{v:9.1f}" for v in totals)
        + f" {totals[0] + totals[2] + totals[3]:8.1f}"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--d-model", default="256,1024", help="comma-separated d_model values (default 256,1024)")
    p.add_argument("--rounds", type=int, default=8, help="rounds of 3 replays per arm (default 8)")
    p.add_argument("--top", type=int, default=30, help="op rows to print, largest flagos - plain first")
    counted = "then N flagos replays with the router's phase counters on, printed per op (default 0)"
    p.add_argument("--counters", type=int, default=0, metavar="N", help=counted)
    args = p.parse_args()
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    if args.counters < 0:
        p.error("--counters must be 0 or more")
    try:
        sizes = [int(v) for v in args.d_model.split(",") if v.strip()]
    except ValueError:
        p.error(f"--d-model takes integers separated by commas, got {args.d_model!r}")
    for d_model in sizes:
        measure(d_model, args.rounds, args.top, args.counters)
    return 0


if __name__ == "__main__":
    sys.exit(main())
