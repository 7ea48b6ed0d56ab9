"""Start-up: what ``import torch_fl`` does, in order.

Everything that can be wrong with the user's configuration is found first, in one pass (the environment, the conf,
the routes and the providers they name), so a bad configuration raises one ConfigError before anything is
registered, and a process never runs with a partial table.
"""

from __future__ import annotations

import atexit
import os
import sys
from importlib import metadata

import torch

from . import _core, _env, _one_accelerator, compile, flagos, providers, replay
from ._errors import ConfigError
from ._launch import launched_as_cli
from .providers.flaggems import FlagGemsProvider
from .routing import dispatcher as _dispatcher
from .routing import publish as _publish
from .routing import routes as _routes
from .routing.table import RouteTable

try:
    VERSION = metadata.version("torch-fl")
except metadata.PackageNotFoundError:  # running from a source tree without an install
    VERSION = "0+unknown"


def accelerator() -> str:
    return _core.accelerator()


# The configuration error that `python -m torch_fl` defers (launched_as_cli): the CLI reports it as a finding.
deferred: ConfigError | None = None


def _host_cache_through_flagos() -> None:
    """torch.accelerator.empty_host_cache asks torch's host allocator of the accelerator, which flagos has none
    of (torch 2.13 dereferences the missing one and the process dies): flagos answers it with the vendor's host
    cache instead. torch.accelerator.Graph calls it on entry."""
    from . import flagos

    for module in (torch.accelerator, getattr(torch.accelerator, "memory", None)):
        if module is not None and hasattr(module, "empty_host_cache"):
            module.empty_host_cache = flagos.empty_host_cache


def start() -> None:
    global deferred
    providers.set_known_ops(_dispatcher.known_ops)
    try:
        settings, accel, table = check_configuration()
    except ConfigError as exc:
        if not launched_as_cli():
            raise  # `import torch_fl` stops here: nothing is registered
        deferred = exc  # nor here; the CLI says what is wrong
        return
    if accel in ("cuda", "dcu"):
        torch.cuda.init()  # flagos memory comes from CUDA's caching allocator, created here
    _core.init(accel, settings.emu_devices, settings.emu_trap)
    if accel == "cpu" and settings.emu_memory is not None:
        _core.emulation_set_capacity(settings.emu_memory)  # before any flagos allocation
    _register_device()
    _publish.install_provider_calls()
    _routes.follow(_configure_replay)
    _routes.follow(_compiled_code_follows)
    _routes.apply(settings, table)
    _one_accelerator.install()
    compile.install()
    from . import _dlpack, _memory_history, _sharing

    _dlpack.install()  # DLPack in the vendor's device type
    _sharing.install()  # torch.multiprocessing: shared memory under emulation, a clear refusal on GPUs
    from .graphs import _accelerator

    _accelerator.install()  # torch.accelerator.Graph builds flagos graphs (where this torch has the registry)
    _host_cache_through_flagos()
    from . import _data_parallel

    _data_parallel.install()  # nn.DataParallel over flagos devices
    _memory_history.install()  # torch.accelerator.memory._snapshot under emulation
    atexit.register(settle_at_exit)
    atexit.register(_print_replay_stats)
    if torch.distributed.is_available():
        from . import _checkpoint, distributed

        distributed.register()
        _checkpoint.install()  # DCP's writer stages flagos tensors to the host on every vendor
    from . import integrations  # Lightning's accelerator="flagos", now or once Lightning is imported

    integrations.install()


def _configure_replay(state: _routes.State) -> None:
    """The replay cache takes its switches from the settings each applied table came with."""
    settings = state.settings
    replay.configure(enabled=settings.replay, verify=settings.replay_verify, capacity=settings.replay_capacity)


def _compiled_code_follows(state: _routes.State) -> None:
    """Code compiled under other routes must not run (compile.routes_changed says why)."""
    compile.routes_changed()


def check_configuration() -> tuple[_env.Settings, str, RouteTable]:
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
    if "flaggems" not in providers.providers():
        providers.register_provider("flaggems", FlagGemsProvider(accel))
    try:
        table = _routes.resolve(settings, _routes.conf_path(settings, accel))
    except ConfigError as exc:
        if not problems:
            raise  # as it is: a single conf problem keeps its path and line
        problems.extend(exc.problems)
    if problems:
        raise ConfigError(problems)
    return settings, accel, table


def _choose_accelerator(requested: str | None) -> str:
    built = list(_core.built_runtimes())
    if requested is not None:
        if requested not in built:
            raise ConfigError(
                f"{_env.ACCELERATOR_VAR}={requested} is not supported by this build of torch_fl "
                f"(variant {VERSION}); it supports: {', '.join(built)}. Install the wheel for that "
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


def _register_device() -> None:
    torch.utils.rename_privateuse1_backend("flagos")
    torch._register_device_module("flagos", flagos)
    from . import _storage_types

    _storage_types.install(flagos)  # Tensor.storage_type() looks the class up in the device's module
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
    )


def settle_at_exit() -> None:
    """Let the autograd engine's flagos device threads finish before the interpreter goes (see
    settle_autograd_threads in csrc/ops/runtime.cpp); only where autograd has run."""
    if not _one_accelerator.autograd_used():
        return
    try:
        _core.settle_autograd_threads()
    except Exception as exc:  # an exit path must not raise; say what went wrong
        print(f"torch_fl: could not settle the autograd threads at exit: {exc}", file=sys.stderr)


def _print_replay_stats() -> None:
    if "replay" in _routes.state().settings.log:  # FLAGOS_LOG=replay: the per-op statistics of the run
        replay.print_stats()
