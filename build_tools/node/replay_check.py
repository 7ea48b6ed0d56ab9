"""The flaggems replay on a CUDA node, in one process with torch_fl (FLAGOS_ACCELERATOR=cuda, flag_gems present).

    python build_tools/node/replay_check.py seed --pairs 30 --repeat 200   # the four seed add cases
    python build_tools/node/replay_check.py sweep --pairs 7               # FlagGems ops, small shapes and 4096x4096
    python build_tools/node/replay_check.py conf --out replay.conf        # a conf routing the swept ops to flaggems

Arms, timed in alternating batches of one process (the order rotates every pair, so drift weighs on all alike):
plain cuda tensors (never routed), the same cuda tensors again (the A/A control), flagos native, flagos flaggems
with the replay off (FlagGems' Python path), flagos flaggems with the replay on. Each flagos arm's route is
confirmed from the dispatch log on a call outside the timed batches (flaggems/replay against flaggems). Replayed
results are compared bit for bit with FlagGems' own on fresh inputs. Results: a table on stdout, JSON with --json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from cuda_timing import batch_us  # beside this script

import torch_fl
from torch_fl._env import op_variable
from torch_fl.bench import cases

Fn = Callable[..., object]


def set_arm(arm: str, ops: list[str]) -> None:
    """Route ``ops`` for a flagos arm and switch the replay to match; plain arms need nothing."""
    if arm in ("plain", "plain_again"):
        return
    route = "native" if arm == "native" else "flaggems"
    before = {op: os.environ.get(op_variable(op)) for op in ops}
    if any(v != route for v in before.values()):
        os.environ.update({op_variable(op): route for op in ops})
        try:
            torch_fl.reload_routes()
        except Exception:  # FlagGems lacks the op: leave the table as it was
            for op, value in before.items():
                if value is None:
                    os.environ.pop(op_variable(op), None)
                else:
                    os.environ[op_variable(op)] = value
            torch_fl.reload_routes()
            raise
    torch_fl.replay.configure(enabled=arm == "replay")


def dispatch_log(fn: Callable[[], object]) -> list[str]:
    """The dispatch log lines of one call of ``fn`` (stderr captured at the file descriptor)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        torch_fl.set_dispatch_log(True)
        try:
            fn()
            torch.flagos.synchronize()
        finally:
            torch_fl.set_dispatch_log(False)
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        text = tmp.read().decode(errors="replace")
    return [line.split("] ", 1)[1] for line in text.splitlines() if line.startswith("[flagos dispatch]")]


def bits(t: torch.Tensor) -> torch.Tensor:
    c = t.detach().contiguous()
    if c.is_complex():
        c = torch.view_as_real(c)
    width = c.element_size()
    return c.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[width]).cpu()


