"""torch_fl: the ``flagos`` PyTorch device and its per-operator router.

``import torch_fl`` is the opt-in: it selects the vendor runtime (``FLAGOS_ACCELERATOR``), renames PrivateUse1 to
``flagos``, reads the route conf and the ``FLAGOS_OP_*`` overrides, and publishes one complete route table to the
C++ router (``_startup`` does it, in that order). Any problem in the configuration stops the import with one
``ConfigError`` that lists every problem found, before anything is registered, so a process never runs with a
partial table. ``import torch`` alone never loads torch_fl unless ``FLAGOS_AUTOLOAD=1`` (the
``_torch_fl_autoload`` module says why).
"""

from __future__ import annotations

from pathlib import Path

import torch

from . import _launch, _torch_floor, _torch_line

# A torch older than the floor stops here, before the core fails to load with an undefined symbol.
if (_too_old := _torch_floor.refusal(torch.__version__, str(Path(torch.__file__).parent))) is not None:
    raise _too_old
# So does a torch of another line than the installed wheel's, with the pip line of the torch that is there.
if (_wrong_line := _torch_line.check(torch, Path(__file__).parent)) is not None:
    if _launch.launched_as_cli():
        raise SystemExit(str(_wrong_line))  # `python -m torch_fl info --check`: the message and exit 1, no traceback
    raise _wrong_line

from . import _core as _core  # loads the compiled core; says how to get one where it is missing
from . import _startup, compile, providers, replay
from . import flagos as flagos
from ._errors import ConfError, ConfigError, EnvError, RouteError
from ._one_accelerator import OneAcceleratorError
from ._startup import accelerator
from .providers import Provider, register_provider, unregister_provider
from .providers import load_entry_points as load_entry_points
from .providers.flaggems import FlagGemsProvider as FlagGemsProvider
from .routing.dispatcher import fast_path_ops
from .routing.dispatcher import known_ops as known_ops
from .routing.dispatcher import reaches_router as reaches_router
from .routing.dispatcher import transfer_ops as transfer_ops
from .routing.log import set_dispatch_log
from .routing.routes import conf_path, reload_routes, route, routes
from .routing.shipped import CONF_DIR as CONF_DIR
from .routing.table import Resolved
from .routing.table import RouteTable as RouteTable

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

__version__ = _startup.VERSION

_startup.start()
