"""torch_fl: the ``flagos`` PyTorch device and its per-operator router.

``import torch_fl`` is the opt-in: it selects the vendor runtime (``FLAGOS_ACCELERATOR``), renames PrivateUse1 to
``flagos``, reads the route conf and the ``FLAGOS_OP_*`` overrides, and publishes one complete route table to the
C++ router. Any problem in the configuration stops the import with one ConfigError that lists every problem found,
before anything is registered, so a process never runs with a partial table. ``import torch`` alone never loads
torch_fl unless ``FLAGOS_AUTOLOAD=1`` (the ``_torch_fl_autoload`` module says why).
"""

from __future__ import annotations

import atexit
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path

import torch

from . import _torch_floor

# A torch older than the floor stops here, before the extension fails to load with an undefined symbol.
if (_too_old := _torch_floor.refusal(torch.__version__, str(Path(torch.__file__).parent))) is not None:
    raise _too_old

try:
    from . import _C
except ImportError as _exc:  # typically: importing the source tree instead of the installed wheel
    raise ImportError(
        f"torch_fl's compiled extension is missing from {Path(__file__).parent} ({_exc}). If that is a source "
        "checkout, run Python from another directory so the installed wheel is imported, or build it first "
        "(pip install --no-build-isolation .). `import torch` loads torch_fl only when FLAGOS_AUTOLOAD=1."
    ) from _exc
from . import _conf, _env, _one_accelerator, _routing, _shipped, compile, providers, replay
from . import flagos as flagos
from ._errors import ConfError, ConfigError, EnvError, RouteError, merged
from ._one_accelerator import OneAcceleratorError
from ._routing import Resolved, RouteTable
from .providers import Provider, load_entry_points, register_provider, unregister_provider
from .providers.flaggems import FlagGemsProvider

__all__ = [
    "ConfError",
    "ConfigError",
    "EnvError",
    "OneAcceleratorError",
    "Provider",
    "Resolved",
    "RouteError",
    "accelerator",
    "compile",
    "conf_path",
    "fast_path_ops",
    "flagos",
    "providers",
    "register_provider",
    "reload_routes",
    "replay",
    "route",
    "routes",
    "set_dispatch_log",
    "unregister_provider",
]

try:
    __version__ = metadata.version("torch-fl")
except metadata.PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0+unknown"

CONF_DIR = Path(__file__).with_name("configs")
_KIND_CODES = {"native": 0, "cpu": 1}


@dataclass(frozen=True)
class _State:
    settings: _env.Settings
    conf_path: str
    table: RouteTable


_state: _State | None = None


# ---- operator facts from torch's own registry ----------------------------------


@cache
def _aten_schemas() -> tuple[frozenset[str], frozenset[str]]:
    """(every aten op the dispatcher has, as written in confs; those returning views)."""
    names = frozenset(n[6:] for n in torch._C._dispatch_get_all_op_names() if n.startswith("aten::"))
    views: set[str] = set()
    for schema in torch._C._jit_get_all_schemas():  # also lists TorchScript-only ops: filter by names
        if not schema.name.startswith("aten::"):
            continue
        name = schema.name[6:] + (f".{schema.overload_name}" if schema.overload_name else "")
        if name in names and any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns):
            views.add(name)
    return names, frozenset(views)


def known_ops() -> frozenset[str]:
    return _aten_schemas()[0]


class _DeviceKernels(Mapping[str, str]):
    """Ops with a flagos kernel of their own (csrc/dispatch/kernels.cpp): the
    router never sees them, so they can only be native. Asked of the
    dispatcher, so this list cannot drift from the C++ registrations."""

    REASON = (
        "kernel of the flagos device itself (allocation, copy, resize, view, record_stream or the shallow-copy "
        "check); always native"
    )

    @staticmethod
    def _has_kernel(op: str) -> bool:
        return _has_kernel(op, "PrivateUse1") and op not in _intercepted()

    def __getitem__(self, op: str) -> str:
        if op in known_ops() and self._has_kernel(op):
            return self.REASON
        raise KeyError(op)

    def __contains__(self, op: object) -> bool:
        return isinstance(op, str) and op in known_ops() and self._has_kernel(op)

    def __iter__(self) -> Iterator[str]:
        return (op for op in sorted(known_ops()) if self._has_kernel(op))

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _has_kernel(op: str, key: str) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{op}", key)


