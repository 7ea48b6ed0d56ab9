"""A compiled graph run through flagos graphs: what ``torch.compile(mode="reduce-overhead")`` gives a flagos graph
on a GPU vendor (``_torch_compat/cudagraphs.py`` hands Inductor's graph here instead of to its CUDA graph trees,
which take cuda tensors only). The callable follows Inductor's boxed convention: it takes a list and clears it.

Per key (the graph's int inputs and the shapes of the inputs it copies: with dynamic shapes one recording per
distinct key, as the trees record one per distinct int input):
  first call    a warm-up: the compiled code runs as is on the capture stream (lazy set-up such as a library's
                per-stream workspace happens outside a capture) and its results are the call's
  second call   the recording: the compiled code captured into a FlagosGraph, then replayed
  later calls   replays
Each call's work happens once, so a static input the graph updates (a KV cache) is updated once per call.

Inputs. Static ones (parameters, buffers, tensors marked with ``torch._dynamo.mark_static_address`` such as HF's
StaticCache) are read in place; their addresses are checked on every call, and a moved one makes a new recording
(past torch's re-record limit the function runs uncaptured, logged as a skip). The others are copied into the
recording's buffers before each replay. An input the graph mutates that is not static means no graph for this
function (a replay would write the copy, not the caller's tensor): the skip is logged with Inductor's reason
("mutated inputs") and the compiled code runs as is, as on cuda. So does a function whose capture meets an op a
graph cannot repeat (``torch_fl.graphs.CaptureError``: a host read, a provider's Python path), naming the op.

Outputs. A replay writes the same memory every time. Each call returns new tensors over it, and the tensors the
previous call returned become unreadable, with a message saying to clone them; outputs that alias a static input
are returned as the capture made them (that memory is the caller's, not the graph's).

Keys that never come twice. A key records on its second call, so a function whose every call brings a new key (an
int input counted on the host, such as a sliding-window cache's length) warms up forever and replays nothing, as
the trees record nothing for it either. ``reason()`` names that (the graph stats list it beside the skips) and, past
torch's ``cudagraph_dynamic_shape_warn_limit`` distinct keys, torch's own warning is logged, as for cuda.

Pools. The recordings of one function share one private memory pool, as the graphs of a tree share the trees' pool,
so a function recorded for many keys holds one pool's memory, not one per key. Sharing is safe because one call of
the function expires what every earlier call returned: a replay of one key may write where another key's outputs
live, and those outputs are made unreadable first. Functions (the partitions of one compiled graph among them) do
not share a pool: without the trees' tracking of which outputs are alive, one function's replay could overwrite the
outputs of another that its caller still reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from .. import _core
from .. import flagos as _flagos
from .._errors import CaptureError
from ._torch_compat import cudagraphs as _compat

_same_addresses = _compat.same_addresses()
_WARMED = object()  # a key whose warm-up ran; its next call records
_ALIGNMENT = 16  # Inductor's input alignment: a static input off it is copied into an aligned buffer instead

OVERWRITTEN = (
    "torch_fl: this tensor is an output of a torch.compile(mode='reduce-overhead') graph on flagos, and a later call "
    "of the same graph has overwritten its memory (each replay writes its outputs into the same place). Clone it "
    "before calling the compiled function again (out.clone()) to keep it."
)


def _expanded(t: torch.Tensor) -> list[int]:
    return [d for d in range(t.dim()) if t.stride(d) == 0 and t.size(d) > 1]


def _copy_into(dst: torch.Tensor, src: torch.Tensor, expanded: list[int]) -> None:
    if dst.data_ptr() == src.data_ptr() and dst.stride() == src.stride():
        return
    for d in expanded:  # a broadcast dimension holds one element's memory: copy that element
        dst, src = dst.narrow(d, 0, 1), src.narrow(d, 0, 1)
    dst.copy_(src)


class Recording:
    """One captured graph of a function: its static inputs' addresses, its input buffers and its outputs."""

    def __init__(self, runner: GraphRunner, inputs: list[Any]) -> None:
        from ..graphs import FlagosGraph, graph

        self.static_idxs = runner.static_idxs
        static = frozenset(self.static_idxs)
        self.static_ptrs = [x.data_ptr() if i in static else None for i, x in enumerate(inputs)]
        self.copies = [(i, _expanded(inputs[i])) for i in runner.copy_idxs]
        self.buffers = list(inputs)
        for i, expanded in self.copies:
            self.buffers[i] = torch.empty_strided(
                inputs[i].size(), inputs[i].stride(), dtype=inputs[i].dtype, device=inputs[i].device
            )
            _copy_into(self.buffers[i], inputs[i], expanded)
        self.graph = FlagosGraph()
        # The function's pool, shared with its other recordings (the module docstring says why that is safe).
        with graph(self.graph, pool=runner.pool(), stream=runner.stream(), capture_error_mode="thread_local"):
            outputs = runner.model(list(self.buffers))
        self.kind = type(outputs) if isinstance(outputs, (list, tuple)) else None
        self.outputs = list(outputs) if self.kind else [outputs]
        owned = {t.untyped_storage().data_ptr() for i, t in enumerate(self.buffers) if i in self.static_idxs}
        self.fresh = [  # outputs handed out anew per call: those in the graph's own memory
            i
            for i, o in enumerate(self.outputs)
            if isinstance(o, torch.Tensor) and o.untyped_storage().data_ptr() not in owned
        ]
        self.fresh_tensors = [self.outputs[i] for i in self.fresh]
        traces = list(runner.stack_traces)
        self.messages = [OVERWRITTEN + _where(traces[i] if i < len(traces) else None) for i in self.fresh]
        self.handed: list[torch.Tensor] = []

    def static_inputs_stayed(self, inputs: list[Any]) -> bool:
        return _same_addresses(inputs, self.static_ptrs, self.static_idxs)

    def expire(self) -> None:
        """Make what the last replay returned unreadable (nothing before the first replay)."""
        for t, message in zip(self.handed, self.messages, strict=False):
            _core.make_unreadable(t, message)
        self.handed = []

    def run(self, inputs: list[Any], previous: Recording | None = None) -> Any:
        """Replay; ``previous`` is the recording of the function's last call, whose outputs this replay may
        overwrite (the pool is shared)."""
        for i, expanded in self.copies:
            _copy_into(self.buffers[i], inputs[i], expanded)
        inputs.clear()  # the inputs are read (an input may be the previous call's output): those go now
        self.expire()
        if previous is not None and previous is not self:
            previous.expire()
        self.graph.replay()
        self.handed = _core.fresh_aliases(self.fresh_tensors)
        out = list(self.outputs)
        for i, t in zip(self.fresh, self.handed, strict=True):
            out[i] = t
        return self.kind(out) if self.kind else out[0]


