"""A provider-first conf against all-native on real workloads, in one process: numbers, coverage and step time.

    python flaggems_first.py --conf QUALIFIED.conf [--tuned TUNED.conf] [--steps 4] [--rounds 8] [--tiny]
                             [--workloads llama-124m-bf16,resnet50-bf16,encoder-d256,encoder-d1024] [--import MODULE]

Both arms run on flagos, so they share a process: the route table is switched at run time (FLAGOS_BACKEND_CONFIG,
then torch_fl.reload_routes), and what the process does to both cancels. For each workload of real_models.py:

- numbers: the model built from one seed trains --steps steps on each conf; the losses and, after the steps, every
  parameter are compared (relative difference; bar 2e-2 for these bf16-autocast models, the model suite's).
- coverage: in one more step on the provider conf, the router's counters give the share of routed calls that ran
  on the provider (path "provider"), and the operators that took the most native calls; the replay's counters,
  the provider calls it served, and the operators whose provider calls ran in the provider's Python most (each
  pays its host cost: FlagGems' own is tens of µs a call).
- time: three arms, each with its own copy of the model: native, the provider conf, native again (the A/A
  control), and the tuned conf when given; --rounds rounds of one synchronized turn of 3 steps per arm, the arm
  order rotated every round. A turn's figure is its median step; ratios to native are taken within a round and
  their median over the rounds is reported, with the A/A beside it (--json keeps every round's ratio).

Exit 1 when a workload's numbers miss the bar or a step raises.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import time
from pathlib import Path

BAR = 2e-2
TURN = 3


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--conf", type=Path, required=True)
    p.add_argument("--tuned", type=Path, default=None)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--workloads", default="")
    p.add_argument("--json", type=Path, default=None, help="also write the results here")
    p.add_argument("--import", dest="imports", action="append", default=[], help="a module that registers a provider")
    args = p.parse_args()
    native = args.conf.parent / "all-native.conf"
    native.write_text("default = native\n")
    os.environ["FLAGOS_BACKEND_CONFIG"] = str(native)

    import real_models
    import torch

    import torch_fl

    for module in args.imports:
        __import__(module)
    confs = {"native": native, "provider": args.conf.resolve(), "native again": native}
    if args.tuned:
        confs["tuned"] = args.tuned.resolve()

    def use(arm: str) -> None:
        os.environ["FLAGOS_BACKEND_CONFIG"] = str(confs[arm])
        torch_fl.reload_routes()

    routed = collections.Counter(r.route for r in torch_fl.routes().values())
    use("provider")
    provider_routes = collections.Counter(r.route for r in torch_fl.routes().values())
    print(f"provider conf: {dict(provider_routes)} explicit routes (native conf: {dict(routed)})", flush=True)
    names = [n for n in args.workloads.split(",") if n] or list(real_models.WORKLOADS)
    status, results = 0, {}
    for name in names:
        build = real_models.WORKLOADS[name]
        entry: dict = {}
        try:
            # numbers
            losses, params = {}, {}
            for arm in ("native", "provider"):
                use(arm)
                step, model = build("flagos", args.tiny)
                losses[arm] = [float(step()) for _ in range(args.steps)]
                params[arm] = [q.detach().float().cpu() for q in model.parameters()]
                del step, model
            pairs = zip(losses["native"], losses["provider"], strict=True)
            loss_diff = max(abs(a - b) / max(abs(a), 1e-12) for a, b in pairs)
            num = sum(float((a - b).norm() ** 2) for a, b in zip(params["native"], params["provider"], strict=True))
            den = sum(float(a.norm() ** 2) for a in params["native"])
            param_diff = (num / max(den, 1e-30)) ** 0.5
            ok = loss_diff <= BAR and param_diff <= BAR
            entry.update(losses=losses, loss_rel_diff=loss_diff, param_rel_l2=param_diff, numbers_ok=ok)
            status |= 0 if ok else 1
            # coverage
            use("provider")
            step, model = build("flagos", args.tiny)
            step()
            replayed_before = {r["op"]: r["hits"] for r in torch_fl.replay.stats()}
            torch_fl._core.reset_router_counters()
            torch_fl._core.set_router_counters(True)
            step()
            torch_fl.flagos.synchronize()
            torch_fl._core.set_router_counters(False)
            replayed = {r["op"]: r["hits"] - replayed_before.get(r["op"], 0) for r in torch_fl.replay.stats()}
            rows = [r for r in torch_fl._core.router_counters() if r[1] != "copy"]
            on_provider = sum(r[2] for r in rows if r[1] == "provider")
            total = sum(r[2] for r in rows)
            native_calls, python_calls = collections.Counter(), collections.Counter()
            for op, path, calls, _ in rows:
                if path != "provider":
                    native_calls[op] += calls
                else:  # a provider call the replay did not serve ran the provider's Python: its host cost
                    python_calls[op] += calls
            for op, hits in replayed.items():
                python_calls[op] -= hits
            entry.update(
                provider_calls=on_provider,
                routed_calls=total,
                provider_share=on_provider / max(total, 1),
                top_native=native_calls.most_common(8),
                replayed_calls=sum(replayed.values()),
                top_not_replayed=[(op, n) for op, n in python_calls.most_common(8) if n > 0],
            )
            del step, model
            # time
            arms = list(confs)
            steps = {}
            for arm in arms:
                use(arm)
                steps[arm] = build("flagos", args.tiny)[0]
                steps[arm]()
            ratios = collections.defaultdict(list)
            medians = collections.defaultdict(list)
            for r in range(args.rounds):
                turn = {}
                for arm in arms[r % len(arms) :] + arms[: r % len(arms)]:
                    use(arm)
                    times = []
                    for _ in range(TURN):
                        torch_fl.flagos.synchronize()
                        t0 = time.perf_counter()
                        steps[arm]()
                        torch_fl.flagos.synchronize()
                        times.append(time.perf_counter() - t0)
                    turn[arm] = statistics.median(times)
                for arm in arms:
                    ratios[arm].append(turn[arm] / turn["native"])
                    medians[arm].append(turn[arm])
            del steps
            entry["time"] = {
                arm: {
                    "ms": statistics.median(medians[arm]) * 1e3,
                    "vs_native": statistics.median(ratios[arm]),
                    "range": [min(ratios[arm]), max(ratios[arm])],
                    "rounds": ratios[arm],  # each round's ratio, so runs on other machines can be pooled
                }
                for arm in arms
            }
        except Exception as exc:  # noqa: BLE001  (reported, and the run goes on with the next workload)
            entry["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            status = 1
        results[name] = entry
        _print(name, entry)
        if torch_fl.accelerator() in ("cuda", "dcu"):
            torch.cuda.empty_cache()
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return status


def _print(name: str, e: dict) -> None:
    if "error" in e and "losses" not in e:
        print(f"{name}: ERROR {e['error']}", flush=True)
        return
    print(
        f"{name}: numbers {'ok' if e.get('numbers_ok') else 'MISS'} (losses rel diff {e['loss_rel_diff']:.2e}, "
        f"params rel L2 {e['param_rel_l2']:.2e}; bar {BAR:g}); native losses "
        f"{[round(x, 4) for x in e['losses']['native']]}, provider {[round(x, 4) for x in e['losses']['provider']]}",
        flush=True,
    )
    if "provider_share" in e:
        top = ", ".join(f"{op} {n}" for op, n in e["top_native"])
        python = ", ".join(f"{op} {n}" for op, n in e["top_not_replayed"]) or "none"
        print(
            f"  coverage: {e['provider_calls']}/{e['routed_calls']} routed calls on the provider "
            f"({100 * e['provider_share']:.1f}%); most native calls: {top}\n"
            f"  replay: {e['replayed_calls']} of the provider's calls replayed; most in its Python: {python}",
            flush=True,
        )
    if "time" in e:
        t = e["time"]
        print(
            "  time: "
            + ", ".join(
                f"{arm} {v['ms']:.2f} ms ({v['vs_native']:.3f}x, range {v['range'][0]:.3f}-{v['range'][1]:.3f})"
                for arm, v in t.items()
            ),
            flush=True,
        )
    if "error" in e:
        print(f"  ERROR {e['error']}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
