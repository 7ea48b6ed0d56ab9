"""torch.compile on flagos against torch.compile on the plain vendor device: one training step, one process per arm.

The step: a 2-layer TransformerEncoder (d_model 256, 4 heads, ffn 1024, dropout 0), sequence 128, batch 8, AdamW
(foreach), forward + backward + step, the model compiled with torch.compile (the optimizer runs eagerly, the same
in every arm). Weights and inputs are built on the host from one seed, then moved, so every arm starts from the
same numbers. PyTorch allows one accelerator per process once torch_fl is imported, so the reference (plain cuda;
plain cpu when flagos runs the CPU emulation) runs in processes that never import it.

  python compile_check.py all [--pairs 5] [--conf native|shipped] [--tiny]     the whole check, one command
  python compile_check.py run --arm ARM ...                                     one process, one JSON line

`all` prints, compactly:
  numbers   compiled flagos against the compiled reference on math attention (what a flagos graph computes:
            README, torch.compile, Limits), 6 steps: the largest relative loss difference (bar 1e-4) and the
            relative L2 difference of all parameters after the steps (bar 1e-3, widened to twice what the
            reference's own two attention kernels differ by); the cold compile time of each arm
  reduce-overhead  on a GPU vendor, 6 steps under mode="reduce-overhead" (flagos graphs, no cudagraph skip) match
            the compiled flagos losses (bar 1e-4); on the emulation it raises CudaGraphsUnsupported, as documented
  time      --pairs lockstep sets (build_tools/bench/harness/lockstep.py): one process per arm, all alive at once,
            compiled flagos, eager flagos, compiled reference and compiled reference again (the A/A control).
            Each compiles and warms up (3 steps, out of the timing), then all are pinned to one CPU and take
            turns of 5 synchronized steps, one arm at a time, the order rotated per round, 10 rounds per set.
            Ratios are taken within each round; the figure is their median over every round of every set.
            Bars: compiled flagos <= 1.10x the compiled reference, faster than eager flagos. The A/A spread
            (the larger of again/reference and its inverse) decides what a ratio can show: above 1.10x times
            the spread is a miss; a spread wider than 1.10x leaves a ratio under that INCONCLUSIVE.
Inductor's cache (TORCHINDUCTOR_CACHE_DIR, default /tmp/torch-fl-compile-check-inductor) is shared by all the
processes, so only the first compile of each arm is cold. Exit status 1 when a bar is missed, 2 when the timing is
inconclusive. --tiny: a small
model for a CPU-emulation dry run of the script itself (its timing bars are not judged).
The flagos arms run every op on its native route by default (--conf native), so both sides compute the same ops;
--conf shipped keeps the vendor conf's provider routes (they stay ATen calls inside the compiled graph).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

FULL = {"d_model": 256, "heads": 4, "ffn": 1024, "layers": 2, "seq": 128, "batch": 8}
TINY = {"d_model": 32, "heads": 2, "ffn": 64, "layers": 2, "seq": 16, "batch": 2}
BAR = 1.10
LOSS_BAR = 1e-4
PARAM_BAR = 1e-3
WARM_STEPS, TURN_STEPS, ROUNDS = 3, 5, 10
CHILD_TIMEOUT_S = 420
REFUSAL_TYPE = "CudaGraphsUnsupported"


def _lockstep():
    """The harness's lockstep module (the harness imports nothing at import: the reference never loads torch_fl)."""
    import neighbours

    neighbours.reach("harness")
    from harness import lockstep

    return lockstep


def _serve(step, sync, info: dict, cpu: int) -> dict:
    """Warm ``step`` up (the compile happens here), then time it in the parent's turns (lockstep.serve)."""
    for i in range(WARM_STEPS):
        step(i)
    sync()
    lockstep = _lockstep()
    lockstep.pin_all_threads(cpu)
    counter = iter(range(WARM_STEPS, 1 << 62))
    lockstep.serve(lambda: step(next(counter)), sync, info)
    return info


