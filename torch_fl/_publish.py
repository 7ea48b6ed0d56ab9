"""What crosses to the C++ router: a route table in the router's terms, and the way back to a provider's kernel.

The router knows a route by its ``RouteKind`` (csrc/dispatch/router.h, bound as ``_C.RouteKind``) and, for a
provider, by its index in the published table; the provider's name is only for its log and messages.
"""

from __future__ import annotations

import torch

from . import _C, providers, replay
from ._env import op_variable
from ._names import CPU, NATIVE
from ._routing import RouteTable
from .providers import Provider

_BUILTIN_KINDS = {NATIVE: _C.RouteKind.Native, CPU: _C.RouteKind.Cpu}

# The providers of the table in force, by the index the router calls them with.
_PROVIDER_ORDER: list[Provider] = []


def publish(table: RouteTable) -> None:
    """Hand ``table`` to the router whole: the router never sees a half-applied table."""
    order = sorted({r.route for r in table.entries.values()} - set(_BUILTIN_KINDS))
    index = {name: i for i, name in enumerate(order)}

    def code(route: str) -> tuple[_C.RouteKind, int]:
        if route in _BUILTIN_KINDS:
            return _BUILTIN_KINDS[route], -1
        return _C.RouteKind.Provider, index[route]

    per_op = {op: code(r.route) for op, r in table.entries.items() if r.route != table.default.route}
    _PROVIDER_ORDER[:] = [providers.providers()[name] for name in order]
    _C.set_routes(code(table.default.route), per_op, order, [p.replay for p in _PROVIDER_ORDER])


def _capturing() -> bool:
    """A GPU graph capture is under way on the current stream. The emulation needs no such check: its capture
    records the flagos call itself, and a replay calls the provider again."""
    return _C.accelerator() in ("cuda", "dcu") and torch.cuda.is_current_stream_capturing()


def call_provider(index: int, op: str, args: tuple, kwargs: dict, record: bool) -> object:
    """The router's call into Python for a provider route (installed with ``_C.set_provider_dispatcher``)."""
    kernel = _PROVIDER_ORDER[index].kernel(op)
    if _capturing():
        from .graphs import CaptureError

        raise CaptureError(
            f"torch_fl graphs: {op} cannot be captured: its provider route runs Python (not a replayed plan), "
            "whose host work a replay would skip; run the region once before capturing (the replay then records "
            f"a plan) or route it natively ({op_variable(op)}=native)"
        )
    if record:  # the replay cache has no plan for this call yet (csrc/replay/plan.h)
        return replay.record_call(kernel, args, kwargs)
    return kernel(*args, **kwargs)