def bitwise_equal(a: object, b: object) -> bool:
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(bitwise_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and torch.equal(bits(a), bits(b))
    return a == b


def timed_arms(arms: dict[str, Callable[[], object]], ops: list[str], pairs: int, repeat: int, warmup: int):
    names = list(arms)
    for name in names:
        set_arm(name, ops)
        for _ in range(warmup):
            arms[name]()
    us = {name: [] for name in names}
    for p in range(pairs):
        order = names[p % len(names) :] + names[: p % len(names)]
        for name in order:
            set_arm(name, ops)
            us[name].append(batch_us(arms[name], repeat))
    return us


def summary(us: dict[str, list[float]]) -> dict[str, object]:
    out = {}
    plain = us["plain"]
    for name, values in us.items():
        ratios = [v / p for v, p in zip(values, plain, strict=True)]
        out[name] = {
            "us": statistics.median(values),
            "ratio": statistics.median(ratios),
            "ratio_min": min(ratios),
            "ratio_max": max(ratios),
        }
    return out


def confirm(arm: str, ops: list[str], fn: Callable[[], object]) -> list[str]:
    set_arm(arm, ops)
    return dispatch_log(fn)


# ---- seed cases ----------------------------------------------------------------------------------


def seed(args: argparse.Namespace) -> dict[str, object]:
    op = torch.ops.aten.add.Tensor
    results = {}
    for case in cases.CASES:
        torch.manual_seed(0)
        pa, pk = case.build(torch.device("cuda"))
        torch.manual_seed(0)
        fa, fk = case.build(torch.device("flagos"))

        def plain_call(pa=pa, pk=pk):
            return op(*pa, **pk)

        def flagos_call(fa=fa, fk=fk):
            return op(*fa, **fk)

        arms = {
            "plain": plain_call,
            "plain_again": plain_call,
            "native": flagos_call,
            "flaggems": flagos_call,
            "replay": flagos_call,
        }
        ops = [case.op]
        us = timed_arms(arms, ops, args.pairs, args.repeat, args.warmup)
        routes = {arm: confirm(arm, ops, arms[arm]) for arm in ("native", "flaggems", "replay")}
        # fresh data, same key: the replay must hit and equal FlagGems' Python path bit for bit
        torch.manual_seed(1)
        fa2, fk2 = case.build(torch.device("flagos"))
        set_arm("replay", ops)
        replayed = op(*fa2, **fk2)
        set_arm("flaggems", ops)
        python = op(*fa2, **fk2)
        s = summary(us)
        results[case.name] = {"arms": s, "routes": routes, "bitwise_equal": bitwise_equal(replayed, python)}
        print(
            f"{case.name}: plain {s['plain']['us']:.2f} us; ratios: A/A {s['plain_again']['ratio']:.3f}, "
            f"native {s['native']['ratio']:.3f}, flaggems {s['flaggems']['ratio']:.2f}, replay "
            f"{s['replay']['ratio']:.3f} ({s['replay']['ratio_min']:.2f}-{s['replay']['ratio_max']:.2f}); "
            f"routes {routes}; bitwise {results[case.name]['bitwise_equal']}",
            flush=True,
        )
    return results


# ---- sweep ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Op:
    name: str
    ops: tuple[str, ...]  # the aten ops the call reaches (routed to flaggems in its flagos arms)
    fn: Fn
    make: Callable[[tuple[int, int], torch.device], tuple]  # host-built inputs, then moved


def _t(shape, device, kind="randn", gen=None):
    x = torch.randn(shape, generator=gen)
    if kind == "pos":
        x = x.abs() + 0.5
    return x.to(device)


def one(kind="randn"):
    return lambda shape, device, gen=None: (_t(shape, device, kind, gen),)


def two(kind="randn"):
    return lambda shape, device, gen=None: (_t(shape, device, kind, gen), _t(shape, device, "randn", gen))


def _where(shape, device, gen=None):
    c = torch.randn(shape, generator=gen) > 0
    return c.to(device), _t(shape, device, gen=gen), _t(shape, device, gen=gen)


def _ln(shape, device, gen=None):
    return _t(shape, device, gen=gen), _t(shape[-1:], device, gen=gen), _t(shape[-1:], device, gen=gen)


def _mm(shape, device, gen=None):
    return _t(shape, device, gen=gen), _t((shape[1], shape[1]), device, gen=gen)


UNARY = ["abs", "neg", "exp", "sin", "cos", "tanh", "sigmoid", "relu", "gelu", "silu", "erf"]
POSITIVE = ["log", "sqrt", "rsqrt", "reciprocal"]
SWEEP = (
    [Op(n, (n,), getattr(torch, n) if hasattr(torch, n) else getattr(F, n), one()) for n in UNARY]
    + [Op(n, (n,), getattr(torch, n), one("pos")) for n in POSITIVE]
    + [
        Op("add.Tensor", ("add.Tensor",), torch.add, two()),
        Op("sub.Tensor", ("sub.Tensor",), torch.sub, two()),
        Op("mul.Tensor", ("mul.Tensor",), torch.mul, two()),
        Op("div.Tensor", ("div.Tensor",), torch.div, two()),
        Op("maximum", ("maximum",), torch.maximum, two()),
        Op("minimum", ("minimum",), torch.minimum, two()),
        Op("eq.Tensor", ("eq.Tensor",), torch.eq, two()),
        Op("pow.Tensor_Tensor", ("pow.Tensor_Tensor",), torch.pow, two("pos")),
        Op("add scalar", ("add.Tensor",), lambda x: x + 1.5, one()),
        Op("mul scalar", ("mul.Tensor",), lambda x: x * 0.5, one()),
        Op("div scalar", ("div.Tensor",), lambda x: x / 3.0, one()),
        Op("pow.Tensor_Scalar", ("pow.Tensor_Scalar",), lambda x: x**2, one()),
        Op("where.self", ("where.self",), torch.where, _where),
        Op("sum.dim_IntList", ("sum.dim_IntList",), lambda x: x.sum(-1), one()),
        Op("mean.dim", ("mean.dim",), lambda x: x.mean(-1), one()),
        Op("amax", ("amax",), lambda x: x.amax(-1), one()),
        Op("_softmax", ("_softmax",), lambda x: torch.softmax(x, -1), one()),
        Op("native_layer_norm", ("native_layer_norm",), lambda x, w, b: F.layer_norm(x, x.shape[-1:], w, b), _ln),
        Op("cat", ("cat",), lambda x, y: torch.cat([x, y], 0), two()),
        Op("mm", ("mm",), torch.mm, _mm),
    ]
)
FORMS = [  # in-place, out=, broadcasting, non-contiguous: each its own key
    Op("add_ (in-place)", ("add_.Tensor",), lambda x, y: x.add_(y), two()),
    Op("exp out=", ("exp.out",), lambda x: torch.exp(x, out=torch.empty_like(x)), one()),
    Op("div out=", ("div.out",), lambda x, y: torch.div(x, y, out=torch.empty_like(x)), two()),
    Op("mul broadcast", ("mul.Tensor",), lambda x, y: x * y[:1], two()),
    Op("add non-contiguous", ("add.Tensor",), lambda x, y: x.t() + y.t(), two()),
    # over two of three dims (an RMSNorm weight's gradient): FlagGems permutes and copies its input first
    Op("sum over two dims", ("sum.dim_IntList",), lambda x: x.unflatten(0, (3, -1)).sum([0, 1]), one()),
]
SMALL, LARGE = (303, 320), (4096, 4096)


def sweep(args: argparse.Namespace) -> dict[str, object]:
    rows = {}
    deadline = time.time() + args.budget
    only = set(args.ops.split(",")) if args.ops else None
    for shape in (SMALL, LARGE):
        for item in SWEEP + (FORMS if shape == SMALL else []):
            label = f"{item.name} {shape[0]}x{shape[1]}"
            if only is not None and item.name not in only:
                continue
            if time.time() > deadline:
                print(f"{label}: skipped (time budget)", flush=True)
                continue
            try:
                rows[label] = sweep_one(item, shape, args)
            except Exception as exc:  # one op's failure must not hide the others
                rows[label] = {"error": f"{type(exc).__name__}: {exc}"[:400]}
                print(f"{label}: ERROR {rows[label]['error']}", flush=True)
    return rows


def sweep_one(item: Op, shape: tuple[int, int], args: argparse.Namespace) -> dict[str, object]:
    ops = list(item.ops)
    gen = torch.Generator().manual_seed(0)
    host = item.make(shape, torch.device("cpu"), gen)
    plain = [t.to("cuda") for t in host]
    flag = [t.to("flagos") for t in host]
    fresh = lambda: [t.to("flagos") for t in item.make(shape, torch.device("cpu"), gen)]  # noqa: E731
    # in-place forms write their inputs: give each call the same (stale) tensors, timing is all that matters
    arms = {
        "plain": lambda: item.fn(*plain),
        "plain_again": lambda: item.fn(*plain),  # the A/A control
        "flaggems": lambda: item.fn(*flag),
        "replay": lambda: item.fn(*flag),
    }
    # one call each first: compiles, autotunes and the two recordings stay out of the repeat estimate
    for arm in ("plain", "flaggems", "replay", "replay", "replay"):
        set_arm(arm, ops)
        arms[arm]()
    torch.cuda.synchronize()
    t = time.perf_counter()
    arms["flaggems"]()
    torch.cuda.synchronize()
    single = time.perf_counter() - t
    repeat = max(3, min(args.repeat, int(0.02 / max(single, 1e-6))))
    pairs = args.pairs if shape == SMALL else max(3, args.pairs // 2)
    us = timed_arms(arms, ops, pairs, repeat, warmup=2)
    s = summary(us)
    routes = {arm: confirm(arm, ops, arms[arm]) for arm in ("flaggems", "replay")}
    before = {r["op"]: r["hits"] for r in torch_fl.replay.stats()}
    new = fresh()
    set_arm("replay", ops)
    replayed = item.fn(*[t.clone() for t in new])
    set_arm("flaggems", ops)
    python = item.fn(*[t.clone() for t in new])
    after = {r["op"]: r for r in torch_fl.replay.stats()}
    hit = any(after.get(op, {}).get("hits", 0) > before.get(op, 0) for op in ops)
    replays = all(line.endswith("/replay") for line in routes["replay"]) and bool(routes["replay"])
    reasons = {op: after[op]["reasons"] for op in ops if op in after and after[op]["reasons"]}
    row = {
        "plain_us": s["plain"]["us"],
        "aa": s["plain_again"]["ratio"],
        "flaggems_us": s["flaggems"]["us"],
        "replay_us": s["replay"]["us"],
        "replay_vs_plain": s["replay"]["ratio"],
        "flaggems_vs_plain": s["flaggems"]["ratio"],
        "replay_vs_flaggems": statistics.median(r / f for r, f in zip(us["replay"], us["flaggems"], strict=True)),
        "repeat": repeat,
        "pairs": pairs,
        "replays": replays,
        "hit_on_fresh_data": hit,
        "bitwise_equal": bitwise_equal(replayed, python),
        "routes": routes,
        "reasons": reasons,
    }
    print(
        f"{item.name} {shape[0]}x{shape[1]}: plain {row['plain_us']:.1f} us, flaggems {row['flaggems_us']:.1f}, "
        f"replay {row['replay_us']:.1f} -> replay/plain {row['replay_vs_plain']:.3f} (A/A {row['aa']:.3f}), "
        f"replay/flaggems "
        f"{row['replay_vs_flaggems']:.3f}; replays {replays}, hit {hit}, bitwise {row['bitwise_equal']}"
        + (f"; refused: {reasons}" if reasons else ""),
        flush=True,
    )
    return row


def report(rows: dict[str, dict[str, object]]) -> None:
    small = [r for k, r in rows.items() if k.endswith(f"{SMALL[0]}x{SMALL[1]}") and r.get("replays")]
    large = [r for k, r in rows.items() if k.endswith(f"{LARGE[0]}x{LARGE[1]}") and r.get("replays")]
    if small:
        gm = math.exp(statistics.mean(math.log(r["replay_vs_plain"]) for r in small))
        print(f"small shapes: geometric mean replay/plain {gm:.3f} over {len(small)} replayed ops")
    if large:
        worst = max(r["replay_vs_flaggems"] for r in large)
        print(f"4096x4096: replay/flaggems-python median per op, worst {worst:.3f} over {len(large)} ops")
    never = {k: r.get("reasons") or r.get("error") for k, r in rows.items() if not r.get("replays")}
    print(f"never replayed: {json.dumps(never, indent=1)}")
    bad = [k for k, r in rows.items() if r.get("replays") and not (r["bitwise_equal"] and r["hit_on_fresh_data"])]
    print(f"replayed but not bitwise equal or not hit on fresh data: {bad}")


def write_conf(path: str) -> None:
    ops = sorted({op for item in SWEEP + FORMS for op in item.ops})
    with open(path, "w") as f:
        f.write("# every op native except the replay sweep's, which take FlagGems\ndefault = native\n")
        for op in ops:
            f.write(f"{op} = flaggems, native\n")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=("seed", "sweep", "conf"))
    p.add_argument("--pairs", type=int, default=15)
    p.add_argument("--repeat", type=int, default=200)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--budget", type=float, default=240, help="sweep: seconds before the remaining ops are skipped")
    p.add_argument("--ops", help="sweep: only these entries (comma separated names, e.g. 'exp out=,mm')")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--out", help="conf: the file to write")
    args = p.parse_args()
    if args.what == "conf":
        write_conf(args.out)
        return 0
    if torch_fl.accelerator() not in ("cuda", "dcu"):
        raise SystemExit("replay_check needs a GPU vendor (FLAGOS_ACCELERATOR=cuda) and flag_gems")
    results = seed(args) if args.what == "seed" else sweep(args)
    if args.what == "sweep":
        report(results)
    print("replay stats:\n" + torch_fl.replay.format_stats(), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
