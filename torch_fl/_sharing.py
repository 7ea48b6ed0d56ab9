"""flagos tensors through ``torch.multiprocessing`` (queues, pipes, process arguments).

torch pickles a tensor for another process as its storage plus sizes and strides (``reduce_tensor`` in
torch/multiprocessing/reductions.py); only the storage needs a flagos rule, so only the storage reducer is
wrapped, and every other storage keeps torch's.

- Under the CPU emulation flagos memory is host memory, so a flagos storage is shared as torch shares a CPU one:
  moved into a shared-memory segment in place (``_core.share_fd``), its file descriptor sent, and mapped as a flagos
  storage on the other side. Both processes see each other's writes, as with CPU tensors.
- On GPU vendors the storage would have to go through the vendor's IPC (CUDA IPC handles, their reference
  counting and events), which flagos storages do not do yet. The message travels instead of the tensor: the
  receiving side raises it when it unpickles (``Queue.get()``, the child's start), so the consumer never waits on
  an item the producer's queue thread dropped. The producer is warned too.
"""

from __future__ import annotations

import multiprocessing.reduction
import os
import warnings

import torch
from torch.multiprocessing import reductions as _torch

from . import _core

REFUSAL = (
    "flagos tensors on {accel} cannot be shared between processes yet (no CUDA IPC for flagos storages); send "
    "tensor.cpu() and move it back with .to('flagos') on the other side, or share the CPU tensor itself"
)


def rebuild_storage(df: multiprocessing.reduction.DupFd, nbytes: int, index: int) -> torch.UntypedStorage:
    fd = df.detach()
    try:
        key = _torch.fd_id(fd)
        cached = _torch.storage_from_cache(torch.UntypedStorage, key)
        if cached is not None:  # a storage this process already maps: one storage, as the sender had
            return cached
        if index >= _core.device_count():
            raise RuntimeError(
                f"a flagos tensor from flagos:{index} arrived in a process with {_core.device_count()} flagos "
                "device(s): give both processes the same FLAGOS_EMU_DEVICES"
            )
        storage = _core.from_shared_fd(fd, nbytes, index).untyped_storage()
        _torch.shared_cache[key] = _torch.StorageWeakRef(storage)
        return storage
    finally:
        os.close(fd)


def rebuild_empty(index: int) -> torch.UntypedStorage:
    return torch.UntypedStorage(0, device=torch.device("flagos", index))


def refuse_on_arrival(message: str) -> None:
    raise RuntimeError(message)


def reduce_storage(storage: torch.UntypedStorage, torch_reduce):  # noqa: ANN001, ANN201 (pickle's protocol)
    if storage.device.type != "flagos":
        return torch_reduce(storage)
    index = storage.device.index or 0
    accel = _core.accelerator()
    if accel != "cpu":
        message = REFUSAL.format(accel=accel)
        warnings.warn(message, stacklevel=2)
        return refuse_on_arrival, (message,)
    if storage.nbytes() == 0:  # an empty segment cannot be mapped
        return rebuild_empty, (index,)
    fd, nbytes = _core.share_fd(torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage))
    _torch.shared_cache[_torch.fd_id(fd)] = _torch.StorageWeakRef(storage)
    return rebuild_storage, (multiprocessing.reduction.DupFd(fd), nbytes, index)


def install() -> None:
    pickler = multiprocessing.reduction.ForkingPickler
    torch_reduce = pickler._extra_reducers.get(torch.UntypedStorage, _torch.reduce_storage)
    pickler.register(torch.UntypedStorage, lambda storage: reduce_storage(storage, torch_reduce))
