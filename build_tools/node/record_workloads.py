"""Record the ATen calls of real workloads as qualification samples (torch_fl.qualify.recording).

    python record_workloads.py --samples DIR [--provider flaggems] [--resume RUN_DIR] [--extend REPORT] [--tiny]

Every model of the model suite (tests/models: one training step, its evaluation and, for language models, a
greedy generate) and the real-size workloads of real_models.py (one step each, after one untimed step so the
optimizer's state exists) run on flagos with every operator native, under the recorder. Calls with the same
signature are kept once per workload. ``python -m torch_fl qualify --samples DIR`` then runs them beside OpInfo's.
With ``--resume``, a new machine that carries a run's events records only the operators they leave pending: the
workloads still run whole, but saving the other operators' calls is most of the recording's time. The functional
twins of the recorded ``out=`` and in-place operators are recorded too: those borrow their samples. With
``--extend`` (and the run's ``--dtypes``), the operators an earlier report finished are left out as well, as
``qualify --extend`` carries them (torch_fl/qualify/extend.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import neighbours

neighbours.reach("models")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=Path, required=True)
    p.add_argument("--provider", default=None, help="record only the operators this provider claims")
    p.add_argument("--tiny", action="store_true", help="small sizes (a CPU-emulation dry run)")
    p.add_argument("--skip-if-recorded", action="store_true", help="do nothing when DIR already holds a recording")
    p.add_argument("--resume", type=Path, default=None, help="a qualify run directory: only its pending operators")
    p.add_argument("--extend", type=Path, default=None, help="a report qualify --extend carries: not its finished ones")
    p.add_argument("--dtypes", default="", help="the dtypes the qualify run asks for (with --extend)")
    p.add_argument("--retime", action="store_true", help="with --extend: as qualify --retime, older timings run")
    p.add_argument("--again", default="", help="with --extend: as qualify --again, these operators run again")
    args = p.parse_args()
    stamp = args.samples / ".workloads-recorded"
    if args.skip_if_recorded and stamp.is_file():
        print(f"record: {args.samples} already holds the workloads' calls", flush=True)
        return 0
    native = args.samples.parent / "record-native.conf"
    native.parent.mkdir(parents=True, exist_ok=True)
    native.write_text("default = native\n")
    os.environ["FLAGOS_BACKEND_CONFIG"] = str(native)

    import model_zoo
    import real_models
    import torch

    import torch_fl
    from torch_fl.qualify import recording

    ops = claimed = None
    if args.provider:
        from torch_fl.qualify.runner import qualifiable

        # what qualify runs: an operator the router never sees has no calls to record
        ops = claimed = set(qualifiable(torch_fl.providers.providers()[args.provider]))
    if args.resume and ops is not None:
        from torch_fl.qualify.runner import finished, read_events

        ops -= finished(read_events(args.resume / "events.jsonl"))
    if args.extend and ops is not None:
        from torch_fl.qualify import extend, report

        provider = torch_fl.providers.providers()[args.provider]
        meta = {"provider": args.provider, "version": provider.version(), "accelerator": torch_fl.accelerator()}
        base = extend.read(args.extend, report.key({**meta, "torch": torch.__version__}))
        dtypes = [d for d in args.dtypes.split(",") if d]
        again = [o.strip() for o in args.again.split(",") if o.strip()]  # read as qualify --again reads it
        ops -= set(extend.carried(base, sorted(ops), dtypes, args.retime, again=again))
    if ops is not None:
        from torch_fl.qualify.generate import twin

        ops |= {t for op in ops if (t := twin(op))}  # an out= or in-place operator borrows its twin's samples
    if (args.resume or args.extend) and ops is not None:
        print(f"record: {len(ops)} operators pending in {args.resume or args.extend} or their twins", flush=True)
        if not ops:  # a finished run checks its confs: no workload needs to run for a recording
            return 0
    device = "flagos"
    for name in model_zoo.MODELS:
        start = time.monotonic()
        model = model_zoo.build(name).to(device)
        with recording(args.samples, f"model:{name}", ops):
            model_zoo.run_model(name, model, device, steps=1)
        print(f"record: model:{name} {time.monotonic() - start:.1f} s", flush=True)
    for name, build in real_models.WORKLOADS.items():
        start = time.monotonic()
        step, _ = build(device, args.tiny)
        step()
        with recording(args.samples, f"workload:{name}", ops):
            step()
        torch_fl.flagos.synchronize()
        print(f"record: workload:{name} {time.monotonic() - start:.1f} s", flush=True)
        del step
        torch.cuda.empty_cache() if torch_fl.accelerator() in ("cuda", "dcu") else None
    recorded = sorted(p.name.removesuffix(".pt") for p in args.samples.glob("*.pt"))
    # the provider's operators these workloads call, which its qualification runs first (qualify --first)
    called = [op for op in recorded if claimed is None or op in claimed]
    stamp.write_text(json.dumps({"operators": called}) + "\n")
    print(f"record: samples of {len(recorded)} operators under {args.samples}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