def _intercepted() -> frozenset[str]:
    return _INTERCEPTED


# Router entries by name; from load on this holds the unboxed fast-path ops
# (csrc/dispatch/fast_ops.cpp), which have a flagos kernel but are routed.
_INTERCEPTED: frozenset[str] = frozenset(_C.intercepted_ops())


def _intercept(ops: set[str] | frozenset[str]) -> None:
    """Have the router take these ops by name (csrc/dispatch/router.cpp says why)."""
    global _INTERCEPTED
    wanted = {op for op in ops if not _has_kernel(op, "CompositeImplicitAutograd")}
    if wanted - _INTERCEPTED:
        _C.intercept_ops(sorted(wanted - _INTERCEPTED))
        _INTERCEPTED = frozenset(_C.intercepted_ops())


def fast_path_ops() -> frozenset[str]:
    """Ops whose native route skips boxing (csrc/dispatch/fast_ops.cpp); their other routes, overrides
    and dispatch log are those of every other op."""
    return frozenset(_C.fast_path_ops())


def reaches_router(op: str) -> bool:
    """Whether calls of ``op`` on flagos tensors reach the router: not for the
    device's own bookkeeping kernels, nor for ops torch decomposes above the
    device (CompositeImplicitAutograd); the router then sees their parts."""
    if op in _INTERCEPTED:
        return True
    return not any(
        _has_kernel(op, key) for key in ("PrivateUse1", "CompositeImplicitAutograd", "CompositeExplicitAutograd")
    )


# torch's entry points for out-of-tree convolution (csrc/dispatch/router.cpp)
_OVERRIDEABLE_HOOKS = frozenset({"convolution_overrideable", "convolution_backward_overrideable"})


@cache
def _multi_tensor_ops() -> frozenset[str]:
    """The ``_foreach_*`` family. torch's generic kernel walks the list one tensor at a time, so on flagos each
    element would reach the router as an op of its own; an accelerator's kernel (CUDA's) takes the whole list
    in a few launches. Routed by name, the native route reaches that kernel."""
    return frozenset(
        op for op in known_ops() if op.startswith("_foreach_") and _has_kernel(op, "CompositeExplicitAutograd")
    )


@cache
def _structured_functional_ops() -> frozenset[str]:
    """Ops torch implements for every backend through their out= variant."""
    return frozenset(op for op in known_ops() if _has_kernel(op, "CompositeExplicitAutogradNonFunctional"))


# ---- start-up ----------------------------------------------------------------------


def _choose_accelerator(requested: str | None) -> str:
    built = list(_C.built_runtimes())
    if requested is not None:
        if requested not in built:
            raise ConfigError(
                f"{_env.ACCELERATOR_VAR}={requested} is not supported by this build of torch_fl "
                f"(variant {__version__}); it supports: {', '.join(built)}. Install the wheel for that "
                f"accelerator or unset {_env.ACCELERATOR_VAR}."
            )
        if requested in ("cuda", "dcu") and not torch.cuda.is_available():
            raise ConfigError(
                f"{_env.ACCELERATOR_VAR}={requested} but torch sees no GPU (torch.cuda.is_available() is False); "
                f"check the driver and device visibility, or use {_env.ACCELERATOR_VAR}=cpu for emulation."
            )
        return requested
    for name in built:  # best first; emulation always works
        if name == "cpu" or torch.cuda.is_available():
            return name
    return "cpu"


providers.set_known_ops(lambda: known_ops())


def _builtin_providers(accel: str) -> None:
    if "flaggems" not in providers.providers():
        register_provider("flaggems", FlagGemsProvider(accel))


