"""Gloo's works are never destroyed on Gloo's own threads.

Gloo runs each collective on a worker thread, which drops its reference to the work once the caller has been
woken. If that is the last reference, the worker destroys the work's tensors, and a tensor that Python holds needs
the GIL to go. While the interpreter finalises, CPython 3.11 ends a thread that waits for the GIL with
``pthread_exit``, whose unwind through a noexcept destructor aborts the process ("terminate called without an
active exception"). A script that ends right after a collective (DCP's ``save`` ends with one) then dies at exit
whenever its worker thread is scheduled late, and its process groups outlive ``destroy_process_group`` wherever a
model still refers to them (FSDP2 and DeviceMesh do), so their workers are not joined before then.

Every ``ProcessGroup`` collective called from Python hands its work to the core's keeper
(csrc/comm/work_keeper.cpp), which holds it until no other thread does and then releases it on a caller's thread.
Under the emulation every collective runs on Gloo; on a GPU node only host tensors do (flagos tensors take NCCL,
whose works are left as torch makes them).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.distributed as dist

from . import _core

# ProcessGroup's methods that start a collective and return its work; a torch line lacks some (the *_single
# ones are what all_gather_into_tensor and reduce_scatter_tensor call where they exist)
COLLECTIVES = (
    "all_gather_single",
    "all_gather_single_coalesced",
    "all_to_all_single",
    "allgather",
    "allgather_coalesced",
    "allgather_into_tensor_coalesced",
    "_allgather_base",
    "allreduce",
    "allreduce_coalesced",
    "alltoall",
    "alltoall_base",
    "barrier",
    "broadcast",
    "gather",
    "recv",
    "recv_anysource",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_single",
    "reduce_scatter_single_coalesced",
    "_reduce_scatter_base",
    "reduce_scatter_tensor_coalesced",
    "scatter",
    "send",
)


def _tensors(values: Iterable[Any]) -> Iterable[torch.Tensor]:
    for value in values:
        if isinstance(value, torch.Tensor):
            yield value
        elif isinstance(value, (list, tuple)):
            yield from _tensors(value)


def runs_on_gloo(args: Iterable[Any]) -> bool:
    """Whether a collective over these arguments runs on Gloo: every one under the emulation, host tensors on
    every vendor."""
    return _core.accelerator() == "cpu" or all(t.device.type == "cpu" for t in _tensors(args))


def _keeping(collective: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(collective)
    def keeping(*args: Any, **kwargs: Any) -> Any:
        work = collective(*args, **kwargs)
        if isinstance(work, dist.Work) and runs_on_gloo([*args, *kwargs.values()]):
            _core.comm_keep(work)
        return work

    keeping.__keeps_works__ = True  # type: ignore[attr-defined]
    return keeping


def install() -> None:
    """Wrap ProcessGroup's collectives (done by ``import torch_fl``)."""
    for name in COLLECTIVES:
        method = getattr(dist.ProcessGroup, name, None)
        if method is not None and not getattr(method, "__keeps_works__", False):
            setattr(dist.ProcessGroup, name, _keeping(method))
