"""One rank of the sharded suite: FSDP2, DTensor, tensor parallelism and distributed checkpoints on flagos.

    python sharded_worker.py PART[,PART...] OUT_DIR     (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set)

The parts run in order in one process group over a 1-D flagos mesh of every rank, and this rank's results are
rewritten after each part, so a rank that dies in a later part keeps what it saw before. FLAGOS_DIST_CKPT names
the folder of the checkpoint parts. Parts: fsdp-fp32, fsdp-bf16, fsdp-offload, fsdp-tp-2d, dtensor, tp-mlp,
tp-attention,
errors, dcp-save, dcp-resume, dcp-interrupted, dead-rank (last: its last rank exits).
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path

import dcp_parts
import fsdp_parts
import torch
import torch.distributed as dist
import tp_parts
import worker
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh


def part_errors(mesh: DeviceMesh) -> dict:
    """Bad input: a mesh larger than the world, a placement past the tensor's dimensions. Each error's text."""
    out = {}
    for case, make in (
        ("mesh-larger-than-world", lambda: init_device_mesh("flagos", (2 * worker.WORLD,))),
        ("shard-past-the-last-dim", lambda: tp_parts.distribute(torch.ones(4, 4), mesh, "Shard(3)")),
    ):
        try:
            make()
            out[case] = None
        except Exception as exc:
            out[case] = f"{type(exc).__name__}: {exc}"
    return out


PARTS = {
    **{name: (lambda mesh, name=name: fsdp_parts.part_fsdp(name, mesh)) for name in fsdp_parts.PARAM_DTYPE},
    "fsdp-tp-2d": fsdp_parts.part_fsdp_tp,
    "dtensor": tp_parts.part_dtensor,
    "tp-mlp": lambda mesh: tp_parts.part_tp("mlp", mesh),
    "tp-attention": lambda mesh: tp_parts.part_tp("attention", mesh),
    "errors": part_errors,
    "dcp-save": dcp_parts.part_save,
    "dcp-resume": dcp_parts.part_resume,
    "dcp-interrupted": dcp_parts.part_interrupted,
    "dead-rank": fsdp_parts.part_dead_rank,
}


def main() -> None:
    worker.setup_rank()
    parts, out_dir = sys.argv[1].split(","), Path(sys.argv[2])
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        raise SystemExit(f"unknown parts {unknown}; known: {sorted(PARTS)}")
    mesh = init_device_mesh("flagos", (worker.WORLD,))  # creates the default group: cpu:gloo,flagos:flagos
    results: dict = {"default_backend": str(dist.get_backend_config())}
    for part in parts:
        print(f"rank {worker.RANK}: {part}", flush=True)
        start = time.monotonic()
        try:
            results[part] = PARTS[part](mesh)
        except Exception:  # a verdict per part: one failure must not hide the others
            results[part] = {"exception": traceback.format_exc()[-3000:]}
        results.setdefault("seconds", {})[part] = round(time.monotonic() - start, 2)
        worker.write_result(out_dir, results)
    os._exit(0)  # skip interpreter teardown: a dead peer's group must not hold this rank at exit


if __name__ == "__main__":
    main()