def conf_path(settings: _env.Settings | None = None, accel: str | None = None) -> str:
    settings = settings or _env.read_settings(os.environ)
    accel = accel or _C.accelerator() or "cpu"
    if settings.backend_config:
        return settings.backend_config
    name = settings.conf_name or "default"
    shipped = _shipped.confs(CONF_DIR, accel)
    if name not in shipped:
        raise ConfigError(
            f"{_env.CONF_VAR}={name!r}: no such conf is shipped for {accel}; choose one of {', '.join(shipped)}, "
            f"or give a file with {_env.BACKEND_CONFIG_VAR}=PATH"
        )
    return str(shipped[name])


@cache
def transfer_ops() -> frozenset[str]:
    """Ops that move data between devices (csrc/dispatch/data_movement.h): native or a provider, never cpu."""
    bases = frozenset(_C.transfer_ops())
    return frozenset(op for op in known_ops() if op.partition(".")[0] in bases)


def _resolve(settings: _env.Settings, path: str) -> RouteTable:
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
    known, views = _aten_schemas()
    routes_by_name = providers.providers()
    chain_names = {r for e in conf.entries.values() for r in e.routes}
    chain_names |= set(conf.default.routes if conf.default else ())
    chain_names |= {r for o in settings.overrides for r in o.routes}
    if chain_names - set(routes_by_name) - set(_routing.BUILTIN_ROUTES) - set(_routing.ROUTE_ALIASES):
        load_entry_points()  # an unknown route may be a provider an installed package declares
        routes_by_name = providers.providers()
    return _routing.resolve(
        conf,
        settings.overrides,
        known_ops=known,
        providers=routes_by_name,
        pinned_native=_DeviceKernels(),
        view_ops=views,
        transfer_ops=transfer_ops(),
        decode=_env.decode_op,
    )


def _publish(table: RouteTable) -> None:
    order = sorted({r.route for r in table.entries.values()} - set(_KIND_CODES))
    index = {name: i for i, name in enumerate(order)}

    def code(route: str) -> tuple[int, int]:
        return (_KIND_CODES[route], -1) if route in _KIND_CODES else (2, index[route])

    per_op = {op: code(r.route) for op, r in table.entries.items() if r.route != table.default.route}
    _PROVIDER_ORDER[:] = [providers.providers()[name] for name in order]
    _C.set_routes(code(table.default.route), per_op, order, [p.replay for p in _PROVIDER_ORDER])


_PROVIDER_ORDER: list[Provider] = []


def _call_provider(index: int, op: str, args: tuple, kwargs: dict, record: bool) -> object:
    kernel = _PROVIDER_ORDER[index].kernel(op)
    if record:  # the replay cache has no plan for this call yet (csrc/replay/plan.h)
        return replay.record_call(kernel, args, kwargs)
    return kernel(*args, **kwargs)


def _log_config(state: _State) -> None:
    counts: dict[str, int] = {}
    for r in state.table.entries.values():
        counts[r.route] = counts.get(r.route, 0) + 1
    summary = ", ".join(f"{k}={v}" for k, v in sorted(counts.items())) or "none"
    print(
        f"[flagos config] accelerator={_C.accelerator()} conf={state.conf_path} "
        f"default={state.table.default.route} per-op routes: {summary}; "
        f"overrides: {', '.join(o.var for o in state.settings.overrides) or 'none'}",
        file=sys.stderr,
    )


def _log_fallbacks(table: RouteTable) -> None:
    for r in sorted(table.entries.values(), key=lambda r: r.op):
        for route_name, reason in r.skipped:
            print(f"[flagos fallback] {r.op}: skipped {route_name} ({reason}) -> {r.route}", file=sys.stderr)


def _apply(settings: _env.Settings, table: RouteTable | None = None) -> _State:
    global _state
    path = conf_path(settings, _C.accelerator())
    if table is None:
        table = _resolve(settings, path)  # raises before anything is published
    _intercept(_structured_functional_ops() | _multi_tensor_ops() | _OVERRIDEABLE_HOOKS | set(table.entries))
    _publish(table)
    _C.set_log_dispatch("dispatch" in settings.log)
    replay.configure(enabled=settings.replay, verify=settings.replay_verify, capacity=settings.replay_capacity)
    _state = _State(settings, path, table)
    if "config" in settings.log:
        _log_config(_state)
    if "fallback" in settings.log:
        _log_fallbacks(table)
    return _state


