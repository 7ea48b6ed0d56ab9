"""The profile diff: one workload's steps profiled on flagos and on the plain vendor device, each in its own process,
compared op by op and kernel by kernel (issue 52).

    python -m harness.profdiff [--models qwen2-tied152k,mistral-sliding] [--steps 3] [--tiny] [--out DIR]
    python -m harness.zoo ... --profdiff MODEL[,MODEL]          the same inside the zoo's run, after its timing

The workloads are the model zoo's eager training steps (zoo_models.py). The arms are the zoo's processes
(zoo_arm.py): flagos, plain, and plain again, whose diff against plain is the control: on a deterministic device it
lists no kernel and no op of its own, and its time differences are the noise of the profile. Each arm sets the
model up (built on the host from one seed, moved, trained a few steps), then profiles ``--steps`` steps under
torch.profiler (profile_ops.py); the arms profile one after the other.

Per ATen op, per step: calls, self host µs, self device µs and kernels launched on each side, flagos minus plain,
sorted by the gap (device µs where the device is recorded, else calls, then host µs); every kernel name one side
launches and the other does not, with its launches and the ops that launched it; kernel names both launch a
different number of times; and the totals. Beside the CPU emulation the plain arm runs on the host, so there is
no device time on either side (profile_ops.py says why flagos is profiled with host activity only there): the
diff then compares the ops and their host time only.

Writes profdiff.json and profdiff.md to --out (default reports/<accelerator>/zoo). Exits 1 when an arm fails.
"""

from __future__ import annotations

import sys

from . import command_line
from .opdiff import STEPS


def main(argv: list[str] | None = None) -> int:
    from . import zoo, zoo_models

    p = command_line.parser("profdiff", __doc__)
    p.add_argument("--models", default="qwen2-tied152k", help=f"among {', '.join(zoo_models.ARCHS)}")
    p.add_argument("--steps", type=int, default=STEPS, help=f"profiled steps per arm (default {STEPS})")
    p.add_argument("--no-control", action="store_true", help="skip the plain-again arm (the A/A diff)")
    p.add_argument("--tiny", action="store_true", help="tiny models (the default beside the CPU emulation)")
    p.add_argument("--out", help="report directory (default reports/<accelerator>/zoo)")
    args = p.parse_args(argv)
    zoo_args = ["--modes", "none", "--profdiff", args.models, "--profile-steps", str(args.steps)]
    zoo_args += ["--arms", "flagos,plain" if args.no_control else "flagos,plain,plain-again"]
    zoo_args += ["--tiny"] * args.tiny + (["--out", args.out] if args.out else [])
    return zoo.main(zoo_args)


if __name__ == "__main__":
    sys.exit(main())
