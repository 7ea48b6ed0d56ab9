"""Graphs under the CPU emulation: a capture records the flagos op stream, a replay reruns it into the same tensors.

The semantics are a GPU graph's, so that CI tests what a CUDA node does:
- the capture leaves memory that existed before it as it found it (a GPU capture runs nothing), and a replay does
  the captured work: in-place updates of parameters happen once per replay;
- a replay reads its inputs from the tensors the capture read (copy new data into those static inputs) and writes
  its results into the tensors the capture returned;
- what the capture allocated stays alive as long as the graph does (the graph's pool);
- random ops draw fresh numbers on every replay, as CUDA graphs advance the generator's offset per replay.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import torch

from ._capture import CaptureMode, Recording

_pool_ids = itertools.count(1)


def new_pool() -> tuple[int, int]:
    """A pool token shaped like CUDA's ``(0, id)``; the emulation allocates from the host either way, so a pool is
    only a name that graphs capturing into it share."""
    return (0, next(_pool_ids))


class EmulatedGraph:
    def __init__(self) -> None:
        self._recording: Recording | None = None
        self._mode: CaptureMode | None = None
        self._pool: tuple[int, int] | None = None

    def capture_begin(self, pool: tuple[int, int] | None, capture_error_mode: str) -> None:
        self._pool = tuple(pool) if pool is not None else new_pool()  # type: ignore[assignment]
        self._recording = Recording()
        self._mode = CaptureMode(self._recording)
        self._mode.__enter__()

    def capture_end(self) -> None:
        mode, recording = self._mode, self._recording
        assert mode is not None and recording is not None  # FlagosGraph keeps the order of calls
        self._mode = None
        mode.__exit__(None, None, None)
        with torch._C._AutoDispatchBelowADInplaceOrView():
            recording.restore()
        if mode.error is not None:  # refused inside the region, even if the caller caught the error there
            self._recording = None
            raise mode.error

    def abandon(self) -> None:
        """Leave a capture that raised: nothing of it is kept and the memory it wrote is put back."""
        if self._mode is not None:
            self._mode.__exit__(None, None, None)
            self._mode = None
        if self._recording is not None:
            with torch._C._AutoDispatchBelowADInplaceOrView():
                self._recording.restore()
            self._recording = None

    def replayer(self) -> Callable[[], None]:
        return self.replay

    def replay(self) -> None:
        assert self._recording is not None
        # The calls were recorded below autograd (a dispatch mode sees them there): rerun them there too.
        with torch._C._AutoDispatchBelowADInplaceOrView():
            for entry in self._recording.entries:
                entry.replay()

    def reset(self) -> None:
        self.abandon()

    def pool(self) -> tuple[int, int]:
        assert self._pool is not None
        return self._pool

    def recorded_ops(self) -> list[str]:
        """The ops a replay reruns, in order (for tests and debugging)."""
        from ._capture import _name

        return [_name(e.func) for e in self._recording.entries] if self._recording else []
