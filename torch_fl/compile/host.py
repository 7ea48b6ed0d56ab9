"""Called by the wrapper code Inductor generates for flagos under the CPU emulation (``codegen.EmulationWrapper``).

Inductor's C++ kernels read and write the host memory behind flagos tensors directly, which is what the host-read
trap (FLAGOS_EMU_TRAP=1, csrc/runtime/host_access.h) exists to catch in eager code. A compiled kernel is a
legitimate reader: ``call`` opens the blocks of the kernel's flagos arguments for the duration of the call, as
the router does for its re-tagged calls. Without the trap it is a plain call.
"""

from __future__ import annotations

from typing import Any

import torch

from .. import _core


def _plain(kernel: Any, *args: Any) -> Any:
    return kernel(*args)


def _opened(kernel: Any, *args: Any) -> Any:
    storages = [
        a.untyped_storage().data_ptr() for a in args if isinstance(a, torch.Tensor) and a.device.type == "flagos"
    ]
    access = _core.HostAccess(storages)
    try:
        return kernel(*args)
    finally:
        access.close()


def _choose() -> Any:
    return _opened if _core.host_trap_enabled() else _plain


# The trap is switched on once, at start-up (torch_fl._startup), before any wrapper imports this module.
call = _choose()