def run(
    arm: str, device: str, steps: int, serve_cpu: int | None, math_attention: bool, tiny: bool, save: str | None
) -> dict:
    import contextlib
    import copy

    import torch

    if serve_cpu is not None:  # every thread is pinned to one CPU for the timing: a thread pool would fight there
        torch.set_num_threads(1)
    size = TINY if tiny else FULL
    info: dict = {"arm": arm + (" (math attention)" if math_attention else ""), "torch": torch.__version__}
    if arm.startswith("flagos"):
        import torch_fl  # registers flagos; this process never runs the plain vendor device

        device = "flagos"
        info["flagos_runtime"] = torch_fl.accelerator()
        info["off_native"] = sorted(f"{op}={r.route}" for op, r in torch_fl.routes().items() if r.route != "native")
    elif device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("the reference arm asks for cuda, but torch.cuda.is_available() is False here")
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(size["d_model"], size["heads"], size["ffn"], dropout=0.0, batch_first=True)
    host_model = torch.nn.TransformerEncoder(layer, size["layers"], enable_nested_tensor=False)
    shape = (size["batch"], size["seq"], size["d_model"])
    inputs = [torch.randn(shape).to(device) for _ in range(4)]
    targets = [torch.randn(shape).to(device) for _ in range(4)]
    sync = {"flagos": lambda: torch.flagos.synchronize(), "cuda": torch.cuda.synchronize}.get(device, lambda: None)

    def make_step(model, forward):
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)

        def step(i: int) -> torch.Tensor:
            optimizer.zero_grad(set_to_none=True)
            loss = torch.nn.functional.mse_loss(forward(inputs[i % 4]), targets[i % 4])
            loss.backward()
            optimizer.step()
            return loss.detach()

        return step

    attention = contextlib.nullcontext()
    if math_attention:  # what a flagos graph computes (README: torch.compile, Limits)
        from torch.nn.attention import SDPBackend, sdpa_kernel

        attention = sdpa_kernel(SDPBackend.MATH)
    with attention:
        if arm == "flagos-reduce-overhead":
            model = copy.deepcopy(host_model).to(device)
            step = make_step(model, torch.compile(model, mode="reduce-overhead"))
            try:
                info["losses"] = [float(step(i)) for i in range(steps)]
                sync()
                info["refusal"] = None
            except Exception as exc:  # Dynamo wraps the backend's exception: look down the chain for ours
                chain, seen = [], exc
                while seen is not None and len(chain) < 8:
                    chain.append(seen)
                    seen = seen.__cause__ or getattr(seen, "inner_exception", None)
                ours = [e for e in chain if type(e).__name__ == REFUSAL_TYPE]
                info["refusal"] = {
                    "raised": type(exc).__name__,
                    "ours": type(ours[0]).__module__ + "." + REFUSAL_TYPE if ours else None,
                    "message": str(ours[0] if ours else exc).strip().splitlines()[-1][:400],
                }
            from torch._dynamo.utils import counters

            info["cudagraph_skips"] = counters["inductor"]["cudagraph_skips"]
            return info
        model = copy.deepcopy(host_model).to(device)
        if arm == "flagos-eager":
            return _serve(make_step(model, model), sync, info, serve_cpu)
        step = make_step(model, torch.compile(model))
        if serve_cpu is not None:
            return _serve(step, sync, info, serve_cpu)
        start = time.perf_counter()
        info["losses"] = [float(step(i)) for i in range(steps)]  # the first step compiles
        sync()
        info["first_steps_s"] = round(time.perf_counter() - start, 2)
        if save:
            torch.save(torch.cat([p.detach().reshape(-1).cpu() for p in model.parameters()]), save)
    return info


CONF: dict[str, str] = {}  # FLAGOS_BACKEND_CONFIG for the flagos arms (main: --conf)


