"""mode="reduce-overhead" (CUDA graphs) on flagos: refused with a clear error, at compile time.

Inductor's CUDA graph trees capture and replay graphs whose every tensor is a ``cuda`` tensor, and they manage the
memory of the captured graphs in private pools of CUDA's caching allocator. flagos tensors are CUDA memory on a GPU
node, but they carry the flagos device, so Inductor would skip the graphs for them ("skipping cudagraphs due to
multiple devices"), silently: the user would measure plain compiled code believing it replays graphs. Under the
CPU emulation there is no CUDA graph at all. Until the graph trees learn the flagos device, asking for them stops
the compilation and says what to use instead: flagos' own graphs (``torch_fl/graphs``) for eager code.
"""

from __future__ import annotations


class CudaGraphsUnsupported(RuntimeError):
    """torch.compile(mode="reduce-overhead") or config.triton.cudagraphs on a flagos graph."""


MESSAGE = (
    "torch_fl: torch.compile(mode='reduce-overhead') asks for CUDA graphs, which Inductor's graph trees capture for "
    "'cuda' tensors only; this graph runs on flagos, so they would be skipped without a word. Compile with "
    "mode='default' or mode='max-autotune-no-cudagraphs' (the generated kernels are the same); for graphs on "
    "flagos, capture eager code with torch.flagos.graph or torch.flagos.make_graphed_callables (docs/graphs.md)."
)


def refuse_cudagraphs() -> None:
    from torch._inductor import config

    if config.triton.cudagraphs:
        raise CudaGraphsUnsupported(MESSAGE)
