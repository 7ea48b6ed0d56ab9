"""Graph capture and replay on flagos, in the shape of ``torch.cuda``'s graph API (``torch.flagos.FlagosGraph``,
``torch.flagos.graph``, ``graph_pool_handle``, ``make_graphed_callables``).

The vendor decides what a graph is: on CUDA (and DCU) torch's own CUDA graph over the flagos kernels
(``_cuda.py``), under the CPU emulation a recording of the flagos op stream that a replay reruns into the same
tensors (``_emulation.py``). Both refuse at capture time, naming the op, what a replay could not repeat
(``_capture.py``). ``_graph.py`` holds the graph and its capture block, ``_callables.py`` the graphed callables.
"""

from .._errors import CaptureError
from ._callables import make_graphed_callables
from ._graph import FlagosGraph, graph, graph_pool_handle, is_current_stream_capturing

__all__ = [
    "CaptureError",
    "FlagosGraph",
    "graph",
    "graph_pool_handle",
    "is_current_stream_capturing",
    "make_graphed_callables",
]
