"""Collectives on flagos tensors: the ``flagos`` backend of ``torch.distributed``.

``import torch_fl`` registers it and maps the flagos device to it, so these all send flagos tensors through it::

    dist.init_process_group()                                   # the default map: flagos -> flagos
    dist.init_process_group("flagos")
    dist.init_process_group("cpu:gloo,flagos:flagos")

The work is done by the vendor's own c10d backend on views of the caller's flagos memory (no copies):

==========  ===============================================================================================
emulation   Gloo over the host memory behind flagos
CUDA        NCCL (torch's ProcessGroupNCCL), ordered with the current flagos stream, which is the CUDA stream
DCU         RCCL, through the DTK torch's ``nccl`` backend (a HIP build of torch registers RCCL under that name)
==========  ===============================================================================================

The C++ side (csrc/comm/backend.cpp) names no vendor API: this module creates the vendor backend with torch's
own Python constructors, so the options, timeouts and environment variables of Gloo and NCCL apply unchanged.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import torch.distributed as dist

from . import _C

BACKEND = "flagos"
DEVICE = "flagos"


def vendor_backend_name(accelerator: str) -> str:
    """The torch c10d backend that carries flagos collectives on ``accelerator``."""
    return "gloo" if accelerator == "cpu" else "nccl"


def _vendor_backend(opts: Any, pg_options: Any) -> dist.Backend:
    from . import accelerator

    accel = accelerator()
    timeout: timedelta = opts.timeout
    if vendor_backend_name(accel) == "gloo":
        if not dist.is_gloo_available():
            raise RuntimeError("flagos collectives on the emulation need Gloo, which this torch build lacks")
        return dist.ProcessGroupGloo(opts.store, opts.group_rank, opts.group_size, timeout)
    if not dist.is_nccl_available():
        raise RuntimeError(
            f"flagos collectives on {accel} need torch's NCCL backend (RCCL on DCU), which this torch build lacks"
        )
    nccl = pg_options if isinstance(pg_options, dist.ProcessGroupNCCL.Options) else dist.ProcessGroupNCCL.Options()
    nccl._timeout = timeout
    nccl.global_ranks_in_group = list(opts.global_ranks_in_group)
    nccl.group_name = opts.group_id
    return dist.ProcessGroupNCCL(opts.store, opts.group_rank, opts.group_size, nccl)


def _create(opts: Any, pg_options: Any) -> dist.Backend:
    """torch.distributed's creator for the flagos backend (extended API: store, ranks, timeout, group)."""
    return _C.comm_backend(_vendor_backend(opts, pg_options))


def register() -> None:
    """Register the flagos backend and map the flagos device to it (done by ``import torch_fl``)."""
    if BACKEND.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(BACKEND, _create, extended_api=True, devices=[DEVICE])
