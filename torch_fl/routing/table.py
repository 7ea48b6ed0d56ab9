"""Turn a parsed conf plus FLAGOS_OP_* overrides into the route table the router uses.

Pure Python (no torch import): the caller passes the operator names, the providers and the
operator policies in, which keeps this testable with fakes. ``resolve`` either returns a
complete new table or raises one ``ConfigError`` listing every problem it found, so a bad
conf never leaves the router half configured and the user fixes all mistakes in one go.

The conf and override objects are duck-typed (see ``conf.Conf`` and ``_env.Override``); route names come from
``torch_fl/_names.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from .._chain import dtypes_of, requirements_of
from .._env import decode_op
from .._errors import ConfigError
from .._hints import close_matches
from .._names import BUILTIN_ROUTES, CPU, NATIVE, ROUTE_ALIASES

__all__ = [
    "BUILTIN_DEFAULT_ORIGIN",
    "nearest_ops",
    "BUILTIN_ROUTES",
    "ROUTE_ALIASES",
    "Provider",
    "Resolved",
    "RouteTable",
    "resolve",
]

BUILTIN_DEFAULT_ORIGIN = "built-in default"
VIEW_KEPT_NATIVE = "view op kept native (the cpu route cannot return a view)"
TRANSFER_KEPT_NATIVE = "data-movement op kept native (the cpu route moves data with it)"
NAME_RULE = "names are aten schema names as in torch.ops.aten.<name>.<overload>"


class Provider(Protocol):
    """What ``resolve`` needs from a kernel provider such as FlagGems."""

    def unavailable_reason(self) -> str | None: ...  # None: usable on this machine

    def supports(self, op: str) -> bool: ...

    def ops(self) -> Iterable[str]: ...


@dataclass(frozen=True)
class Resolved:
    op: str
    route: str
    origin: str  # "path:line", "env FLAGOS_OP_add__Tensor" or "default (path:line)"
    chain: tuple[str, ...]  # as written, aliases normalised
    skipped: tuple[tuple[str, str], ...] = ()  # (route, why it was passed over)
    dtypes: tuple[str, ...] = ()  # the dtypes ``route`` serves (its conf dtype list); () serves every dtype
    otherwise: str | None = None  # the builtin route of the calls ``dtypes`` or ``requires`` leaves out
    requires: tuple[str, ...] = ()  # the input requirements of its list (_chain.REQUIREMENTS): () requires none

    def gated(self) -> bool:
        """The route serves some calls only: the router tests each call (csrc/dispatch/dtype_gate.h)."""
        return bool(self.dtypes or self.requires)

    def serves(self) -> str:
        """``flaggems``, ``flaggems for float32, bfloat16 (native otherwise)`` or ``flaggems for float32 with
        contiguous (native otherwise)``: the route with its gate."""
        if not self.gated():
            return self.route
        which = f" for {', '.join(self.dtypes)}" if self.dtypes else ""
        needs = f" with {', '.join(self.requires)}" if self.requires else ""
        return f"{self.route}{which}{needs} ({self.otherwise} otherwise)"


@dataclass(frozen=True)
class RouteTable:
    default: Resolved
    entries: dict[str, Resolved] = field(default_factory=dict)

    def route_for(self, op: str) -> Resolved:
        """``op``'s route; an op without an entry of its own takes the default's, under its own name."""
        entry = self.entries.get(op)
        return entry if entry is not None else replace(self.default, op=op)


def resolve(
    conf: Any,
    overrides: Sequence[Any],
    *,
    known_ops: Collection[str],
    providers: Mapping[str, Provider],
    pinned_native: Mapping[str, str],
    view_ops: Collection[str],
    transfer_ops: Collection[str] = (),
    decode: Callable[[str, Collection[str]], str] | None = None,
) -> RouteTable:
    """Resolve ``conf`` (``.default``, ``.entries``) and env ``overrides`` into a RouteTable.

    ``transfer_ops`` move data between devices (``_to_copy``, ``copy_`` ...): the cpu route is
    built from them, so they never take it. ``decode`` maps an override's encoded name to an op
    (``_env.decode_op`` by default) and raises ConfigError when it cannot.
    """
    ctx = _Context(
        known_ops=frozenset(known_ops),
        providers=providers,
        pinned=pinned_native,
        views=frozenset(view_ops),
        transfers=frozenset(transfer_ops),
    )
    requests = _conf_requests(conf, ctx)
    requests.update(_override_requests(overrides, ctx, decode or decode_op))
    entries: dict[str, Resolved] = {}
    for request in requests.values():
        resolved = _resolve_chain(request, ctx)
        if resolved is not None:
            entries[request.op] = resolved
    default, provided = _resolve_default(conf.default, ctx, explicit=set(requests))
    entries.update(provided)
    if ctx.problems:
        raise ConfigError(ctx.problems)
    return RouteTable(default=default, entries=entries)


# --- internals -------------------------------------------------------------------------


@dataclass
class _Context:
    known_ops: frozenset[str]
    providers: Mapping[str, Provider]
    pinned: Mapping[str, str]
    views: frozenset[str]
    transfers: frozenset[str] = frozenset()
    problems: list[str] = field(default_factory=list)
    _reasons: dict[str, str | None] = field(default_factory=dict)

    def unavailable(self, route: str) -> str | None:
        # Ask each provider once, and only if a chain names it (asking may import a library).
        if route not in self._reasons:
            self._reasons[route] = self.providers[route].unavailable_reason()
        return self._reasons[route]

    def valid_routes(self) -> list[str]:
        return sorted({*BUILTIN_ROUTES, *ROUTE_ALIASES, *self.providers})


@dataclass(frozen=True)
class _Request:
    op: str
    chain: tuple[str, ...]  # normalised
    written: tuple[str, ...]  # as the user wrote it, for messages
    origin: str
    gates: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (route, its list's words) for routes with a list


def _conf_requests(conf: Any, ctx: _Context) -> dict[str, _Request]:
    requests: dict[str, _Request] = {}
    for op, entry in conf.entries.items():
        if op in ctx.known_ops:
            _add_request(requests, op, tuple(entry.routes), str(entry.origin), ctx, tuple(entry.gates))
        else:
            ctx.problems.append(
                f"{entry.origin}: unknown operator '{op}'; {nearest_ops(op, ctx.known_ops)}; {NAME_RULE}"
            )
    return requests


def _override_requests(
    overrides: Sequence[Any], ctx: _Context, decode: Callable[[str, Collection[str]], str]
) -> dict[str, _Request]:
    requests: dict[str, _Request] = {}
    for override in overrides:
        try:
            op = decode(override.encoded, ctx.known_ops)
        except ConfigError as exc:
            ctx.problems.extend(exc.problems)
            continue
        where = f"env {override.var}"
        if op in requests:
            ctx.problems.append(f"{where}: {op} is already set by {requests[op].origin}; unset one of the two")
        else:
            _add_request(requests, op, tuple(override.routes), where, ctx, tuple(getattr(override, "gates", ())))
    return requests


def _add_request(
    requests: dict[str, _Request],
    op: str,
    written: tuple[str, ...],
    where: str,
    ctx: _Context,
    gates: tuple[tuple[str, tuple[str, ...]], ...] = (),
) -> None:
    """Add the chain ``written`` for ``op`` to ``requests``, or the reasons it cannot be to the problems."""
    chain = _normalise_chain(written, where, f"for {op}", ctx)
    if chain is not None and _policy_allows(op, chain, written, where, ctx):
        requests[op] = _Request(op=op, chain=chain, written=written, origin=where, gates=gates)


def _normalise_chain(written: tuple[str, ...], where: str, what: str, ctx: _Context) -> tuple[str, ...] | None:
    """Map aliases; report unknown names and routes that can never be reached."""
    valid = set(ctx.valid_routes())
    unknown = [route for route in written if route not in valid]
    for route in unknown:
        ctx.problems.append(f"{where}: unknown route '{route}' {what}; valid routes: {', '.join(ctx.valid_routes())}")
    if unknown:
        return None
    chain = tuple(ROUTE_ALIASES.get(route, route) for route in written)
    first_builtin = next((i for i, route in enumerate(chain) if route in BUILTIN_ROUTES), None)
    if first_builtin is not None and first_builtin + 1 < len(chain):
        dead = ", ".join(written[first_builtin + 1 :])
        ctx.problems.append(
            f"{where}: '{', '.join(written)}' {what}: {dead} after '{written[first_builtin]}' is never used, "
            "a builtin route always works; end the chain at the builtin route"
        )
        return None
    return chain


def _policy_allows(op: str, chain: tuple[str, ...], written: tuple[str, ...], where: str, ctx: _Context) -> bool:
    refusal = _policy_refusal(op, chain, ctx)
    if refusal is not None:
        ctx.problems.append(f"{where}: {op} = {', '.join(written)}: {refusal}")
    return refusal is None


def _policy_refusal(op: str, chain: tuple[str, ...], ctx: _Context) -> str | None:
    """Why ``op`` cannot take ``chain`` whatever the providers can do, or None."""
    if op in ctx.pinned and chain != (NATIVE,):
        return (
            f"{op} is device bookkeeping that flagos implements itself ({ctx.pinned[op]}), so it always runs "
            "native; remove this line"
        )
    if op in ctx.transfers and CPU in chain:
        return (
            f"{op} moves data between devices, and the cpu route is made of such moves (it copies its arguments "
            f"to the host and its results back), so it cannot run it; route {op} to native (the device's own "
            "copies) or remove this line"
        )
    if op in ctx.views and CPU in chain:
        return (
            f"{op} returns a view of its input, and the cpu route computes on a host copy, so it cannot return a "
            "view; route it to native or a provider"
        )
    return None


def _walk(op: str, chain: tuple[str, ...], ctx: _Context) -> tuple[str | None, tuple[tuple[str, str], ...]]:
    """First route in ``chain`` that can run ``op`` here, and why earlier ones were passed over."""
    skipped: list[tuple[str, str]] = []
    for route in chain:
        if route in BUILTIN_ROUTES:
            return route, tuple(skipped)
        reason = ctx.unavailable(route)
        if reason is not None:
            skipped.append((route, f"{route}: not available: {reason}"))
        elif not ctx.providers[route].supports(op):
            skipped.append((route, f"{route}: has no kernel for {op}"))
        else:
            return route, tuple(skipped)
    return None, tuple(skipped)


def _resolve_chain(request: _Request, ctx: _Context) -> Resolved | None:
    route, skipped = _walk(request.op, request.chain, ctx)
    if route is None:
        reasons = "; ".join(reason for _, reason in skipped)
        ctx.problems.append(
            f"{request.origin}: no usable route for {request.op} in '{', '.join(request.written)}' ({reasons}); "
            "end the chain with native or cpu so the operator always has a route"
        )
        return None
    resolved = Resolved(op=request.op, route=route, origin=request.origin, chain=request.chain, skipped=skipped)
    return _gated(resolved, dict(request.gates), request.origin, ctx)


def _gated(resolved: Resolved, gates: Mapping[str, tuple[str, ...]], where: str, ctx: _Context) -> Resolved | None:
    """``resolved`` with the list of its route (its dtypes and input requirements) and the route of the calls the
    list leaves out: the first builtin after it in the chain. The router calls one provider per operator, so those
    calls may not go to a second one."""
    words = gates.get(resolved.route)
    if words is None:
        return resolved
    rest = resolved.chain[resolved.chain.index(resolved.route) + 1 :]
    later, _ = _walk(resolved.op, rest, ctx)
    if later not in BUILTIN_ROUTES:
        shown = f"{resolved.route}[{', '.join(words)}]"
        ctx.problems.append(
            f"{where}: {resolved.op}: the calls {shown} leaves out would go to the provider {later}, but the router "
            f"calls one provider per operator; send them to a builtin route ('{shown}, native')"
        )
        return None
    return replace(resolved, dtypes=dtypes_of(words), requires=requirements_of(words), otherwise=later)


def _resolve_default(entry: Any, ctx: _Context, explicit: set[str]) -> tuple[Resolved, dict[str, Resolved]]:
    """The default route, plus an entry for every op that a provider in the default chain takes."""
    fallback = Resolved(op="default", route=NATIVE, origin=BUILTIN_DEFAULT_ORIGIN, chain=(NATIVE,))
    if entry is None:
        return fallback, {}
    where = str(entry.origin)
    chain = _normalise_chain(tuple(entry.routes), where, "in the default chain", ctx)
    if chain is None:
        return fallback, {}
    if not any(route in BUILTIN_ROUTES for route in chain):
        ctx.problems.append(
            f"{where}: default = {', '.join(entry.routes)}: the default chain must end in a builtin route "
            "(native or cpu) so every operator has a route"
        )
        return fallback, {}
    origin = f"default ({where})"
    builtin_at = next(i for i, route in enumerate(chain) if route in BUILTIN_ROUTES)
    provided: dict[str, Resolved] = {}
    gates = dict(getattr(entry, "gates", ()))
    for position, route in enumerate(chain[:builtin_at]):
        if ctx.unavailable(route) is not None:
            continue
        for op in _provider_ops(route, ctx, exclude=explicit | set(provided)):
            skipped = _passed_over(op, chain[:position], ctx)
            one = _gated(Resolved(op=op, route=route, origin=origin, chain=chain, skipped=skipped), gates, where, ctx)
            if one is not None:
                provided[op] = one
    unusable = tuple(
        (route, f"{route}: not available: {ctx.unavailable(route)}")
        for route in chain[:builtin_at]
        if ctx.unavailable(route) is not None
    )
    default = Resolved(op="default", route=chain[builtin_at], origin=origin, chain=chain, skipped=unusable)
    provided.update(_kept_native(default, ctx, exclude=explicit | set(provided)))
    return default, provided


def _passed_over(op: str, earlier: tuple[str, ...], ctx: _Context) -> tuple[tuple[str, str], ...]:
    # An op reaching a later provider was not taken by the earlier ones: unavailable or no kernel.
    skipped = []
    for route in earlier:
        reason = ctx.unavailable(route)
        why = f"not available: {reason}" if reason is not None else f"has no kernel for {op}"
        skipped.append((route, f"{route}: {why}"))
    return tuple(skipped)


def _provider_ops(route: str, ctx: _Context, exclude: set[str]) -> list[str]:
    provider = ctx.providers[route]
    # Ops the provider knows but this torch lacks are ignored: providers track other versions.
    return sorted(
        op
        for op in set(provider.ops())
        if op in ctx.known_ops and op not in exclude and op not in ctx.pinned and provider.supports(op)
    )


def _kept_native(default: Resolved, ctx: _Context, exclude: set[str]) -> dict[str, Resolved]:
    """With a cpu default, view ops still need native (the cpu route copies, so it cannot return a
    view), and so do the data-movement ops (the cpu route is made of them).

    Pinned ops get no entry: the device runs them itself and the router never sees them.
    """
    if default.route != CPU:
        return {}
    kept = {
        op: Resolved(op, NATIVE, TRANSFER_KEPT_NATIVE, (NATIVE,))
        for op in sorted(ctx.transfers)
        if op in ctx.known_ops and op not in exclude and op not in ctx.pinned
    }
    kept.update(
        (op, Resolved(op, NATIVE, VIEW_KEPT_NATIVE, (NATIVE,)))
        for op in sorted(ctx.views)
        if op in ctx.known_ops and op not in exclude and op not in ctx.pinned
    )
    return kept


def nearest_ops(op: str, known_ops: Collection[str]) -> str:
    """'nearest: a, b, c' (in any case), or why there is no suggestion; for messages about unknown names."""
    base, _, overload = op.partition(".")
    if overload == "default" and base in known_ops:
        return f"the default overload is written without a suffix: '{base}'"
    prefix = op.lower() + "."
    overloads = sorted(name for name in known_ops if name.lower().startswith(prefix))
    if not overload and overloads:  # `add` (or `ADD`) for add.Tensor, add.Scalar, ...
        shown = ", ".join(overloads[:8]) + (", ..." if len(overloads) > 8 else "")
        return f"{op} needs an overload: {shown}"
    near = close_matches(op, known_ops, n=5, cutoff=0.6)
    return f"nearest: {', '.join(near)}" if near else "no operator has a similar name"
