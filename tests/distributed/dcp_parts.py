"""Distributed-checkpoint parts of the sharded suite: an FSDP2 model and its optimizer saved with
torch.distributed.checkpoint, resumed on another world size, and a save that fails half-way."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import fsdp_parts
import sharded_models as models
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import worker
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.state_dict import (
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.device_mesh import DeviceMesh


def _ckpt(name: str) -> Path:
    return Path(os.environ["FLAGOS_DIST_CKPT"]) / name


def _sharded_with_adam(mesh: DeviceMesh, seed_shift: int = 0) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    model = models.transformer()
    with torch.no_grad():
        for p in model.parameters():  # a resumed model starts elsewhere, so a load that does nothing shows
            p.add_(seed_shift)
    model = fsdp_parts.shard(model.to(worker.DEV), mesh)
    return model, torch.optim.Adam(model.parameters(), lr=1e-2)


def _state(model: torch.nn.Module, opt: torch.optim.Optimizer) -> dict:
    return {"model": get_model_state_dict(model), "optim": get_optimizer_state_dict(model, opt)}


def _whole(model: torch.nn.Module, opt: torch.optim.Optimizer) -> dict:
    """Parameters and Adam's moments, whole, as lists."""
    moments = {}
    for n, p in model.named_parameters():
        for key in ("exp_avg", "exp_avg_sq"):
            moments[f"{n}.{key}"] = opt.state[p][key].full_tensor().cpu().tolist()
    return {"params": fsdp_parts.full_params(model), "moments": moments}


def _adam_steps(model: torch.nn.Module, opt: torch.optim.Optimizer, steps: int) -> None:
    for step in range(steps):
        x = models.batch(step)
        per = x.shape[0] // worker.WORLD
        models.loss_of(model, x[worker.RANK * per : (worker.RANK + 1) * per].to(worker.DEV)).backward()
        opt.step()
        opt.zero_grad()


def part_save(mesh: DeviceMesh) -> dict:
    """Two Adam steps, then a save into ckpt/trained; what was saved, whole."""
    model, opt = _sharded_with_adam(mesh)
    _adam_steps(model, opt, 2)
    dcp.save(_state(model, opt), checkpoint_id=_ckpt("trained"))
    return _whole(model, opt)


def _load(model: torch.nn.Module, opt: torch.optim.Optimizer, path: Path) -> None:
    state = _state(model, opt)  # the sharded layout of this world: DCP reads into it, resharding as it goes
    dcp.load(state, checkpoint_id=path)
    set_model_state_dict(model, state["model"])
    set_optimizer_state_dict(model, opt, state["optim"])


def part_resume(mesh: DeviceMesh) -> dict:
    """ckpt/trained loaded into a model that starts elsewhere, on this world; what it then holds, whole."""
    model, opt = _sharded_with_adam(mesh, seed_shift=1)
    _load(model, opt, _ckpt("trained"))
    return _whole(model, opt)


class _FailingWriter(dcp.FileSystemWriter):
    """Writes its share, then fails on the last rank, as a full disk or a lost node would mid-save."""

    def write_data(self, plan, planner):
        written = super().write_data(plan, planner)
        if worker.RANK == worker.WORLD - 1:
            written.wait()
            raise OSError("injected: the disk filled up")
        return written


def part_interrupted(mesh: DeviceMesh) -> dict:
    """Save step 1; train on; the save of step 2 fails on one rank. Step 1 must load whole into a fresh model,
    and the half-written step 2 must refuse to load rather than give a mix."""
    model, opt = _sharded_with_adam(mesh)
    _adam_steps(model, opt, 1)
    dcp.save(_state(model, opt), checkpoint_id=_ckpt("step1"))
    step1 = _whole(model, opt)
    _adam_steps(model, opt, 1)
    out: dict = {"metadata": {}}
    try:
        dcp.save(_state(model, opt), storage_writer=_FailingWriter(_ckpt("step2")))
        out["save_error"] = None
    except CheckpointException as exc:  # a BaseException: DCP gathers every rank's failure into it
        out["save_error"] = f"{type(exc).__name__}: {exc}"[:2000]
    dist.barrier()
    for step in ("step1", "step2"):
        out["metadata"][step] = (_ckpt(step) / ".metadata").is_file()
    fresh, fresh_opt = _sharded_with_adam(mesh, seed_shift=1)
    _load(fresh, fresh_opt, _ckpt("step1"))
    out["step1_loaded_equal"] = _whole(fresh, fresh_opt) == step1
    logging.disable(logging.WARNING)  # DCP logs each missing metadata file with its traceback on the root logger
    try:
        _load(*_sharded_with_adam(mesh, seed_shift=1), _ckpt("step2"))
        out["step2_load_error"] = None
    except CheckpointException as exc:
        out["step2_load_error"] = f"{type(exc).__name__}: {exc}"[:2000]
    finally:
        logging.disable(logging.NOTSET)
    return out