def reload_routes() -> RouteTable:
    """Re-read the conf and FLAGOS_OP_*/FLAGOS_LOG from the environment and
    publish a new table whole (e.g. after registering a provider)."""
    settings = _env.read_settings(os.environ)
    if _state is not None and settings.accelerator not in (None, _C.accelerator()):
        raise ConfigError(
            f"{_env.ACCELERATOR_VAR} changed to {settings.accelerator} after start-up; "
            f"the runtime ({_C.accelerator()}) is chosen once per process"
        )
    table = _apply(settings).table
    compile.routes_changed()
    return table


def routes() -> dict[str, Resolved]:
    """op -> Resolved (route and where it came from), for every op with an
    explicit route, plus ``"default"`` for all others."""
    assert _state is not None
    return {"default": _state.table.default, **_state.table.entries}


def route(op: str) -> Resolved:
    """The route ``op`` (e.g. ``"add.Tensor"``) takes, and where that was decided."""
    assert _state is not None
    if op not in known_ops():
        raise KeyError(
            f"unknown operator {op!r}; {_routing.nearest_ops(op, known_ops())}; "
            "names are aten schema names such as 'add.Tensor'"
        )
    if op in _DeviceKernels():
        return Resolved(op, "native", "flagos device kernel (csrc/dispatch/kernels.cpp)", ("native",), ())
    return _state.table.route_for(op)


def accelerator() -> str:
    return _C.accelerator()


def set_dispatch_log(on: bool) -> None:
    """Switch the per-call dispatch log at run time (FLAGOS_LOG=dispatch at start)."""
    _C.set_log_dispatch(bool(on))


def _register_device() -> None:
    torch.utils.rename_privateuse1_backend("flagos")
    torch._register_device_module("flagos", flagos)
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
    )


def _settle_at_exit() -> None:
    """Let the autograd engine's flagos device threads finish before the interpreter goes (see
    settle_autograd_threads in csrc/python/module.cpp); only where autograd has run."""
    if not _one_accelerator.autograd_used():
        return
    try:
        _C.settle_autograd_threads()
    except Exception as exc:  # an exit path must not raise; say what went wrong
        print(f"torch_fl: could not settle the autograd threads at exit: {exc}", file=sys.stderr)


def _check_configuration() -> tuple[_env.Settings, str, RouteTable]:
    """Everything that can be wrong with the user's configuration, found in one pass: env variables,
    the conf and the routes (with the providers they name), raised together as one ConfigError."""
    settings, problems = _env.read_settings_collecting(os.environ)
    accel = "cpu"
    try:
        accel = _choose_accelerator(settings.accelerator)
    except ConfigError as exc:
        problems.extend(exc.problems)
    if settings.emu_trap and accel != "cpu":
        problems.append(
            f"{_env.EMU_TRAP_VAR}=1 applies to the CPU emulation only, and this process runs "
            f"{_env.ACCELERATOR_VAR}={accel}; unset one of the two"
        )
    _builtin_providers(accel)
    try:
        table = _resolve(settings, conf_path(settings, accel))
    except ConfigError as exc:
        if not problems:
            raise  # as it is: a single conf problem keeps its path and line
        problems.extend(exc.problems)
    if problems:
        raise ConfigError(problems)
    return settings, accel, table


def _init() -> None:
    # Everything that can fail on the user's configuration runs before the first registration.
    settings, accel, table = _check_configuration()
    if accel in ("cuda", "dcu"):
        torch.cuda.init()  # flagos memory comes from CUDA's caching allocator, created here
    _C.init(accel, settings.emu_devices, settings.emu_trap)
    _register_device()
    _C.set_provider_dispatcher(_call_provider)
    _apply(settings, table)
    _one_accelerator.install()
    compile.install()
    atexit.register(_settle_at_exit)
    atexit.register(lambda: _state is not None and "replay" in _state.settings.log and replay.print_stats())
    if torch.distributed.is_available():
        from . import distributed

        distributed.register()


_init()
