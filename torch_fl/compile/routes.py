"""Routes under ``torch.compile``: an op whose flagos route is not ``native`` stays out of the generated kernels.

The router decides routes per ATen call, below Inductor; a kernel Inductor generates reads the tensors' memory
itself and never calls the router. So an op routed to ``cpu`` or to a provider (FlagGems) would silently run as
Inductor's own code. Instead, such an op stays an ATen call inside the compiled graph: Inductor calls it through
the dispatcher (an extern "fallback" kernel), the router sees it and runs it on its route, exactly as in eager
mode. Everything around it is still fused. Two places see to it:

- ``RoutePass``, Inductor's post-grad pass for the flagos device, marks every such node of a flagos graph to fall
  back instead of being lowered;
- ``guard_decompositions`` keeps Inductor's decomposition table from splitting such an op into other ops while
  AOTAutograd traces a flagos graph (the decomposition steps aside for flagos tensors, so the op reaches the
  graph whole); other devices' graphs decompose as before.

Routes are read when a graph is compiled. ``torch_fl.reload_routes()`` therefore clears Dynamo's compiled code
(``torch._dynamo.reset()``), so the next call recompiles with the new routes; the cache key of Inductor's FX graph
cache includes the routes that differ from native (``RoutePass.uuid``).

Limits: the route of an op is honoured where the op reaches Inductor as itself. An op that torch decomposes above
the device (CompositeImplicitAutograd) is seen in its parts, as in eager mode; an in-place op is traced as its
functional form, so the functional op's route counts; Inductor's own pattern rewrites (a matmul and a bias add
into one addmm, say) may form or remove an op before this pass sees the graph.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any

import torch
from torch._inductor.custom_graph_pass import CustomGraphModulePass
from torch.utils._pytree import tree_leaves

from .. import _core
from .._names import NATIVE
from ..routing import dispatcher, routes
from . import _torch_compat


def op_name(op: Any) -> str | None:
    """The conf name of an ATen overload ("add.Tensor", "native_layer_norm"), or None for other ops."""
    if not isinstance(op, torch._ops.OpOverload) or op.namespace != "aten":
        return None
    schema = op._schema
    return schema.name[6:] + (f".{schema.overload_name}" if schema.overload_name else "")


def route_of(name: str) -> str:
    """The route calls of ``name`` on flagos take in eager mode now."""
    if name not in dispatcher.known_ops() or not dispatcher.reaches_router(name):
        return NATIVE
    return routes.route(name).route


def kept_out(op: Any) -> str | None:
    """The route that keeps ``op`` out of the generated kernels on flagos, or None where Inductor may lower it."""
    name = op_name(op)
    if name is None:
        return None
    route = route_of(name)
    return None if route == NATIVE else route


def _on_flagos(value: Any) -> bool:
    return any(isinstance(v, torch.Tensor) and v.device.type == "flagos" for v in tree_leaves(value))


def _node_on_flagos(node: torch.fx.Node) -> bool:
    values = [node.meta.get("val")] + [a.meta.get("val") for a in node.all_input_nodes]
    return _on_flagos(values)


class RoutePass(CustomGraphModulePass):
    """Marks the flagos nodes whose ops are routed off native as fallbacks (Inductor calls them through ATen)."""

    def __call__(self, gm: torch.fx.GraphModule) -> None:
        from .graphs import refuse_cudagraphs

        refuse_cudagraphs()  # Inductor runs this pass on flagos graphs only: the place to refuse them once
        for node in gm.graph.nodes:
            if node.op == "call_function" and kept_out(node.target) and _node_on_flagos(node):
                _torch_compat.mark_fallback(node)

    def uuid(self) -> str:
        return _uuid(_routes_key())


def _routes_key() -> tuple[str, tuple[tuple[str, str], ...]]:
    table = routes.routes()
    default = table.pop("default").route
    return default, tuple(sorted((op, r.route) for op, r in table.items() if r.route != NATIVE))


@functools.lru_cache(maxsize=8)
def _uuid(key: tuple[str, tuple[tuple[str, str], ...]]) -> str:
    digest = hashlib.sha256(repr((_core.accelerator(), key)).encode())
    for source in sorted(Path(__file__).parent.glob("*.py")):  # a change of this package's code is a new key
        digest.update(source.read_bytes())
    return digest.hexdigest()


# ---- the decomposition guard ------------------------------------------------------------------------------------


class _StepAside:
    """A decomposition that declines (NotImplemented) for flagos tensors whose op is routed off native."""

    def __init__(self, op: Any, decomposition: Any) -> None:
        self.op = op
        self.decomposition = decomposition
        functools.update_wrapper(self, decomposition)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _on_flagos((args, kwargs)) and kept_out(self.op):
            return NotImplemented
        return self.decomposition(*args, **kwargs)


def guard_decompositions() -> list[str]:
    """Wrap the decompositions of the ops routed off native now, in each table Inductor may trace with; returns
    the names newly guarded. Called at registration and whenever routes are reloaded."""
    guarded: list[str] = []
    for table in _torch_compat.inductor_decomposition_tables():
        for op, decomposition in list(table.items()):
            if isinstance(decomposition, _StepAside) or not kept_out(op):
                continue
            table[op] = _StepAside(op, decomposition)
            guarded.append(op_name(op) or str(op))
    return sorted(set(guarded))
