"""Write the model suite's reference runs from a plain device, in a process without flagos.

    python tests/models/reference.py --device cuda --out reports/models-cuda.pt
    python tests/models/reference.py --compare A.pt B.pt      # the largest differences of two runs, per model
    FLAGOS_MODELS_REFERENCE=reports/models-cuda.pt FLAGOS_ACCELERATOR=cuda pytest tests/models

Each model is built on the CPU with the suite's seed (model_zoo.build), moved to --device and run exactly as
test_models.py runs it on flagos (model_zoo.run_model): losses, parameters and buffers (on the CPU), eval
outputs and generate tokens go to --out, written atomically (a temporary file beside it, then os.replace).
One process cannot do both flagos and plain-CUDA autograd, so for any device but flagos torch's device autoload
is switched off and torch_fl is never imported.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", help="torch device of the reference: cuda, cpu, cuda:1, flagos ...")
    ap.add_argument("--out", type=Path, help="file to write (torch.save)")
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"), help="print the largest differences")
    ap.add_argument("--models", default="", help="comma-separated names (default: every model of the suite)")
    args = ap.parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    if not (args.device and args.out):
        ap.error("--device and --out are required (or --compare A B)")

    flagos = args.device.split(":")[0] == "flagos"
    if not flagos:  # an installed torch_fl would otherwise be loaded by `import torch` and claim the accelerator
        os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    import model_zoo as zoo
    import torch

    if flagos:
        import torch_fl  # noqa: F401
    elif "torch_fl" in sys.modules:
        raise SystemExit("reference.py: torch_fl was imported in a plain-device process")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"reference.py: --device {args.device}, but this torch ({torch.__version__}) has no GPU")

    names = [n for n in args.models.split(",") if n] or list(zoo.MODELS)
    unknown = sorted(set(names) - set(zoo.MODELS))
    if unknown:
        raise SystemExit(f"reference.py: unknown models {unknown}; the suite has {sorted(zoo.MODELS)}")
    runs = {}
    for name in names:
        t = time.perf_counter()
        runs[name] = zoo.run_model(name, zoo.build(name).to(device), device)
        losses = ", ".join(f"{x:.6f}" for x in runs[name]["losses"].tolist())
        print(f"reference.py: {name} on {device}: losses {losses} ({time.perf_counter() - t:.1f} s)", flush=True)
    meta = {
        "device": str(device),
        "steps": zoo.STEPS,
        "torch": str(torch.__version__),  # a plain str: the file loads with weights_only=True
        "torch_fl_imported": "torch_fl" in sys.modules,
        "models": names,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(f".{args.out.name}.tmp-{os.getpid()}")
    try:
        torch.save({"meta": meta, "models": runs}, tmp)
        os.replace(tmp, args.out)
    finally:
        tmp.unlink(missing_ok=True)
    print(json.dumps({"out": str(args.out), **meta}), flush=True)
    return 0


def compare(a: Path, b: Path) -> int:
    """One JSON line per model: the largest absolute difference of losses, parameters, buffers and eval outputs
    between two runs (the A/A control of two plain-device processes)."""
    import torch

    runs = [torch.load(p, map_location="cpu", weights_only=True)["models"] for p in (a, b)]

    def diff(x: torch.Tensor, y: torch.Tensor) -> float:
        return float((x.double() - y.double()).abs().max()) if x.is_floating_point() and x.numel() else 0.0

    for name in sorted(set(runs[0]) & set(runs[1])):
        x, y = runs[0][name], runs[1][name]
        row = {"model": name, "losses": diff(x["losses"], y["losses"]), "eval": diff(x["eval"], y["eval"])}
        for kind in ("params", "buffers"):
            worst = max(((diff(x[kind][k], y[kind][k]), k) for k in x[kind]), default=(0.0, ""))
            row[kind] = worst[0]
            row[f"{kind}_worst"] = worst[1]
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
