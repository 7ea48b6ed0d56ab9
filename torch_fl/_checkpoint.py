"""Distributed checkpoints (``torch.distributed.checkpoint``) of flagos tensors, on every vendor.

DCP's file writer copies device tensors to the host through ``_OverlappingCpuLoader``, which moves only the tensors
of the first device type that torch finds available. Wherever CUDA is available that is ``cuda``: on a CUDA vendor,
every flagos process. Its flagos tensors then reach the writer still on the device and the save fails ("Tensor must
be on CPU"). The emulation, where no CUDA is available, finds flagos itself and is unaffected. The adapter hands
that loader flagos tensors already copied to the host; every other value takes torch's own path, and a torch line
without the loader is left as it is.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch

from ._after_import import after_import

WRITER = "torch.distributed.checkpoint.filesystem"


def _on_host(resolve: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def resolve_on_host(item: Any) -> Any:
        value = resolve(item)
        if isinstance(value, torch.Tensor) and value.device.type == "flagos":
            return value.detach().cpu()
        return value

    return resolve_on_host


def _adapt(module: ModuleType) -> None:
    loader = getattr(module, "_OverlappingCpuLoader", None)
    if loader is None or getattr(loader.__init__, "__flagos__", False):
        return
    init = loader.__init__

    @functools.wraps(init)
    def __init__(self: Any, resolve_fun: Callable[[Any], Any], *args: Any, **kwargs: Any) -> None:  # noqa: N807
        init(self, _on_host(resolve_fun), *args, **kwargs)

    __init__.__flagos__ = True  # type: ignore[attr-defined]
    loader.__init__ = __init__


def install() -> None:
    """Adapt DCP's writer now if it is imported, else right after its first import (done by ``import torch_fl``)."""
    after_import([WRITER], _adapt)
