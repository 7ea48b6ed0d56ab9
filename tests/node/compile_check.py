"""torch.compile on flagos against torch.compile on plain CUDA: the same training step, one process per arm.

The step: a 2-layer TransformerEncoder (d_model 256, 4 heads, ffn 1024, dropout 0), sequence 128, batch 8, AdamW,
the model compiled with torch.compile (the optimizer runs eagerly, the same in every arm). Weights and inputs are
built on the host from one seed, then moved, so every arm starts from the same numbers. PyTorch allows one
accelerator per process once torch_fl is imported, so plain CUDA runs in processes that never import it.

  python compile_check.py run --arm ARM [--steps N] [--time-steps N]     one process, one JSON line on stdout
      ARM: flagos-compiled | cuda-compiled | flagos-eager | flagos-reduce-overhead
  python compile_check.py all [--pairs 5] [--conf native|shipped]          the whole check (drives `run`)

`all` runs the arms once for numbers (compiled flagos must match compiled cuda step by step), then --pairs rounds
of alternating processes (compiled flagos, compiled cuda, eager flagos, compiled cuda again: the A/A control) and
prints the median step time of each arm and the ratios. The flagos arms run every op on its native route by default
(--conf native), so both sides compute the same ops; --conf shipped keeps the cuda conf's provider routes, which
stay ATen calls inside the compiled graph (README: torch.compile). Exit status 1 when the numbers differ or compiled
flagos is slower than the bar (1.10x compiled cuda, widened by the A/A spread) or not faster than eager flagos.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import time

D_MODEL, HEADS, FFN, LAYERS, SEQ, BATCH = 256, 4, 1024, 2, 128, 8
BAR = 1.10


def run(arm: str, steps: int, time_steps: int, math_attention: bool = False) -> dict:
    import contextlib

    import torch

    device = "cuda"
    off_native: list[str] = []
    if arm.startswith("flagos"):
        import torch_fl  # registers flagos; this process never touches plain cuda

        device = "flagos"
        off_native = sorted(f"{op}={r.route}" for op, r in torch_fl.routes().items() if r.route != "native")
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(D_MODEL, HEADS, FFN, dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
    inputs = [torch.randn(BATCH, SEQ, D_MODEL) for _ in range(4)]
    targets = [torch.randn(BATCH, SEQ, D_MODEL) for _ in range(4)]
    model = model.to(device)
    inputs = [x.to(device) for x in inputs]
    targets = [y.to(device) for y in targets]
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    forward = model
    if arm.endswith("compiled"):
        forward = torch.compile(model)
    elif arm.endswith("reduce-overhead"):
        forward = torch.compile(model, mode="reduce-overhead")
    sync = torch.flagos.synchronize if device == "flagos" else torch.cuda.synchronize

    def step(i: int) -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(forward(inputs[i % 4]), targets[i % 4])
        loss.backward()
        optimizer.step()
        return loss.detach()

    attention = contextlib.nullcontext()
    if math_attention:  # what a flagos graph computes (README: torch.compile, Limits)
        from torch.nn.attention import SDPBackend, sdpa_kernel

        attention = sdpa_kernel(SDPBackend.MATH)
    attention.__enter__()
    start = time.perf_counter()
    losses = [float(step(i)) for i in range(steps)]  # the first steps compile
    sync()
    first_s = time.perf_counter() - start
    times = []
    for i in range(time_steps):
        t0 = time.perf_counter()
        step(i)
        sync()
        times.append(time.perf_counter() - t0)
    return {
        "arm": arm + (" (math attention)" if math_attention else ""),
        "losses": losses,
        "first_steps_s": round(first_s, 2),
        "ms_per_step": 1e3 * statistics.median(times) if times else None,
        "torch": torch.__version__,
        "off_native": off_native,
    }


NATIVE_CONF = "/tmp/compile-check-native.conf"
CONF: dict[str, str] = {}  # FLAGOS_BACKEND_CONFIG for the flagos arms (main: --conf)


def child(arm: str, steps: int, time_steps: int, math_attention: bool = False) -> dict:
    env = dict(os.environ)
    if arm.startswith("cuda"):
        env.pop("FLAGOS_AUTOLOAD", None)
    else:
        env.setdefault("FLAGOS_ACCELERATOR", "cuda")
        env.update(CONF)
    cmd = [sys.executable, __file__, "run", "--arm", arm, "--steps", str(steps), "--time-steps", str(time_steps)]
    cmd += ["--math-attention"] if math_attention else []
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        return {"arm": arm, "error": (proc.stderr or proc.stdout).strip().splitlines()[-40:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def check_all(pairs: int) -> int:
    status = 0
    # torch's tracing gives flagos graphs math attention (README: torch.compile, Limits), so the numbers are
    # compared with a compiled cuda run on math attention (the same computation); default cuda is shown beside it
    # the numbers need no quiet GPU: these processes (and their cold compiles) run side by side
    with concurrent.futures.ThreadPoolExecutor() as pool:
        jobs = [
            pool.submit(child, "cuda-compiled", 6, 0, True),
            pool.submit(child, "cuda-compiled", 6, 0),
            pool.submit(child, "flagos-compiled", 6, 0),
            pool.submit(child, "flagos-reduce-overhead", 3, 0),
        ]
        ref, default, got, ro = (job.result() for job in jobs)
    for r in (ref, default, got):
        if "error" in r:
            print(f"{r['arm']} failed:\n  " + "\n  ".join(r["error"]))
            return 1

    def worst(a: dict, b: dict) -> float:
        return max(abs(x - y) / max(abs(x), 1e-12) for x, y in zip(a["losses"], b["losses"], strict=True))

    print("flagos routes off native: " + (", ".join(got["off_native"]) or "none"))
    for r in (ref, default, got):
        print(f"losses, {r['arm']:40s} {[round(v, 6) for v in r['losses']]}  (first 6 steps {r['first_steps_s']} s)")
    same = worst(ref, got) <= 1e-4
    status |= not same
    print(f"compiled flagos against compiled cuda (math attention): largest relative loss difference "
          f"{worst(ref, got):.2e}: {'match' if same else 'MISMATCH'} (bar 1e-4)")
    print(f"for scale, compiled cuda (math attention) against compiled cuda (its default attention): "
          f"{worst(ref, default):.2e}")

    if "error" in ro:
        said = [line for line in ro["error"] if "reduce-overhead" in line] or ro["error"][-1:]
        print("mode='reduce-overhead' on flagos: refused: " + said[-1].strip())
    else:
        print(f"mode='reduce-overhead' on flagos: ran, losses {ro['losses']}")

    arms = ["flagos-compiled", "cuda-compiled", "flagos-eager", "cuda-compiled-again"]
    times: dict[str, list[float]] = {a: [] for a in arms}
    for i in range(pairs):
        for arm in arms:
            r = child(arm.removesuffix("-again"), 3, 50)
            if "error" in r:
                print(f"{arm} failed:\n  " + "\n  ".join(r["error"]))
                return 1
            times[arm].append(r["ms_per_step"])
        print(f"round {i + 1}: " + ", ".join(f"{a} {times[a][-1]:.3f} ms" for a in arms))
    med = {a: statistics.median(v) for a, v in times.items()}
    ratio = med["flagos-compiled"] / med["cuda-compiled"]
    aa = med["cuda-compiled-again"] / med["cuda-compiled"]
    speedup = med["flagos-eager"] / med["flagos-compiled"]
    bar = BAR * max(1.0, aa)
    print(f"median ms/step over {pairs} process rounds: " + ", ".join(f"{a} {m:.3f}" for a, m in med.items()))
    print(f"compiled flagos / compiled cuda = {ratio:.3f} (bar {bar:.3f}: {BAR} widened by the A/A control)")
    print(f"A/A control, compiled cuda again / compiled cuda = {aa:.3f}")
    print(f"eager flagos / compiled flagos = {speedup:.2f}x")
    status |= ratio > bar
    status |= speedup <= 1.0
    print("compile check: " + ("PASS" if status == 0 else "FAIL"))
    return status


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--arm", required=True,
                   choices=["flagos-compiled", "cuda-compiled", "flagos-eager", "flagos-reduce-overhead"])
    r.add_argument("--steps", type=int, default=6)
    r.add_argument("--time-steps", type=int, default=0)
    r.add_argument("--math-attention", action="store_true", help="scaled_dot_product_attention on its math kernels")
    a = sub.add_parser("all")
    a.add_argument("--pairs", type=int, default=5)
    a.add_argument("--conf", choices=["native", "shipped"], default="native",
                   help="flagos arms on an every-op-native conf (default: what compiled cuda computes) or on the "
                        "shipped cuda conf (its provider routes stay ATen calls in the compiled graph)")
    args = p.parse_args()
    if args.cmd == "run":
        print(json.dumps(run(args.arm, args.steps, args.time_steps, args.math_attention)))
        return 0
    if args.conf == "native":
        with open(NATIVE_CONF, "w") as f:
            f.write("default = native\n")
        CONF["FLAGOS_BACKEND_CONFIG"] = NATIVE_CONF
    return check_all(args.pairs)


if __name__ == "__main__":
    sys.exit(main())
