"""DTensor and tensor-parallel parts of the sharded suite (sharded_worker.py runs them on every rank)."""

from __future__ import annotations

import sharded_models as models
import torch
import worker
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

PLACEMENTS = {"Shard(0)": Shard(0), "Shard(1)": Shard(1), "Shard(3)": Shard(3), "Replicate()": Replicate()}
STYLES = {"colwise": ColwiseParallel, "rowwise": RowwiseParallel}


def distribute(host: torch.Tensor, mesh: DeviceMesh, placement: str) -> DTensor:
    return distribute_tensor(host.to(worker.DEV), mesh, [PLACEMENTS[placement]])


def part_dtensor(mesh: DeviceMesh) -> dict[str, str]:
    """Every placement change between Shard, Replicate and Partial, in float32 and bfloat16, with rows that do and
    do not split evenly: name -> "ok" or what went wrong. Inputs are small integers, so every sum is exact."""
    rank, world = worker.RANK, worker.WORLD
    verdicts: dict[str, str] = {}

    def check(name: str, got: DTensor, local_want: torch.Tensor, full_want: torch.Tensor) -> None:
        try:
            assert got.to_local().device == worker.DEV, f"local shard on {got.to_local().device}"
            torch.testing.assert_close(got.to_local().cpu(), local_want, rtol=0, atol=0)
            torch.testing.assert_close(got.full_tensor().cpu(), full_want, rtol=0, atol=0)
            verdicts[name] = "ok"
        except Exception as exc:
            verdicts[name] = f"{type(exc).__name__}: {exc}"

    for dtype in (torch.float32, torch.bfloat16):
        for rows in (4 * world, 4 * world + 1):  # even, and uneven (torch.chunk's split: the last rank gets less)
            tag = f"{str(dtype).removeprefix('torch.')}/{rows}rows"
            full = (torch.arange(rows * 6) % 11).reshape(rows, 6).to(dtype)
            rows_of, cols_of = full.chunk(world, 0), full.chunk(world, 1)
            mine = rows_of[rank] if rank < len(rows_of) else full[:0]
            by_rows = distribute(full, mesh, "Shard(0)")
            check(f"{tag}/distribute Shard(0)", by_rows, mine, full)
            check(f"{tag}/Shard(0)->Replicate (all_gather)", by_rows.redistribute(mesh, [Replicate()]), full, full)
            check(f"{tag}/Shard(0)->Shard(1) (all_to_all)", by_rows.redistribute(mesh, [Shard(1)]), cols_of[rank], full)
            check(
                f"{tag}/Replicate->Shard(1) (local chunk)",
                distribute(full, mesh, "Replicate()").redistribute(mesh, [Shard(1)]),
                cols_of[rank],
                full,
            )
            # rank r holds (r + 1) * full as its partial sum: the total is full * world * (world + 1) / 2
            partial = DTensor.from_local(((rank + 1) * full).to(worker.DEV), mesh, [Partial()])
            total = full * (world * (world + 1) // 2)
            check(f"{tag}/Partial->Replicate (all_reduce)", partial.redistribute(mesh, [Replicate()]), total, total)
            total_rows = total.chunk(world, 0)
            check(
                f"{tag}/Partial->Shard(0) (reduce_scatter)",
                partial.redistribute(mesh, [Shard(0)]),
                total_rows[rank] if rank < len(total_rows) else total[:0],
                total,
            )
    return verdicts


def part_tp(case: str, mesh: DeviceMesh) -> dict:
    """The case's model parallelized with its plan, one forward, backward and SGD step on the whole input: the
    output, the whole gradients and the whole parameters after the step, and how each parameter was placed."""
    build, make_input, plan = models.TP_CASES[case]
    model = parallelize_module(build().to(worker.DEV), mesh, {name: STYLES[style]() for name, style in plan})
    out = models.tp_step(model, make_input().to(worker.DEV))
    return {
        "output": out.float().cpu().tolist(),
        "grads": {n: p.grad.full_tensor().cpu().tolist() for n, p in model.named_parameters()},
        "params": {n: p.full_tensor().cpu().tolist() for n, p in model.named_parameters()},
        "placements": {n: str(p.placements) for n, p in model.named_parameters()},
    }
