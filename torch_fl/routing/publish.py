"""What crosses to the C++ router: a route table in the router's terms, and the way back to a provider's kernel.

The router knows a route by its ``RouteKind`` (csrc/dispatch/router.h, ``_core.RouteKind``) and, for a provider,
by its index in the published table; the provider's name is only for its log and messages.

The way back is the dispatcher's (csrc/dispatch/provider_call.h): the router redispatches a provider call, with
the vendor tensors, to one of two dispatch keys that no torch backend uses, where this module registers a Python
kernel for every operator a provider route serves. ``PrivateUse3`` runs the provider's kernel; ``PrivateUse2``
runs it while the replay recorder watches, and hands the recording to the replay cache before returning. They are
kernels of each operator, not fallbacks of the keys: a composite kernel of torch's (``add.Tensor``'s, through
``add.out``) would take precedence over a fallback, and run instead of the provider.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

import torch

from .. import _chain, _core, providers, replay
from .._env import op_variable
from .._errors import CaptureError
from .._names import CPU, NATIVE
from ..providers import Provider
from .table import Resolved, RouteTable

_BUILTIN_KINDS = {NATIVE: _core.RouteKind.Native, CPU: _core.RouteKind.Cpu}

# The mask's bits above the dtypes' (csrc/dispatch/dtype_gate.h keeps the same numbers): one per input class, set
# where the route serves calls of that class. A route that requires `contiguous` has its `strided` bit clear.
_CLASS_BIT = {"strided": 1 << 63, "0dim": 1 << 62, "broadcast": 1 << 61, "mixed": 1 << 60}
assert set(_CLASS_BIT) == set(_chain.INPUT_CLASSES)


def serves_mask(r: Resolved) -> int:
    """The router's mask of ``r``: the dtypes it serves and the input classes its requirements leave in; every
    bit set for a route without a list."""
    mask = _core.dtype_mask(r.dtypes) | sum(_CLASS_BIT.values())
    for word in r.requires:
        mask &= ~_CLASS_BIT[_chain.REQUIREMENTS[word]]
    return mask


# The providers of the table in force, by the index the router calls them with.
_PROVIDER_ORDER: list[Provider] = []
# The table in force, for the kernels: each op's provider index (the ops whose route is not the default) and
# the default route's provider index (-1: not a provider).
_PROVIDER_OF: dict[str, int] = {}
_DEFAULT_PROVIDER = -1
# The kernels' registrations, which live as long as the process, and the ops they cover.
_LIBRARY: torch.library.Library | None = None
_REGISTERED: set[str] = set()
CALL_KEY, RECORD_KEY = "PrivateUse3", "PrivateUse2"


def publish(table: RouteTable) -> None:
    """Hand ``table`` to the router whole: the router never sees a half-applied table."""
    order = sorted({r.route for r in table.entries.values()} - set(_BUILTIN_KINDS))
    index = {name: i for i, name in enumerate(order)}

    def code(route: str) -> tuple[_core.RouteKind, int]:
        if route in _BUILTIN_KINDS:
            return _BUILTIN_KINDS[route], -1
        return _core.RouteKind.Provider, index[route]

    def full(r: Resolved) -> tuple[_core.RouteKind, int, int, _core.RouteKind]:
        # the calls a list leaves out take a builtin route (table.py), native where there is no list
        otherwise = _BUILTIN_KINDS[r.otherwise] if r.otherwise else _core.RouteKind.Native
        return (*code(r.route), serves_mask(r), otherwise)

    global _DEFAULT_PROVIDER
    per_op = {op: full(r) for op, r in table.entries.items() if (r.route, r.gated()) != (table.default.route, False)}
    _PROVIDER_ORDER[:] = [providers.providers()[name] for name in order]
    _PROVIDER_OF.clear()
    _PROVIDER_OF.update({op: i for op, (kind, i, *_) in per_op.items() if kind == _core.RouteKind.Provider})
    _DEFAULT_PROVIDER = code(table.default.route)[1]
    _register_kernels(_PROVIDER_OF)
    _core.set_routes(code(table.default.route), per_op, order, [p.replay for p in _PROVIDER_ORDER])


def _capturing() -> bool:
    """A GPU graph capture is under way on the current stream. The emulation needs no such check: its capture
    records the flagos call itself, and a replay calls the provider again."""
    return _core.accelerator() in ("cuda", "dcu") and torch.cuda.is_current_stream_capturing()


def _short_name(op: torch._ops.OpOverload) -> str:
    name = op._schema.name.removeprefix("aten::")
    return f"{name}.{op._schema.overload_name}" if op._schema.overload_name else name


def _kernel(op: torch._ops.OpOverload) -> tuple[str, Provider, Callable[..., Any]]:
    name = _short_name(op)
    provider = _PROVIDER_ORDER[_PROVIDER_OF.get(name, _DEFAULT_PROVIDER)]
    if _capturing():
        raise CaptureError(
            f"torch_fl graphs: {name} cannot be captured: its provider route runs Python (not a replayed plan), "
            "whose host work a replay would skip; run the region once before capturing (the replay then records "
            f"a plan) or route it natively ({op_variable(name)}=native)"
        )
    return name, provider, provider.kernel(name)


def _fail(provider: Provider, name: str, what: str) -> None:
    raise RuntimeError(
        f"provider '{provider.name}' returned a wrong result for {name}: {what}. Fix the provider's kernel for "
        f"{name}, or route the op elsewhere ({op_variable(name)}=native)"
    )


def _checked(op: torch._ops.OpOverload, provider: Provider, name: str, result: object) -> object:
    """``result`` where it has the schema's shape of values; a provider's mistake named, not torch's conversion
    error (csrc/dispatch/provider_check.cpp then checks device, shape and dtype)."""
    returns = op._schema.returns
    if len(returns) > 1:
        if not isinstance(result, (tuple, list)):
            _fail(provider, name, f"it returned one value, the schema has {len(returns)}")
        if len(result) != len(returns):
            _fail(provider, name, f"it returned {len(result)} values, the schema has {len(returns)}")
        values = list(result)
    else:
        values = [result] if returns else []
    for i, (value, ret) in enumerate(zip(values, returns, strict=True)):
        wanted = ret.type
        if isinstance(wanted, torch._C.OptionalType):
            if value is None:
                continue
            wanted = wanted.getElementType()
        if isinstance(wanted, torch._C.TensorType) and not isinstance(value, torch.Tensor):
            _fail(provider, name, f"result {i} is not a Tensor ({type(value).__name__})")
    return result


def _call(op: torch._ops.OpOverload, *args: Any, **kwargs: Any) -> object:
    """The kernel on ``CALL_KEY``: the provider's kernel for ``op`` on the vendor tensors."""
    name, provider, kernel = _kernel(op)
    return _checked(op, provider, name, kernel(*args, **kwargs))


