"""mode="reduce-overhead" (CUDA graphs) on flagos: where it runs and where it is refused, at compile time.

On a GPU vendor (CUDA, DCU) a flagos graph runs through flagos graphs (``graph_runner``), once the hooks of
``_torch_compat/cudagraphs.py`` are in place (``enable``). Under the CPU emulation it is refused: Inductor's
generated C++ kernels run outside the router, so a recording of the flagos op stream would miss their work. A GPU
vendor whose torch line lacks what the hooks need is refused too, naming what is missing.
"""

from __future__ import annotations

import warnings


class CudaGraphsUnsupported(RuntimeError):
    """torch.compile(mode="reduce-overhead") or config.triton.cudagraphs on a flagos graph where it cannot run."""


EMULATION = (
    "torch_fl: torch.compile(mode='reduce-overhead') captures a graph of the compiled kernels, which runs on flagos "
    "over CUDA or DCU; this process runs the CPU emulation (FLAGOS_ACCELERATOR=cpu), whose compiled C++ kernels "
    "no flagos graph can record. Compile with mode='default' or mode='max-autotune-no-cudagraphs' here; to test "
    "graph semantics on the emulation, capture eager code with torch.flagos.graph or "
    "torch.flagos.make_graphed_callables (docs/graphs.md)."
)

_missing: list[str] | None = None  # None: not enabled on this process's vendor; []: enabled


def enable(vendor_type: str) -> None:
    """Install the hooks that run flagos graphs under reduce-overhead (GPU vendors); warn and keep the refusal
    where this torch line lacks what they need."""
    global _missing
    from . import graph_runner
    from ._torch_compat import cudagraphs

    _missing = cudagraphs.install(vendor_type, lambda *args, **kwargs: graph_runner.make_runner(*args, **kwargs))
    if _missing:
        warnings.warn(_gpu_message(), RuntimeWarning, stacklevel=2)


def _gpu_message() -> str:
    import torch

    return (
        f"torch_fl: torch.compile(mode='reduce-overhead') cannot run flagos graphs with torch {torch.__version__}, "
        f"which lacks: {'; '.join(_missing or [])} (torch_fl/compile/_torch_compat/cudagraphs.py). Compile with "
        "mode='default' or mode='max-autotune-no-cudagraphs', or capture eager code with torch.flagos.graph."
    )


def refuse_cudagraphs() -> None:
    """Called for each flagos graph Inductor compiles: stop a request for CUDA graphs that cannot be served."""
    from torch._inductor import config

    if not config.triton.cudagraphs or _missing == []:
        return
    raise CudaGraphsUnsupported(EMULATION if _missing is None else _gpu_message())
