"""Flagos graphs on a CUDA node (FLAGOS_ACCELERATOR=cuda): the acceptance points of issue 34 that need a GPU.

    python build_tools/node/graphs_check.py add --pairs 20 --repeat 200  # seed add cases: a graph replayed 200 times
    python build_tools/node/graphs_check.py rng                          # dropout captured: fresh numbers per replay
    python build_tools/node/graphs_check.py provider                     # FlagGems' Python path refused by name
    python build_tools/node/graphs_check.py train --sets 3 --steps 20    # captured eager training step vs eager

add: in one process, forward only (plain cuda tensors never meet autograd, so they may share it with torch_fl):
each seed case's add captured once per arm and replayed ``--repeat`` times per timed batch, batches alternating in
rotating order. Arms: plain cuda's captured add, the same again (the A/A control), flagos's captured add, and both
eager adds for scale. The replayed flagos result is compared bit for bit with plain cuda's.
train: a 2-layer TransformerEncoder (d_model 256, 4 heads, ffn 1024, dropout 0, batch 8, seq 128) with AdamW
(capturable): on flagos, N steps uncaptured against one warm-up step then N-1 replays of the captured step, same
batches, parameters compared; then step times of the captured step, flagos against plain cuda, one process per
arm (plain cuda cannot train in a process with torch_fl) in ``--sets`` lockstep sets with a second plain arm as the
A/A control. Exit status 1 if a check fails.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import torch
from cuda_timing import batch_us  # beside this script; free of torch_fl, as the plain arm must be

D_MODEL, HEADS, FFN, BATCH, SEQ = 256, 4, 1024, 8, 128


def _captured(device: str, args, kwargs):
    """An add captured once on ``device``; returns (replay, the output buffer)."""
    if device == "cuda":
        g = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.add(*args, **kwargs)  # warm-up outside the capture, as the CUDA graph recipe says
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(g):
            out = torch.add(*args, **kwargs)
    else:
        torch.add(*args, **kwargs)
        torch.flagos.synchronize()
        g = torch.flagos.FlagosGraph()
        with torch.flagos.graph(g):
            out = torch.add(*args, **kwargs)
    return g.replay, out


def add(args: argparse.Namespace) -> bool:
    import torch_fl  # noqa: F401
    from torch_fl.bench import cases

    ok = True
    for case in cases.CASES:
        torch.manual_seed(0)
        plain_args, plain_kwargs = case.build(torch.device("cuda"))
        torch.manual_seed(0)
        fl_args, fl_kwargs = case.build(torch.device("flagos:0"))
        plain_replay, plain_out = _captured("cuda", plain_args, plain_kwargs)
        again_replay, _ = _captured("cuda", plain_args, plain_kwargs)
        fl_replay, fl_out = _captured("flagos", fl_args, fl_kwargs)
        plain_replay()
        fl_replay()
        torch.cuda.synchronize()
        same = torch.equal(fl_out.cpu(), plain_out.cpu())
        ok &= same
        arms = {
            "plain": plain_replay,
            "plain_again": again_replay,
            "flagos": fl_replay,
            "plain_eager": lambda a=plain_args, k=plain_kwargs: torch.add(*a, **k),
            "flagos_eager": lambda a=fl_args, k=fl_kwargs: torch.add(*a, **k),
        }
        us: dict[str, list[float]] = {name: [] for name in arms}
        names = list(arms)
        for fn in arms.values():
            batch_us(fn, args.repeat)
        for p in range(args.pairs):
            for name in names[p % len(names) :] + names[: p % len(names)]:
                us[name].append(batch_us(arms[name], args.repeat))
        ratio = {n: statistics.median(v / b for v, b in zip(us[n], us["plain"], strict=True)) for n in names}
        med = {n: statistics.median(v) for n, v in us.items()}
        print(
            f"add {case.name}: replay us/call plain {med['plain']:.2f}, flagos {med['flagos']:.2f} -> flagos/plain "
            f"{ratio['flagos']:.3f} (A/A {ratio['plain_again']:.3f}); eager plain {med['plain_eager']:.2f}, "
            f"flagos {med['flagos_eager']:.2f}; flagos replay == plain replay: {same}"
        )
    return ok


def rng(args: argparse.Namespace) -> bool:
    import torch_fl  # noqa: F401

    x = torch.ones(4096, device="flagos")
    torch.nn.functional.dropout(x, 0.5)
    g = torch.flagos.FlagosGraph()
    with torch.flagos.graph(g):
        out = torch.nn.functional.dropout(x, 0.5)
    g.replay()
    first = out.cpu()
    g.replay()
    second = out.cpu()
    valid = bool(((first == 0) | (first == 2)).all() and ((second == 0) | (second == 2)).all())
    fresh = not torch.equal(first, second)
    print(f"rng: dropout captured on flagos: values valid {valid}, fresh per replay {fresh}")
    return valid and fresh


def provider(args: argparse.Namespace) -> bool:
    """A FlagGems call on its Python path (the replay off) is refused by name under capture."""
    import os

    import torch_fl

    os.environ["FLAGOS_OP_add__Tensor"] = "flaggems"
    try:
        torch_fl.reload_routes()
    except Exception as exc:  # noqa: BLE001  (no FlagGems on this node)
        print(f"provider: skipped, the flaggems route is not available ({exc})")
        os.environ.pop("FLAGOS_OP_add__Tensor")
        return True
    torch_fl.replay.configure(enabled=False)
    x = torch.ones(8, device="flagos")
    try:
        with torch.flagos.graph(torch.flagos.FlagosGraph()):
            x + x
        print("provider: FAILED, FlagGems' Python path was captured without a word")
        return False
    except RuntimeError as exc:  # a CaptureError, perhaps re-raised by the router as a RuntimeError
        print(f"provider: refused ({type(exc).__name__}): {exc}")
        return "add" in str(exc) and "cannot be captured" in str(exc)
    finally:
        os.environ.pop("FLAGOS_OP_add__Tensor")
        torch_fl.replay.configure(enabled=True)
        torch_fl.reload_routes()


def _model_and_data(device: str, steps: int):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(D_MODEL, HEADS, FFN, dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, capturable=True)
    gen = torch.Generator().manual_seed(1)
    batches = [
        (torch.randn(BATCH, SEQ, D_MODEL, generator=gen), torch.randn(BATCH, SEQ, D_MODEL, generator=gen))
        for _ in range(steps)
    ]
    return model, optimizer, batches


def _step(model, optimizer, x, y) -> None:
    optimizer.zero_grad(set_to_none=False)
    torch.nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()


def _capture_step(device: str, model, optimizer, x, y):
    api = torch.cuda if device == "cuda" else torch.flagos
    graph_cls = torch.cuda.CUDAGraph if device == "cuda" else torch.flagos.FlagosGraph
    side = api.Stream()
    side.wait_stream(api.current_stream())
    with api.stream(side):
        _step(model, optimizer, x, y)  # the warm-up step: gradients and optimizer state exist before the capture
    api.current_stream().wait_stream(side)
    g = graph_cls()
    with api.graph(g):
        _step(model, optimizer, x, y)
    return g


def train_arm(args: argparse.Namespace) -> bool:
    """One process: --arm flagos (equality, then timing) or --arm cuda (timing only)."""
    device = args.arm
    if device == "flagos":
        import torch_fl  # noqa: F401
    sync = torch.flagos.synchronize if device == "flagos" else torch.cuda.synchronize
    ok = True
    if device == "flagos" and args.check:
        eager, eager_opt, batches = _model_and_data(device, args.steps)
        for x, y in batches:
            _step(eager, eager_opt, x.to(device), y.to(device))
        model, optimizer, _ = _model_and_data(device, args.steps)
        sx, sy = batches[0][0].to(device), batches[0][1].to(device)
        g = _capture_step(device, model, optimizer, sx, sy)
        for x, y in batches[1:]:
            sx.copy_(x)
            sy.copy_(y)
            g.replay()
        diffs = [
            (a.cpu() - b.cpu()).abs().max().item() for a, b in zip(eager.parameters(), model.parameters(), strict=True)
        ]
        close = all(
            torch.allclose(a.cpu(), b.cpu(), rtol=1e-4, atol=1e-5)
            for a, b in zip(eager.parameters(), model.parameters(), strict=True)
        )
        ok &= close
        print(
            f"train: {args.steps} steps, captured (1 warm-up + {args.steps - 1} replays) vs eager on flagos: "
            f"parameters close {close}, max abs diff {max(diffs):.3g}"
        )
    model, optimizer, batches = _model_and_data(device, 1)
    sx, sy = batches[0][0].to(device), batches[0][1].to(device)
    g = _capture_step(device, model, optimizer, sx, sy)
    for _ in range(5):
        g.replay()
    sync()
    t = time.perf_counter()
    for _ in range(args.steps):
        g.replay()
    sync()
    print(json.dumps({"arm": device, "captured_ms": (time.perf_counter() - t) / args.steps * 1e3}))
    return ok


def train(args: argparse.Namespace) -> bool:
    ok = True
    times: dict[str, list[float]] = {"cuda": [], "cuda_again": [], "flagos": []}
    for s in range(args.sets):
        for arm in ("flagos", "cuda", "cuda_again")[s % 3 :] + ("flagos", "cuda", "cuda_again")[: s % 3]:
            cmd = [
                sys.executable,
                __file__,
                "train-arm",
                "--arm",
                arm.removesuffix("_again"),
                "--steps",
                str(args.steps),
            ] + (["--check"] if s == 0 and arm == "flagos" else [])
            run = subprocess.run(cmd, capture_output=True, text=True)
            lines = run.stdout.strip().splitlines()
            for line in lines[:-1]:
                print(line)
            if run.returncode != 0 or not lines:
                print(f"train-arm {arm} failed ({run.returncode}):\n{run.stderr[-3000:]}")
                return False
            times[arm].append(json.loads(lines[-1])["captured_ms"])
    ratio = {a: statistics.median(v / c for v, c in zip(times[a], times["cuda"], strict=True)) for a in times}
    print(
        f"train: captured step ms (median of {args.sets} sets): cuda {statistics.median(times['cuda']):.3f}, "
        f"flagos {statistics.median(times['flagos']):.3f} -> flagos/cuda {ratio['flagos']:.3f} "
        f"(A/A {ratio['cuda_again']:.3f})"
    )
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("part", choices=("add", "rng", "provider", "train", "train-arm", "all"))
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--sets", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--arm", choices=("flagos", "cuda"), default="flagos")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    if args.part == "train-arm":
        return 0 if train_arm(args) else 1
    if args.part == "train":
        return 0 if train(args) else 1
    parts = {"add": add, "rng": rng, "provider": provider}
    # train spawns its processes before this one imports torch_fl's CUDA state
    ok = train(args) if args.part == "all" else True
    for name, fn in parts.items():
        if args.part in (name, "all"):
            try:
                ok &= fn(args)
            except Exception as exc:  # noqa: BLE001  (report every part)
                print(f"{name}: FAILED {type(exc).__name__}: {exc}")
                ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