def _record(op: torch._ops.OpOverload, *args: Any, **kwargs: Any) -> object:
    """The kernel on ``RECORD_KEY``: the same call, recorded for the replay cache (csrc/replay/plan.h), which
    has no plan for this call yet."""
    name, provider, kernel = _kernel(op)
    result, wire = replay.record_call(kernel, args, kwargs)
    result = _checked(op, provider, name, result)
    _core.submit_recording(wire)
    return result


def _overload(name: str) -> torch._ops.OpOverload:
    base, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten, base), overload or "default")


def _register_kernels(ops: Iterable[str]) -> None:
    """The two kernels of each op a provider route serves, before the router can send it there."""
    if _LIBRARY is None:
        return  # install_provider_calls registers them for the table in force
    for name in sorted(set(ops) - _REGISTERED):
        op = _overload(name)
        _LIBRARY.impl(name, functools.partial(_call, op), CALL_KEY)
        _LIBRARY.impl(name, functools.partial(_record, op), RECORD_KEY)
        _REGISTERED.add(name)


def install_provider_calls() -> None:
    """Have the router call providers through the kernels this module registers."""
    global _LIBRARY
    if _LIBRARY is None:
        _LIBRARY = torch.library.Library("aten", "IMPL")
        _register_kernels(_PROVIDER_OF)
    _core.enable_provider_calls()
