"""Memory pools of the flagos allocator (``torch.flagos.MemPool``, ``use_mem_pool``), like ``torch.cuda``'s."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from typing import Any

import torch

from . import _core
from ._memory_history import memory_snapshot
from ._vendor import Device, index_of, on_gpu

__all__ = ["MemPool", "use_mem_pool"]

_pool_ids = itertools.count(1)


class MemPool:
    """A pool of flagos memory (like ``torch.cuda.MemPool``). On GPU vendors it is ``torch.cuda.MemPool`` itself, as
    flagos memory is the caching allocator's. Under emulation nothing is cached, so a pool holds no memory of its own:
    it names the blocks allocated under ``use_mem_pool(pool)``, which ``snapshot()`` and
    ``memory_snapshot(mempool_id=pool.id)`` list."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if on_gpu():
            return torch.cuda.MemPool(*args, **kwargs)  # not a MemPool instance, so __init__ below is not run
        return super().__new__(cls)

    def __init__(self, allocator: object = None, use_on_oom: bool = False, no_split: bool = False) -> None:
        if allocator is not None:
            raise ValueError(
                "MemPool(allocator=...) takes a CUDA pluggable allocator, which the flagos emulation cannot use; "
                "leave allocator=None"
            )
        self._id = (0, next(_pool_ids))

    @property
    def id(self) -> tuple[int, int]:
        return self._id

    @property
    def allocator(self) -> None:
        return None

    def use_count(self) -> int:
        """The number of live blocks allocated in this pool."""
        return len(self.snapshot())

    def snapshot(self) -> list[dict[str, Any]]:
        return memory_snapshot(mempool_id=self._id)


@contextlib.contextmanager
def use_mem_pool(pool: Any, device: Device = None) -> Iterator[None]:
    """Allocations of this thread on ``device`` go to ``pool`` inside the block."""
    index = index_of(device)
    if on_gpu():
        with torch.cuda.use_mem_pool(pool, torch.device("cuda", index)):
            yield
        return
    if not isinstance(pool, MemPool):
        raise TypeError(f"use_mem_pool: expected a torch.flagos.MemPool, got {type(pool).__name__}")
    _core.emulation_pool_begin(index, pool.id[1])
    try:
        yield
    finally:
        _core.emulation_pool_end(index, pool.id[1])