def _where(trace: str | None) -> str:
    return f" It was made here:\n{trace.rstrip()}" if trace else ""


class GraphRunner:
    """Runs ``model`` (an Inductor graph's boxed callable) through flagos graphs; see the module docstring."""

    def __init__(
        self,
        model: Callable[[list[Any]], Any],
        static_input_idxs: Sequence[int] = (),
        *,
        device_index: int | None = None,
        stack_traces: Sequence[str | None] | None = None,
        placeholders: Sequence[Any] = (),
        mutated_input_idxs: Sequence[int] = (),
        **_: Any,  # the rest of what Inductor hands its CUDA graph function (constants live in the model)
    ) -> None:
        self.model = model
        self.declared_static = frozenset(static_input_idxs)
        self.device_index = device_index
        self.stack_traces = list(stack_traces or ())
        self.placeholders = placeholders
        self.mutated = tuple(mutated_input_idxs)
        self.recordings: dict[tuple[Any, ...], Any] = {}
        self.skipped: str | None = None
        self.static_idxs: list[int] = []
        self.copy_idxs: list[int] = []
        self.int_idxs: list[int] = []
        self.rerecords = 0
        self.last: Recording | None = None  # the recording that ran the last call
        self._warned = False  # torch's warning about many keys, logged once
        self._pool: tuple[int, int] | None = None
        self._stream: Any = None
        self._laid_out = False

    def stream(self) -> Any:
        """The stream this function's warm-ups and captures run on (a capture may not use the default stream)."""
        if self._stream is None:
            index = _flagos.current_device() if self.device_index is None else self.device_index
            self._stream = _flagos.Stream(index)
        return self._stream

    def pool(self) -> tuple[int, int]:
        """The private memory pool this function's recordings share."""
        if self._pool is None:
            from ..graphs import graph_pool_handle

            self._pool = graph_pool_handle()
        return self._pool

    def reason(self) -> str | None:
        """Why this function replays no graph: its skip reason, or keys that never came twice; None while a
        recording exists or before a second call could record one."""
        if self.skipped is not None:
            return self.skipped
        if len(self.recordings) < 2 or any(isinstance(r, Recording) for r in self.recordings.values()):
            return None
        ints = f"int inputs at {self.int_idxs}" if self.int_idxs else "no int input"
        return (
            f"no cudagraph recorded: each of {len(self.recordings)} calls brought a new key ({ints}; shapes of "
            f"the inputs at {self.copy_idxs}) and a key records on its second call"
        )

    def _lay_out(self, inputs: list[Any]) -> None:
        self._laid_out = True
        for i, x in enumerate(inputs):
            if isinstance(x, torch.Tensor):
                static = i in self.declared_static and x.data_ptr() % _ALIGNMENT == 0
                (self.static_idxs if static else self.copy_idxs).append(i)
            elif isinstance(x, int):
                self.int_idxs.append(i)
            else:
                self._skip(
                    f"skipping cudagraphs due to a {type(x).__name__} input (flagos graphs take tensors and ints)"
                )
                return
        mutated = [i for i in self.mutated if i not in self.static_idxs]
        if mutated:
            self._skip(_compat.mutation_reason(self.placeholders, mutated))

    def _skip(self, reason: str) -> None:
        self.skipped = reason
        self.recordings.clear()
        self.last = None
        _compat.skip(reason)

    def __call__(self, inputs: list[Any]) -> Any:
        if not self._laid_out:
            self._lay_out(inputs)
        if self.skipped is not None:
            return self.model(inputs)
        key = (*(inputs[i] for i in self.int_idxs), *(inputs[i].shape for i in self.copy_idxs))
        recording = self.recordings.get(key)
        if recording is None:
            if not self._warned:
                self._warned = _compat.warn_many_keys(self.recordings, key)
            self.recordings[key] = _WARMED
            return self._warm_up(inputs)
        if recording is not _WARMED and not recording.static_inputs_stayed(inputs):
            self.rerecords += 1
            if self.rerecords > _compat.rerecord_limit():
                self._skip(
                    f"skipping cudagraphs due to static input data pointers changed "
                    f"({self.rerecords} times: past the re-record limit)"
                )
                return self.model(inputs)
            recording = _WARMED
        if recording is _WARMED:
            try:
                recording = self.recordings[key] = Recording(self, inputs)
            except CaptureError as exc:  # an op a graph cannot repeat (a host read, a provider's Python path)
                self._skip(f"skipping cudagraphs due to an uncapturable op: {exc}")
                return self.model(inputs)
        previous, self.last = self.last, recording
        return recording.run(inputs, previous)

    def _warm_up(self, inputs: list[Any]) -> Any:
        stream, current = self.stream(), _flagos.current_stream()
        stream.wait_stream(current)  # after the work queued so far (memory freed since is reused after it)
        with _flagos.stream(stream):
            out = self.model(inputs)
        current.wait_stream(stream)
        return out


def make_runner(model: Callable[[list[Any]], Any], static_input_idxs: Sequence[int] = (), **kwargs: Any) -> Any:
    """What the runner hook builds for a flagos graph (Inductor's ``cudagraphify`` arguments)."""
    return GraphRunner(model, static_input_idxs, **kwargs)
