"""Time one training step (forward, backward, optimizer step) of a model of the suite; one JSON line per process.

    python tests/models/steptime.py --device cuda                 # the largest model of the suite
    python tests/models/steptime.py --device flagos --model vit --steps 50
    python tests/models/steptime.py --compare cuda.jsonl flagos.jsonl   # medians over processes, and the ratio

Processes differ more than a router costs, so run several per arm (five or more) and compare medians of
their medians (--compare). The model is built on the CPU with the suite's seed and moved to --device; the
batch is moved once before timing; each step ends with the device's synchronize. Only --device flagos imports
torch_fl (for any other device torch's device autoload is switched off).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path


def _compare(files: list[Path]) -> int:
    """Median of the per-process ms/step of each file, and each file's ratio to the first."""
    medians = {}
    for path in files:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip().startswith("{")]
        if not rows:
            raise SystemExit(f"steptime.py: no JSON lines in {path}")
        models = {r["model"] for r in rows}
        if len(models) != 1:
            raise SystemExit(f"steptime.py: {path} mixes models {sorted(models)}")
        medians[path] = statistics.median(r["ms_per_step"] for r in rows)
        print(
            json.dumps(
                {
                    "file": str(path),
                    "device": rows[0]["device"],
                    "model": rows[0]["model"],
                    "processes": len(rows),
                    "median_ms_per_step": round(medians[path], 4),
                }
            )
        )
    base = files[0]
    for path in files[1:]:
        print(json.dumps({"ratio": f"{path} / {base}", "value": round(medians[path] / medians[base], 4)}))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", help="flagos, cuda or cpu (an index may follow: cuda:1)")
    ap.add_argument("--model", default="", help="a model of the suite (default: the one with most parameters)")
    ap.add_argument("--steps", type=int, default=30, help="timed steps (default 30)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps first (default 5)")
    ap.add_argument("--compare", nargs="+", type=Path, metavar="JSONL", help="summarize saved runs instead")
    args = ap.parse_args(argv)
    if args.compare:
        return _compare(args.compare)
    if not args.device:
        ap.error("--device is required")
    if args.steps < 1 or args.warmup < 0:
        ap.error("--steps must be >= 1 and --warmup >= 0")

    kind = args.device.split(":")[0]
    if kind != "flagos":
        os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    import model_zoo as zoo
    import torch

    if kind == "flagos":
        import torch_fl

        sync = torch_fl.flagos.synchronize
        accelerator = torch_fl.accelerator()
    elif "torch_fl" in sys.modules:
        raise SystemExit("steptime.py: torch_fl was imported in a plain-device process")
    elif kind == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit(f"steptime.py: --device {args.device}, but this torch ({torch.__version__}) has no GPU")
        sync, accelerator = torch.cuda.synchronize, "cuda"
    else:
        sync, accelerator = (lambda: None), kind
    device = torch.device(args.device)

    name = args.model or max(zoo.MODELS, key=lambda n: zoo.sharing(zoo.build(n))["elements"])
    if name not in zoo.MODELS:
        raise SystemExit(f"steptime.py: unknown model {name!r}; the suite has {sorted(zoo.MODELS)}")
    spec = zoo.MODELS[name]
    model = zoo.build(name).to(device).train()
    opt = spec.optimizer(model.parameters())
    batch = {k: v.to(device) for k, v in spec.batch(0).items()}

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        spec.loss(model, batch).backward()
        opt.step()
        sync()

    for _ in range(args.warmup):
        step()
    times = []
    for _ in range(args.steps):
        t = time.perf_counter()
        step()
        times.append((time.perf_counter() - t) * 1e3)
    print(
        json.dumps(
            {
                "device": str(device),
                "accelerator": accelerator,
                "model": name,
                "parameters": zoo.sharing(model)["elements"],
                "steps": args.steps,
                "warmup": args.warmup,
                "ms_per_step": round(statistics.median(times), 4),
                "ms_min": round(min(times), 4),
                "ms_max": round(max(times), 4),
                "torch": torch.__version__,
                "torch_fl_imported": "torch_fl" in sys.modules,
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
