"""``torch.flagos``: the device module of the flagos device (also ``torch_fl.flagos``), in the shape of torch.cuda.

A face: it gathers what torch registers as the device module from the modules that hold it (``_device``: devices,
streams, generators; ``_device_api``, ``_device_info``, ``_memory``: the rest of torch.cuda's device API, which
docs/device.md lists with what is left out; ``graphs``; DLPack).
"""

from __future__ import annotations

from . import _memory as memory  # torch.flagos.memory, like torch.cuda.memory
from ._device import *  # noqa: F403
from ._device import __all__ as _device_names
from ._device import _index as _index  # Dynamo's device interface (compile/device.py)
from ._device import _is_in_bad_fork as _is_in_bad_fork  # torch asks a device module before it seeds it
from ._device import _lazy_init as _lazy_init  # torch's factory functions call it once per process
from ._device_api import *  # noqa: F403
from ._device_api import __all__ as _device_api_names
from ._device_info import *  # noqa: F403
from ._device_info import __all__ as _device_info_names
from ._dlpack import from_dlpack
from ._memory import *  # noqa: F403
from ._memory import __all__ as _memory_names
from .graphs import FlagosGraph, graph, graph_pool_handle, is_current_stream_capturing, make_graphed_callables

__all__ = [
    *_device_names,
    "FlagosGraph",
    "from_dlpack",
    "graph",
    "graph_pool_handle",
    "is_current_stream_capturing",
    "make_graphed_callables",
    "memory",
    *_device_api_names,
    *_device_info_names,
    *(n for n in _memory_names if not n.startswith("_")),
]
