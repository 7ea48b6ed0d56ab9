"""Graphs on a CUDA vendor (and DCU, HIP graphs through torch's hipified CUDA graphs): torch's own CUDAGraph.

Flagos work on CUDA is CUDA work: the native route and the replay launch on CUDA's current stream (a flagos stream
is a CUDA stream of the same id, ``csrc/runtime/cuda.cpp``), flagos memory comes from CUDA's caching allocator on
that stream, and the flagos generator is CUDA's default one. So a ``torch.cuda.CUDAGraph`` captured on the current
stream captures flagos kernels, routes allocations into its private pool and registers the generator, as it does
for cuda tensors. On top, the capture's dispatch mode refuses by name what a replay could not repeat, before CUDA
reports a broken capture with no op in the message.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ._capture import CaptureMode


def new_pool() -> tuple[int, int]:
    return tuple(torch.cuda.graph_pool_handle())  # type: ignore[return-value]


class CudaBackedGraph:
    def __init__(self, keep_graph: bool) -> None:
        self._graph = torch.cuda.CUDAGraph(keep_graph=keep_graph) if keep_graph else torch.cuda.CUDAGraph()
        self._mode: CaptureMode | None = None

    def capture_begin(self, pool: tuple[int, int] | None, capture_error_mode: str) -> None:
        self._graph.capture_begin(pool=pool, capture_error_mode=capture_error_mode)
        self._mode = CaptureMode(None)
        self._mode.__enter__()

    def capture_end(self) -> None:
        mode, self._mode = self._mode, None
        if mode is not None:
            mode.__exit__(None, None, None)
        self._graph.capture_end()
        if mode is not None and mode.error is not None:
            self._graph.reset()
            raise mode.error

    def abandon(self) -> None:
        if self._mode is not None:
            self._mode.__exit__(None, None, None)
            self._mode = None
        try:
            self._graph.capture_end()
        finally:
            self._graph.reset()

    def replayer(self) -> Callable[[], None]:
        return self._graph.replay

    def reset(self) -> None:
        self._graph.reset()

    def pool(self) -> tuple[int, int]:
        return tuple(self._graph.pool())  # type: ignore[return-value]
