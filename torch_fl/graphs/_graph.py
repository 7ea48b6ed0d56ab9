"""The graph itself (``FlagosGraph``), the ``graph`` block that captures one, pools and the capture question; the
vendor's graph behind it is ``_cuda.py``'s or ``_emulation.py``'s."""

from __future__ import annotations

import gc
from typing import Any

from .. import _core, _device, _memory
from .._errors import CaptureError

__all__ = ["FlagosGraph", "graph", "graph_pool_handle", "is_current_stream_capturing"]

_CAPTURE_ERROR_MODES = ("default", "global", "thread_local", "relaxed")


def _on_gpu() -> bool:
    return _core.accelerator() in ("cuda", "dcu")


def graph_pool_handle() -> tuple[int, int]:
    """A new memory pool token; graphs captured with ``pool=`` this token share it (as ``torch.cuda``'s)."""
    if _on_gpu():
        from ._cuda import new_pool
    else:
        from ._emulation import new_pool
    return new_pool()


class FlagosGraph:
    """A captured flagos graph, like ``torch.cuda.CUDAGraph``: ``capture_begin``/``capture_end`` around the work
    (or ``with torch.flagos.graph(g):``), then ``replay()``; ``pool()`` names its memory pool."""

    def __init__(self, keep_graph: bool = False) -> None:
        if _on_gpu():
            from ._cuda import CudaBackedGraph

            self._impl: Any = CudaBackedGraph(keep_graph)
        else:
            from ._emulation import EmulatedGraph

            self._impl = EmulatedGraph()
        self._state = "empty"  # -> "capturing" -> "captured"; reset() or a failed capture -> "empty"

    def capture_begin(self, pool: tuple[int, int] | None = None, capture_error_mode: str = "global") -> None:
        if capture_error_mode not in _CAPTURE_ERROR_MODES:
            raise ValueError(f"capture_error_mode={capture_error_mode!r}: expected one of {_CAPTURE_ERROR_MODES}")
        if self._state != "empty":
            raise CaptureError(f"torch_fl graphs: this graph is {self._state}; call reset() to capture again")
        self._impl.capture_begin(pool, "global" if capture_error_mode == "default" else capture_error_mode)
        self._state = "capturing"

    def capture_end(self) -> None:
        self._expect("capturing", "capture_end() needs capture_begin() first")
        self._end()
        self._impl.capture_end()
        self._state = "captured"
        # A replay costs what the vendor's does: the instance answers replay() with the vendor's own call.
        self.replay = self._impl.replayer()  # type: ignore[method-assign]

    def _end(self) -> None:
        self._state = "empty"
        self.__dict__.pop("replay", None)

    def _abandon(self) -> None:
        self._end()
        self._impl.abandon()

    def _expect(self, state: str, what: str) -> None:
        if self._state != state:
            raise CaptureError(f"torch_fl graphs: {what} (this graph is {self._state})")

    def replay(self) -> None:
        self._expect("captured", "replay() needs a finished capture (capture_begin ... capture_end)")
        self._impl.replay()

    def reset(self) -> None:
        if self._state == "capturing":
            self._abandon()
        self._impl.reset()
        self._state = "empty"
        self.__dict__.pop("replay", None)

    def pool(self) -> tuple[int, int]:
        self._expect("captured", "pool() needs a finished capture; graph_pool_handle() gives a pool to share")
        return self._impl.pool()


def is_current_stream_capturing() -> bool:
    """Whether work queued now would be captured: on a GPU vendor, whether the current stream is capturing; under
    emulation, whether a capture's recording mode is active here (the autograd engine's threads inherit it)."""
    if _on_gpu():
        import torch

        return torch.cuda.is_current_stream_capturing()
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    from ._capture import CaptureMode

    return any(isinstance(mode, CaptureMode) for mode in _get_current_dispatch_mode_stack())


class graph:
    """``with torch.flagos.graph(g, pool=None, stream=None):`` captures the block into ``g`` on ``stream`` (a side
    stream by default, as a capture may not use the default stream). The block's work is not run on a GPU vendor,
    only recorded; replay with ``g.replay()``. An error inside the block abandons the capture."""

    _side_streams: dict[int, Any] = {}  # one capture stream per device, made on first use

    def __init__(
        self,
        flagos_graph: FlagosGraph,
        pool: tuple[int, int] | None = None,
        stream: Any = None,
        capture_error_mode: str = "global",
    ) -> None:
        if stream is None:
            index = _device.current_device()
            if index not in graph._side_streams:
                graph._side_streams[index] = _device.Stream(index)
            stream = graph._side_streams[index]
        self.graph = flagos_graph
        self.pool = pool
        self.capture_error_mode = capture_error_mode
        self.stream_context = _device.stream(stream)

    def __enter__(self) -> None:
        _device.synchronize()
        gc.collect()
        _memory.empty_cache()
        self.stream_context.__enter__()
        try:
            self.graph.capture_begin(self.pool, capture_error_mode=self.capture_error_mode)
        except BaseException:
            self.stream_context.__exit__(None, None, None)
            raise

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if exc_type is None:
                self.graph.capture_end()
            else:
                try:
                    self.graph._abandon()
                except Exception:  # noqa: BLE001  (the block's own error is the one to report)
                    pass
        finally:
            self.stream_context.__exit__(None, None, None)
