"""FSDP2 parts of the sharded suite (sharded_worker.py runs them on every rank): the transformer sharded layer by
layer, trained in float32, in bfloat16 mixed precision and with its shards offloaded to the host; FSDP2 with
tensor parallelism on a 2-D mesh; and a rank that dies under FSDP2."""

from __future__ import annotations

import os
import time
from datetime import timedelta

import sharded_models as models
import torch
import torch.distributed as dist
import tp_parts
import worker
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor.parallel import parallelize_module

PARAM_DTYPE = {"fsdp-fp32": None, "fsdp-bf16": torch.bfloat16, "fsdp-offload": None}


def shard(model: torch.nn.Module, mesh: DeviceMesh, **policy) -> torch.nn.Module:
    """fully_shard each encoder layer, then the root: one all-gather and one reduce-scatter per layer."""
    for layer in model.layers:
        fully_shard(layer, mesh=mesh, **policy)
    return fully_shard(model, mesh=mesh, **policy)


def full_params(model: torch.nn.Module) -> dict[str, list]:
    """Every parameter whole (all-gathered from its shards), as lists of float32 values."""
    return {n: p.full_tensor().float().cpu().tolist() for n, p in model.named_parameters()}


def part_fsdp(name: str, mesh: DeviceMesh) -> dict:
    """STEPS SGD steps of the sharded transformer on this rank's share; the losses, the whole parameters and
    what the policy did (the dtype the layers computed in, where the shards live)."""
    policy: dict = {}
    if PARAM_DTYPE[name] is not None:
        policy["mp_policy"] = MixedPrecisionPolicy(param_dtype=PARAM_DTYPE[name], reduce_dtype=torch.float32)
    if name == "fsdp-offload":
        policy["offload_policy"] = CPUOffloadPolicy()
    model = shard(models.transformer().to(worker.DEV), mesh, **policy)
    seen: dict[str, str] = {}

    def note_dtype(module: torch.nn.Module, args: tuple, out: torch.Tensor) -> None:
        seen.setdefault("compute_dtype", str(module.weight.dtype))

    model.layers[0].linear1.register_forward_hook(note_dtype)
    losses = models.train(model, worker.RANK, worker.WORLD, worker.DEV)
    local = next(iter(model.parameters())).to_local()
    return {
        "losses": losses,
        "params": full_params(model),
        **seen,
        "shard_device": local.device.type,
        "shard_pinned": local.is_pinned(),
        "shard_dtype": str(local.dtype),
    }


def part_fsdp_tp(mesh: DeviceMesh) -> dict:
    """A 2-D mesh (data parallel x tensor parallel, 2 x 2 on 4 ranks, 1 x 1 on one): the MLP tensor-parallel over
    "tp", then fully_shard over "dp", trained on each data-parallel rank's share. The whole parameters, the
    losses and the placements (each weight sharded over both dimensions)."""
    tp = 2 if worker.WORLD % 2 == 0 else 1
    mesh_2d = init_device_mesh("flagos", (worker.WORLD // tp, tp), mesh_dim_names=("dp", "tp"))
    model = models.mlp().to(worker.DEV)
    parallelize_module(model, mesh_2d["tp"], {name: tp_parts.STYLES[style]() for name, style in models.MLP_PLAN})
    fully_shard(model, mesh=mesh_2d["dp"])
    losses = models.train(
        model,
        mesh_2d["dp"].get_local_rank(),
        worker.WORLD // tp,
        worker.DEV,
        make_batch=models.mlp_batch,
        loss_fn=models.mlp_loss,
    )
    return {
        "losses": losses,
        "params": full_params(model),
        "placements": {n: str(p.placements) for n, p in model.named_parameters()},
    }


def part_dead_rank(mesh: DeviceMesh) -> dict:
    """A sharded model on a group with a 5 s timeout; after one good step the last rank exits, and the others'
    next forward must fail within the timeout, naming the collective FSDP2 waited on."""
    group = dist.new_group(list(range(worker.WORLD)), timeout=timedelta(seconds=5))
    model = shard(models.transformer().to(worker.DEV), DeviceMesh.from_group(group, "flagos"))
    x = models.batch(0)[:2].to(worker.DEV)
    models.loss_of(model, x).backward()
    dist.barrier(group)
    if worker.RANK == worker.WORLD - 1:
        os._exit(0)  # dies without a word, as a crashed rank does
    start = time.monotonic()
    try:
        models.loss_of(model, x).backward()
        error = None
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    return {"error": error, "seconds": time.monotonic() - start}