def _command(
    arm: str,
    reference: str,
    steps: int,
    *,
    serve_cpu: int | None = None,
    math_attention: bool = False,
    tiny: bool = False,
    save: str | None = None,
) -> tuple[list[str], dict]:
    env = dict(os.environ)
    if arm.startswith("flagos"):
        env.update(CONF)
    else:
        env.pop("FLAGOS_AUTOLOAD", None)  # the reference never loads torch_fl
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    cmd = [sys.executable, os.path.abspath(__file__), "run", "--arm", arm, "--device", reference, "--steps", str(steps)]
    cmd += ["--serve-cpu", str(serve_cpu)] * (serve_cpu is not None)
    cmd += ["--math-attention"] * math_attention + ["--tiny"] * tiny + (["--save", save] if save else [])
    return cmd, env


def child(arm: str, reference: str, steps: int, **options) -> dict:
    cmd, env = _command(arm, reference, steps, **options)
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"arm": arm, "error": [f"no result within {CHILD_TIMEOUT_S} s"]}
    if proc.returncode != 0:
        return {"arm": arm, "error": (proc.stderr or proc.stdout).strip().splitlines()[-30:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _failed(*results: dict) -> bool:
    bad = [r for r in results if "error" in r]
    for r in bad:
        print(f"{r['arm']} failed:\n  " + "\n  ".join(r["error"]))
    return bool(bad)


def check_numbers(reference: str, tiny: bool, scratch: str) -> int:
    import torch  # never torch_fl: this process only reads the children's files

    ref_name = f"compiled {reference}"
    files = {k: os.path.join(scratch, f"{k}.pt") for k in ("ref", "default", "flagos")}
    # the cold compiles run side by side; these numbers need no quiet GPU
    with concurrent.futures.ThreadPoolExecutor() as pool:
        jobs = [
            pool.submit(child, "ref-compiled", reference, 6, math_attention=True, tiny=tiny, save=files["ref"]),
            pool.submit(child, "ref-compiled", reference, 6, tiny=tiny, save=files["default"]),
            pool.submit(child, "flagos-compiled", reference, 6, tiny=tiny, save=files["flagos"]),
            pool.submit(child, "flagos-reduce-overhead", reference, 6, tiny=tiny),
        ]
        ref, default, got, ro = (job.result() for job in jobs)
    if _failed(ref, default, got, ro):
        return 1
    print(
        f"flagos runtime {got['flagos_runtime']}, reference {reference}, torch {got['torch']}; flagos routes off "
        f"native: {', '.join(got['off_native']) or 'none'}"
    )

    def loss_diff(a: dict, b: dict) -> float:
        return max(abs(x - y) / max(abs(x), 1e-12) for x, y in zip(a["losses"], b["losses"], strict=True))

    params = {k: torch.load(f) for k, f in files.items()}

    def param_diff(a: str, b: str) -> float:
        return float((params[a] - params[b]).norm() / params[a].norm())

    for r, label in ((ref, f"{ref_name} (math attention)"), (default, ref_name), (got, "compiled flagos")):
        print(
            f"  losses {label:34s} {' '.join(f'{v:.6f}' for v in r['losses'])}  (compile + 6 steps "
            f"{r['first_steps_s']} s)"
        )
    control = param_diff("ref", "default")
    loss, param = loss_diff(ref, got), param_diff("ref", "flagos")
    param_bar = max(PARAM_BAR, 2 * control)
    ok = loss <= LOSS_BAR and param <= param_bar
    print(
        f"numbers: compiled flagos vs {ref_name} (math attention), 6 AdamW steps: loss rel diff {loss:.2e} "
        f"(bar {LOSS_BAR:.0e}), params rel L2 diff {param:.2e} (bar {param_bar:.1e}; {ref_name} math vs its "
        f"default attention: loss {loss_diff(ref, default):.2e}, params {control:.2e}, max |dp| "
        f"{float((params['ref'] - params['flagos']).abs().max()):.2e}): {'MATCH' if ok else 'MISMATCH'}"
    )

    return int(not ok) | check_reduce_overhead(reference, got, ro)


def check_reduce_overhead(reference: str, compiled: dict, ro: dict) -> int:
    """On a GPU vendor the 6 steps under mode="reduce-overhead" run through flagos graphs, with no cudagraph
    skip, and match the compiled flagos losses; on the emulation they are refused with the documented message."""
    refusal = ro.get("refusal")
    if reference == "cpu":
        refused = bool(refusal and refusal["ours"] and "CUDA or DCU" in refusal["message"])
        print(
            f"reduce-overhead: {'refused as documented' if refused else 'FAIL (not the documented refusal)'}: "
            f"{(refusal or {}).get('message', 'it ran')[:160]}"
        )
        return int(not refused)
    if refusal is not None:
        print(f"reduce-overhead: FAIL, raised {refusal['raised']}: {refusal['message'][:300]}")
        return 1
    diff = max(abs(x - y) / max(abs(x), 1e-12) for x, y in zip(compiled["losses"], ro["losses"], strict=True))
    ok = diff <= LOSS_BAR and ro["cudagraph_skips"] == 0
    print(
        f"reduce-overhead: 6 steps through flagos graphs, losses {' '.join(f'{v:.6f}' for v in ro['losses'])}; "
        f"rel diff to compiled flagos {diff:.2e} (bar {LOSS_BAR:.0e}), cudagraph skips {ro['cudagraph_skips']}: "
        f"{'MATCH' if ok else 'FAIL'}"
    )
    return int(not ok)


def check_time(reference: str, pairs: int, tiny: bool) -> int:
    lockstep = _lockstep()
    arms = {"flagos": "flagos-compiled", "eager": "flagos-eager", "ref": "ref-compiled", "ref-again": "ref-compiled"}
    cpu = max(os.sched_getaffinity(0))  # every arm is timed on this one CPU
    ratios: dict[str, list[float]] = {"flagos": [], "eager": [], "ref-again": []}
    ms: dict[str, list[float]] = {k: [] for k in arms}
    for number in range(pairs):
        children = {key: _command(arm, reference, 0, serve_cpu=cpu, tiny=tiny) for key, arm in arms.items()}
        try:
            with lockstep.Group(children, CHILD_TIMEOUT_S) as group:
                rounds = group.rounds(ROUNDS, TURN_STEPS)
        except lockstep.LockstepError as exc:
            print(f"time, set {number + 1} failed: {exc}")
            return 1
        med = [{k: statistics.median(t) for k, t in r.items()} for r in rounds]
        for k in arms:
            ms[k] += [m[k] for m in med]
        for k in ratios:
            ratios[k] += [m[k] / m["ref"] for m in med]
        print(
            f"  set {number + 1}: ms/step compiled flagos {statistics.median(m['flagos'] for m in med):.3f}, "
            f"eager flagos {statistics.median(m['eager'] for m in med):.3f}, compiled {reference} "
            f"{statistics.median(m['ref'] for m in med):.3f}, "
            f"again {statistics.median(m['ref-again'] for m in med):.3f}; "
            f"per round compiled flagos / compiled {reference} "
            f"{statistics.median(m['flagos'] / m['ref'] for m in med):.3f}, A/A "
            f"{statistics.median(m['ref-again'] / m['ref'] for m in med):.3f}"
        )
    ratio, aa = statistics.median(ratios["flagos"]), statistics.median(ratios["ref-again"])
    speedup = statistics.median(e / f for e, f in zip(ratios["eager"], ratios["flagos"], strict=True))
    noise = max(aa, 1 / aa)
    q = statistics.quantiles(ratios["flagos"], n=4) if len(ratios["flagos"]) > 1 else [ratio, ratio, ratio]
    print(
        f"time: {pairs} sets x {ROUNDS} rounds, median ms/step: compiled flagos {statistics.median(ms['flagos']):.3f}, "
        f"compiled {reference} {statistics.median(ms['ref']):.3f}, again {statistics.median(ms['ref-again']):.3f}, "
        f"eager flagos {statistics.median(ms['eager']):.3f}"
    )
    print(
        f"time: compiled flagos / compiled {reference}, per round = {ratio:.3f} (quartiles {q[0]:.3f} to {q[2]:.3f}); "
        f"A/A control compiled {reference} again / compiled {reference} = {aa:.3f}; eager flagos / compiled flagos "
        f"= {speedup:.2f}x"
    )
    if tiny:
        print("time: not judged at --tiny (a dry run of the script)")
        return 0
    if speedup <= 1.0:
        verdict, status = "FAIL (compiled flagos is not faster than eager flagos)", 1
    elif ratio > BAR * noise:
        verdict, status = f"FAIL (above {BAR:.2f}x even widened by the A/A spread to {BAR * noise:.3f})", 1
    elif noise > BAR:
        # a spread wider than the margin cannot show the bar met: say so rather than pass
        verdict, status = f"INCONCLUSIVE (the A/A spread {noise:.3f} exceeds the {BAR:.2f}x margin; rerun)", 2
    elif ratio > BAR:
        verdict, status = f"FAIL (above {BAR:.2f}x)", 1
    else:
        verdict, status = f"met (bar {BAR:.2f}x)", 0
    print(f"time: {verdict}")
    return status


def check_all(pairs: int, tiny: bool) -> int:
    runtime = os.environ.get("FLAGOS_ACCELERATOR", "cpu").strip() or "cpu"
    reference = "cuda" if runtime in ("cuda", "dcu") else "cpu"  # HIP builds of torch call their GPUs cuda too
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/torch-fl-compile-check-inductor")
    size = TINY if tiny else FULL
    print(
        f"compile check: {size['layers']}-layer TransformerEncoder d_model {size['d_model']}, {size['heads']} "
        f"heads, ffn {size['ffn']}, seq {size['seq']}, batch {size['batch']}, AdamW; Inductor cache "
        f"{os.environ['TORCHINDUCTOR_CACHE_DIR']}"
    )
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="compile-check-") as scratch:
        status = check_numbers(reference, tiny, scratch)
    print(f"  ({time.perf_counter() - start:.0f} s so far)")
    status |= check_time(reference, pairs, tiny)
    word = "PASS" if status == 0 else "INCONCLUSIVE" if status == 2 else "FAIL"
    print(f"compile check: {word} ({time.perf_counter() - start:.0f} s)")
    return status


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument(
        "--arm", required=True, choices=["flagos-compiled", "ref-compiled", "flagos-eager", "flagos-reduce-overhead"]
    )
    r.add_argument("--device", default="cuda", help="the reference arm's device (cuda, or cpu beside the emulation)")
    r.add_argument("--steps", type=int, default=6)
    r.add_argument("--serve-cpu", type=int, help="after the warm-up, serve lockstep turns timed on this CPU")
    r.add_argument("--math-attention", action="store_true", help="scaled_dot_product_attention on its math kernels")
    r.add_argument("--tiny", action="store_true")
    r.add_argument("--save", help="write the parameters after the steps here (torch.save of one flat tensor)")
    a = sub.add_parser("all")
    a.add_argument("--pairs", type=int, default=5, help="lockstep sets (one process per arm in each)")
    a.add_argument(
        "--conf",
        choices=["native", "shipped"],
        default="native",
        help="flagos arms on an every-op-native conf (default: what the reference computes) or on the "
        "shipped vendor conf (its provider routes stay ATen calls in the compiled graph)",
    )
    a.add_argument("--tiny", action="store_true", help="a small model: a CPU-emulation dry run of this script")
    args = p.parse_args()
    if args.cmd == "run":
        result = run(args.arm, args.device, args.steps, args.serve_cpu, args.math_attention, args.tiny, args.save)
        print(json.dumps(result))
        return 0
    if args.pairs < 1:
        p.error("--pairs must be at least 1")
    if args.conf == "native":
        fd, native_conf = tempfile.mkstemp(prefix="compile-check-", suffix=".conf")
        with os.fdopen(fd, "w") as f:
            f.write("default = native\n")
        CONF["FLAGOS_BACKEND_CONFIG"] = native_conf
    try:
        return check_all(args.pairs, args.tiny)
    finally:
        if CONF:
            os.unlink(CONF["FLAGOS_BACKEND_CONFIG"])


if __name__ == "__main__":
    sys.exit(main())
