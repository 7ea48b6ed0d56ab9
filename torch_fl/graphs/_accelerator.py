"""``torch.accelerator.Graph`` on flagos: the kernels of the graph operators the core declares.

torch's generic graph (torch >= 2.13) builds its backend through a registry in C++; the core registers one for
flagos (csrc/ops/graph_impl.cpp) that forwards each call to these kernels, each holding a :class:`FlagosGraph` by
a number, as the C++ side holds no Python object.
"""

from __future__ import annotations

import itertools

import torch

from .. import _core

_GRAPHS: dict[int, object] = {}
_NUMBERS = itertools.count(1)
_LIBRARY: torch.library.Library | None = None
# Kernels of operators without tensor arguments: the dispatcher runs the CompositeExplicitAutograd one.
_KEY = "CompositeExplicitAutograd"


def _new(keep_graph: bool) -> int:
    from ._graph import FlagosGraph

    number = next(_NUMBERS)
    _GRAPHS[number] = FlagosGraph(keep_graph=keep_graph)
    return number


def _call(graph: int, method: str) -> None:
    getattr(_GRAPHS[graph], method)()


def _capture_begin(graph: int, has_pool: bool, pool_a: int, pool_b: int, mode: str) -> None:
    _GRAPHS[graph].capture_begin((pool_a, pool_b) if has_pool else None, mode)  # type: ignore[attr-defined]


def _pool(graph: int) -> tuple[int, int]:
    a, b = _GRAPHS[graph].pool()  # type: ignore[attr-defined]
    return int(a), int(b)


def _release(graph: int) -> None:
    _GRAPHS.pop(graph, None)


def install() -> bool:
    """Register the kernels, then the flagos graph with torch; False where this torch has no graph registry."""
    global _LIBRARY
    if _LIBRARY is None:
        library = torch.library.Library("flagos", "IMPL")
        for name, kernel in (
            ("graph_new", _new),
            ("graph_call", _call),
            ("graph_capture_begin", _capture_begin),
            ("graph_pool", _pool),
            ("graph_release", _release),
        ):
            library.impl(name, kernel, _KEY)
        _LIBRARY = library
    return _core.register_graph_impl()
