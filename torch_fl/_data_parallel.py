"""``nn.DataParallel`` over flagos devices: the copies and the sum of ``torch.nn.parallel.comm`` for flagos tensors.

DataParallel scatters the batch over the devices, broadcasts the parameters and buffers, and gathers the outputs
through ``torch.nn.parallel.comm``, whose ``broadcast_coalesced``, ``scatter`` and ``gather`` call CUDA's own
bindings (``torch._C._broadcast_coalesced``, ``_scatter``, ``_gather``; a torch built without CUDA has none). For
flagos they are the same copies made with ``Tensor.to``, the vendor's copy between flagos devices, with the same
results: the broadcast keeps the source tensors for the first device, the scatter splits as they split
(``chunk_sizes``, else equal chunks), the gather concatenates on the destination. The backward pass sums the
replicas' gradients with ``reduce_add``, whose torch version is device-generic but asks NCCL first; the flagos one
sums with ``Tensor.add_``. Calls for any other device go to torch's functions unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch._utils import _get_available_device_type
from torch.nn.parallel import comm

DEVICE = "flagos"
Device = int | str | torch.device


def _device(device: Device | None) -> torch.device | None:
    """``device`` as a flagos device, or None when it names another one. A bare index means the process's
    accelerator, as DataParallel's ``device_ids`` do."""
    if device is None:
        return None
    if isinstance(device, int):
        if device < 0 or _get_available_device_type() != DEVICE:
            return None
        return torch.device(DEVICE, device)
    device = torch.device(device)
    if device.type != DEVICE:
        return None
    return device if device.index is not None else torch.device(DEVICE, torch.flagos.current_device())


def _all_flagos(devices: Sequence[Device]) -> list[torch.device] | None:
    found = [_device(d) for d in devices]
    return found if found and all(d is not None for d in found) else None  # type: ignore[return-value]


def broadcast_coalesced(tensors: Sequence[torch.Tensor], devices: Sequence[Device], buffer_size: int = 10485760):
    targets = _all_flagos(devices)
    if targets is None or not all(t.device.type == DEVICE for t in tensors):
        return _TORCH["broadcast_coalesced"](tensors, devices, buffer_size)
    for t in tensors:
        if t.device != targets[0]:
            raise RuntimeError(
                f"broadcast_coalesced: every tensor must be on the first device, {targets[0]}, but one is on "
                f"{t.device}; move it there with .to('{targets[0]}')"
            )
    return [tuple(tensors)] + [tuple(t.to(d) for t in tensors) for d in targets[1:]]


def scatter(tensor: torch.Tensor, devices=None, chunk_sizes=None, dim=0, streams=None, *, out=None):  # noqa: ANN001
    if out is not None:
        if not out or not all(o.device.type == DEVICE for o in out):
            return _TORCH["scatter"](tensor, devices, chunk_sizes, dim, streams, out=out)
        for o, chunk in zip(out, tensor.split([o.size(dim) for o in out], dim), strict=True):
            o.copy_(chunk, non_blocking=True)
        return tuple(out)
    targets = _all_flagos(devices) if devices is not None else None
    if targets is None:
        return _TORCH["scatter"](tensor, devices, chunk_sizes, dim, streams)
    chunks = tensor.split(list(chunk_sizes), dim) if chunk_sizes is not None else tensor.chunk(len(targets), dim)
    if len(chunks) != len(targets):
        raise RuntimeError(
            f"scatter: the tensor of size {tuple(tensor.shape)} splits into {len(chunks)} chunks along dimension "
            f"{dim}, for {len(targets)} devices; pass chunk_sizes with one size per device"
        )
    # the copies run on each device's current stream, which the caller's streams (Scatter's) then wait for
    return tuple(chunk.to(d, non_blocking=True) for chunk, d in zip(chunks, targets, strict=True))


def _gather_target(destination: Device | None) -> torch.device:
    # the tensors are flagos tensors, so a bare index is a flagos device; -1 is the host, as in torch's gather
    if destination is None:
        return torch.device(DEVICE, torch.flagos.current_device())
    if isinstance(destination, int):
        return torch.device("cpu") if destination == -1 else torch.device(DEVICE, destination)
    device = torch.device(destination)
    return torch.device(DEVICE, torch.flagos.current_device()) if device == torch.device(DEVICE) else device


def gather(tensors: Sequence[torch.Tensor], dim: int = 0, destination=None, *, out=None):  # noqa: ANN001
    if not tensors or not all(t.device.type == DEVICE for t in tensors):
        return _TORCH["gather"](tensors, dim, destination, out=out)
    if out is not None:
        return torch.cat([t.to(out.device) for t in tensors], dim, out=out)
    target = _gather_target(destination)
    return torch.cat([t.to(target) for t in tensors], dim)


def reduce_add(inputs: Sequence[torch.Tensor], destination: Device | None = None):
    if not inputs or not all(t.device.type == DEVICE for t in inputs):
        return _TORCH["reduce_add"](inputs, destination)
    # torch's own asks NCCL first, which a torch without CUDA warns about on every backward: flagos has no NCCL path
    target = _gather_target(destination)
    roots = [i for i, t in enumerate(inputs) if t.device == target]
    if not roots:
        raise RuntimeError(
            f"reduce_add: the destination {target} holds none of the inputs (they are on "
            f"{', '.join(sorted({str(t.device) for t in inputs}))}); pass one of their devices"
        )
    for i, t in enumerate(inputs):
        if t.shape != inputs[0].shape:
            raise RuntimeError(f"reduce_add: input {i} has size {tuple(t.shape)}, expected {tuple(inputs[0].shape)}")
    result = inputs[roots[0]].clone() if len(inputs) > 1 else inputs[0]
    for i, t in enumerate(inputs):
        if i != roots[0]:
            result.add_(t.to(target, non_blocking=True))
    return result


_OURS: dict[str, Callable[..., Any]] = {
    "broadcast_coalesced": broadcast_coalesced,
    "scatter": scatter,
    "gather": gather,
    "reduce_add": reduce_add,
}
_TORCH: dict[str, Callable[..., Any]] = {}


def install() -> None:
    """Put the flagos copies in front of torch's, in ``torch.nn.parallel.comm``, where DataParallel looks."""
    for name, ours in _OURS.items():
        current = getattr(comm, name)
        if current is not ours:
            _TORCH[name] = current
            setattr(comm, name, ours)
