"""The routes in force in this process, and the questions asked of them.

The conf and the FLAGOS_OP_* overrides are resolved against this torch's operators and the registered providers
(``table``), then published to the router whole; a configuration with any problem publishes nothing. The layers
that depend on the routes (compiled code, the replay cache) sit above routing: start-up registers them with
``follow``, and every table applied reaches them from here without this module importing them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from .. import _core, _env, providers
from .._errors import ConfigError, merged
from . import conf as _conf
from . import dispatcher as _dispatcher
from . import log as _log
from . import publish as _publish
from . import shipped as _shipped
from . import table as _table
from .table import Resolved, RouteTable


@dataclass(frozen=True)
class State:
    settings: _env.Settings
    conf_path: str
    table: RouteTable


_state: State | None = None
_followers: list[Callable[[State], None]] = []


def follow(follower: Callable[[State], None]) -> None:
    """Call ``follower`` with the new state each time a table is applied (start-up registers the followers before
    it applies the first table); once per follower, in the order they were registered."""
    if follower not in _followers:
        _followers.append(follower)


def state() -> State:
    """The configuration in force; start-up sets it before ``import torch_fl`` returns."""
    assert _state is not None
    return _state


def conf_path(settings: _env.Settings | None = None, accel: str | None = None) -> str:
    settings = settings or _env.read_settings(os.environ)
    accel = accel or _core.accelerator() or "cpu"
    if settings.backend_config:
        return settings.backend_config
    name = settings.conf_name or "default"
    shipped = _shipped.confs(_shipped.CONF_DIR, accel)
    if name not in shipped:
        raise ConfigError(
            f"{_env.CONF_VAR}={name!r}: no such conf is shipped for {accel}; choose one of {', '.join(shipped)}, "
            f"or give a file with {_env.BACKEND_CONFIG_VAR}=PATH"
        )
    return str(shipped[name])


def resolve(settings: _env.Settings, path: str) -> RouteTable:
    """The table the conf at ``path`` and the overrides of ``settings`` make; raises one ConfigError with every
    problem of the conf's lines and of its routes."""
    conf, errors = _conf.parse_conf_collecting(path)
    try:
        table = _resolve_conf(settings, conf)
    except ConfigError as exc:
        errors.append(exc)
    if (error := merged(errors)) is not None:
        raise error
    _shipped.warn_qualification(path, conf, table, providers.providers())
    return table


def _resolve_conf(settings: _env.Settings, conf: _conf.Conf) -> RouteTable:
    routes_by_name = providers.providers()
    chain_names = {r for e in conf.entries.values() for r in e.routes}
    chain_names |= set(conf.default.routes if conf.default else ())
    chain_names |= {r for o in settings.overrides for r in o.routes}
    if chain_names - set(routes_by_name) - set(_table.BUILTIN_ROUTES) - set(_table.ROUTE_ALIASES):
        providers.load_entry_points()  # an unknown route may be a provider an installed package declares
        routes_by_name = providers.providers()
    return _table.resolve(
        conf,
        settings.overrides,
        known_ops=_dispatcher.known_ops(),
        providers=routes_by_name,
        pinned_native=_dispatcher.DeviceKernels(),
        view_ops=_dispatcher.view_ops(),
        transfer_ops=_dispatcher.transfer_ops(),
        decode=_env.decode_op,
    )


def apply(settings: _env.Settings, table: RouteTable | None = None) -> State:
    """Make ``table`` (resolved from ``settings`` when None) the routes in force, with its logs, and tell the
    followers."""
    global _state
    path = conf_path(settings, _core.accelerator())
    if table is None:
        table = resolve(settings, path)  # raises before anything is published
    _dispatcher.intercept(table.entries)
    _publish.publish(table)
    _core.set_log_dispatch("dispatch" in settings.log)
    _state = State(settings, path, table)
    for follower in _followers:
        follower(_state)
    if "config" in settings.log:
        _log.log_config(settings, path, table)
    if "fallback" in settings.log:
        _log.log_fallbacks(table)
    return _state


def reload_routes() -> RouteTable:
    """Re-read the conf and FLAGOS_OP_*/FLAGOS_LOG from the environment and
    publish a new table whole (e.g. after registering a provider)."""
    settings = _env.read_settings(os.environ)
    if _state is not None and settings.accelerator not in (None, _core.accelerator()):
        raise ConfigError(
            f"{_env.ACCELERATOR_VAR} changed to {settings.accelerator} after start-up; "
            f"the runtime ({_core.accelerator()}) is chosen once per process"
        )
    return apply(settings).table


def routes() -> dict[str, Resolved]:
    """op -> Resolved (route and where it came from), for every op with an
    explicit route, plus ``"default"`` for all others."""
    table = state().table
    return {"default": table.default, **table.entries}


def route(op: str) -> Resolved:
    """The route ``op`` (``"add.Tensor"``, or as torch prints it, ``"aten::add.Tensor"``) takes, and where that
    was decided."""
    table = state().table
    op = op.removeprefix("aten::")
    if op not in _dispatcher.known_ops():
        raise KeyError(
            f"unknown operator {op!r}; {_table.nearest_ops(op, _dispatcher.known_ops())}; "
            "names are aten schema names such as 'add.Tensor'"
        )
    if op in _dispatcher.DeviceKernels():
        return Resolved(op, "native", "flagos device kernel (csrc/aten/kernels.cpp)", ("native",), ())
    return table.route_for(op)
