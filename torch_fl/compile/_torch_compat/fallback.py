"""Inductor's per-node ATen fallback and its decomposition tables, as the route pass uses them."""

from __future__ import annotations

import functools
from typing import Any

import torch


def mark_fallback(node: torch.fx.Node) -> None:
    """Have Inductor call this node's op through ATen instead of lowering it: GraphLowering.call_function honours
    ``node.meta["should_fallback"]`` (torch >= 2.10; on 2.9 the op's lowering reads it, see ``_fallback_by_node``).
    An op with neither a lowering nor a fallback would get an implicit fallback there, which asserts that the op
    has no decomposition; the decomposition guard (routes.guard_decompositions) keeps it in the table, so the
    fallback is made here, saying so."""
    from torch._inductor import lowering

    node.meta["should_fallback"] = True
    op = node.target
    if op not in lowering.lowerings:
        tag = lowering.get_layout_constraint_tag(op, with_default=True)
        lowering.make_fallback(
            op, layout_constraint=lowering.tag_to_layout_constraint(tag), warn=False, override_decomp=True
        )
    elif not _call_function_honours_should_fallback():
        _fallback_by_node(op)


@functools.cache
def _call_function_honours_should_fallback() -> bool:
    """Whether GraphLowering.call_function reads ``node.meta["should_fallback"]`` itself (torch >= 2.10)."""
    import inspect

    from torch._inductor import graph

    try:
        source = inspect.getsource(graph.GraphLowering.call_function)
    except (OSError, TypeError):  # no sources shipped: assume the newer lines' behaviour
        return True
    return '"should_fallback" in n.meta' in source


def _fallback_by_node(op: Any) -> None:
    """torch 2.9: GraphLowering.call_function lowers every node of an op alike, so the op's lowering is wrapped
    to do what 2.10 does there: a node marked ``should_fallback`` calls the op through ATen (``fallback_handler``,
    not added to the fallback set), every other node keeps torch's lowering. The wrapper is called where 2.10
    checks the mark, after the layout constraints, with the node being lowered in ``V.graph.current_node``."""
    from torch._inductor import lowering
    from torch._inductor.virtualized import V

    original = lowering.lowerings[op]
    if getattr(original, "__flagos__", False):
        return

    @functools.wraps(original)
    def lower(*args: Any, **kwargs: Any) -> Any:
        node = V.graph.current_node
        if node is not None and node.target is op and "should_fallback" in node.meta:
            return lowering.fallback_handler(op, add_to_fallback_set=False)(*args, **kwargs)
        return original(*args, **kwargs)

    lower.__flagos__ = True  # type: ignore[attr-defined]
    lowering.lowerings[op] = lower


def inductor_decomposition_tables() -> list[dict[Any, Any]]:
    """The dicts ``torch._inductor.decomposition.select_decomp_table()`` may return: ``decompositions`` itself
    (with ``config.fallback_random``) or the cached ``fast_random_decomps()`` copy."""
    from torch._inductor import decomposition

    tables = [decomposition.decompositions]
    fast = getattr(decomposition, "fast_random_decomps", None)
    if fast is not None:
        tables.append(fast())
    return tables
