"""Collectives on flagos tensors: the ``flagos`` backend of ``torch.distributed``.

``import torch_fl`` registers it and maps the flagos device to it, so these all send flagos tensors through it::

    dist.init_process_group()                                   # no backend: cpu -> gloo, flagos -> flagos
    dist.init_process_group("flagos")
    dist.init_process_group("cpu:gloo,flagos:flagos")
    init_device_mesh("flagos", (world_size,))                   # with no group yet: as init_process_group()

A backend named alone (``"gloo"``, ``"nccl"``) maps only the devices torch knows for it; flagos tensors then have
no backend, so ``init_process_group`` warns at once and names the string that serves both.

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

import functools
import inspect
import warnings
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch.distributed as dist

from . import _core

BACKEND = "flagos"
DEVICE = "flagos"


def vendor_backend_name(accelerator: str) -> str:
    """The torch c10d backend that carries flagos collectives on ``accelerator``."""
    return "gloo" if accelerator == "cpu" else "nccl"


def _vendor_backend(opts: Any, pg_options: Any) -> dist.Backend:
    accel = _core.accelerator()
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
    accel = _core.accelerator()
    scratch = dist.ProcessGroup(opts.store, opts.group_rank, opts.group_size)
    vendor_type = getattr(dist.ProcessGroup.BackendType, vendor_backend_name(accel).upper())
    vendor_device = "cpu" if accel == "cpu" else "cuda"
    return _core.comm_wrap(_vendor_backend(opts, pg_options), scratch, vendor_device, vendor_type)


def default_backend() -> str:
    """What ``init_process_group()`` with no backend takes in a flagos process: Gloo for host tensors (as torch's
    default gives them), flagos for flagos tensors."""
    return f"cpu:gloo,{DEVICE}:{BACKEND}" if dist.is_gloo_available() else f"{DEVICE}:{BACKEND}"


def _serves_flagos(backend: str) -> bool:
    name = backend.lower()
    if ":" in name:
        return any(pair.split(":")[0].strip() == DEVICE for pair in name.split(","))
    return name == BACKEND or DEVICE in dist.Backend.backend_capability.get(name, ())


def _with_flagos_default(init: Callable[..., Any]) -> Callable[..., Any]:
    """torch's ``init_process_group``, where no backend means :func:`default_backend`.

    torch's own default for a plugin accelerator maps it to its backend but gives the group Gloo's default
    backend type without creating Gloo, and ``DistributedDataParallel`` then fails looking for it
    ("Could not find backend type 1 ... gloo"). Naming the map keeps the default group whole."""
    signature = inspect.signature(init)

    @functools.wraps(init)
    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind_partial(*args, **kwargs)
        backend = bound.arguments.get("backend")
        if backend is None or str(backend).lower() == dist.Backend.UNDEFINED:
            bound.arguments["backend"] = default_backend()
        elif not _serves_flagos(str(backend)):
            warnings.warn(
                f"init_process_group({str(backend)!r}) gives flagos tensors no backend, so their collectives fail; "
                f"name no backend, or {default_backend()!r}, to send them through flagos",
                stacklevel=2,
            )
        return init(*bound.args, **bound.kwargs)

    init_process_group.__wrapped_by_torch_fl__ = True  # type: ignore[attr-defined]
    return init_process_group


def _with_flagos_default_backend(helper: Callable[..., Any]) -> Callable[..., Any]:
    """torch's ``_new_process_group_helper``, where a group that serves flagos gets a default backend.

    torch gives a group built from a device map (``"cpu:gloo,flagos:flagos"``) a default backend only for NCCL or
    a plugin, and it looks the plugin up by its registered name, which it keeps in upper case, among the map's
    lower-case names: a flagos group is left with none. ``destroy_process_group`` then warns on every rank ("No
    backend of type 0 found for Process Group with name undefined"), and the calls that need a default backend
    (completion hooks, sequence numbers) fail. The flagos backend becomes the default, as torch means a plugin's
    to be."""

    @functools.wraps(helper)
    def new_process_group_helper(*args: Any, **kwargs: Any) -> Any:
        made = helper(*args, **kwargs)
        pg = made[0] if isinstance(made, tuple) else made
        if (
            isinstance(pg, dist.ProcessGroup)
            and pg.name() == dist.Backend.UNDEFINED
            and any(device.type == DEVICE for device in pg._device_types)
        ):
            pg._set_default_backend(dist.ProcessGroup.BackendType.CUSTOM)
        return made

    new_process_group_helper.__wrapped_by_torch_fl__ = True  # type: ignore[attr-defined]
    return new_process_group_helper


def register() -> None:
    """Register the flagos backend, map the flagos device to it, and make it the default for flagos tensors
    (done by ``import torch_fl``)."""
    if BACKEND.upper() in dist.Backend._plugins:
        return
    from . import _gloo_works

    _gloo_works.install()  # no Gloo work is destroyed on Gloo's threads (the module says why)
    dist.Backend.register_backend(BACKEND, _create, extended_api=True, devices=[DEVICE])
    c10d = dist.distributed_c10d
    if not getattr(c10d.init_process_group, "__wrapped_by_torch_fl__", False):
        wrapped = _with_flagos_default(c10d.init_process_group)
        # every module that holds torch's function by name: init_device_mesh("flagos", ...) creates the default
        # group through device_mesh's own reference
        from torch.distributed import device_mesh

        for module in (c10d, dist, device_mesh):
            module.init_process_group = wrapped
    if not getattr(c10d._new_process_group_helper, "__wrapped_by_torch_fl__", False):
        c10d._new_process_group_helper = _with_flagos_default_backend(c10d._new_process_group_helper)
