"""all_reduce bus bandwidth of flagos tensors against plain CUDA tensors, in the same processes (nccl-tests style).

    torchrun --nproc-per-node 2 tests/distributed/bandwidth.py [--mib 256] [--iters 20] [--pairs 15]

One process group carries both: ``cuda:nccl`` for plain CUDA tensors and ``flagos:flagos`` (NCCL underneath) for
flagos tensors, so both arms share the GPUs, the processes and the moment. Each pair times ``--iters`` all_reduces
of one arm, then of the other, in alternating order; a third arm repeats plain CUDA as the A/A control. Bus
bandwidth = bytes / time * 2 (n - 1) / n. Rank 0 prints one JSON line with the medians and the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist

import torch_fl  # noqa: F401


def timed(t: torch.Tensor, iters: int) -> float:
    """Seconds per all_reduce of ``t``, over ``iters`` back-to-back calls, all ranks started together."""
    dist.barrier()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / iters


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--pairs", type=int, default=15)
    args = ap.parse_args()

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    torch.flagos.set_device(local)
    dist.init_process_group("cuda:nccl,flagos:flagos")
    n = args.mib * 2**20 // 4
    arms = {
        "cuda": torch.ones(n, device=f"cuda:{local}"),
        "flagos": torch.ones(n, device=f"flagos:{local}"),
        "cuda_again": torch.ones(n, device=f"cuda:{local}"),
    }
    for t in arms.values():  # warm-up: communicators, buffers, NVLink paths
        timed(t, 3)
    seconds: dict[str, list[float]] = {name: [] for name in arms}
    for pair in range(args.pairs):
        order = list(arms) if pair % 2 == 0 else list(reversed(arms))
        for name in order:
            seconds[name].append(timed(arms[name], args.iters))
    factor = 2 * (world - 1) / world
    nbytes = n * 4
    busbw = {name: [nbytes / s * factor / 1e9 for s in values] for name, values in seconds.items()}
    ratio = [f / c for f, c in zip(busbw["flagos"], busbw["cuda"], strict=True)]
    control = [a / c for a, c in zip(busbw["cuda_again"], busbw["cuda"], strict=True)]
    if rank == 0:
        print(
            json.dumps(
                {
                    "world": world,
                    "mib": args.mib,
                    "iters_per_sample": args.iters,
                    "pairs": args.pairs,
                    "busbw_GBps_median": {k: round(statistics.median(v), 1) for k, v in busbw.items()},
                    "busbw_GBps_range": {k: [round(min(v), 1), round(max(v), 1)] for k, v in busbw.items()},
                    "flagos_over_cuda_median": round(statistics.median(ratio), 4),
                    "flagos_over_cuda_range": [round(min(ratio), 4), round(max(ratio), 4)],
                    "aa_control_median": round(statistics.median(control), 4),
                    "aa_control_range": [round(min(control), 4), round(max(control), 4)],
                }
            ),
            flush=True,
        )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
