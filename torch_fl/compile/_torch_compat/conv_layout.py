"""The memory format of a flagos convolution's fake result on a GPU vendor (torch.compile, export).

FakeTensor's convolution asks ``torch._C._conv_determine_backend_memory_format`` with the backend that
``torch._C._select_conv_backend`` picked; for flagos tensors that is ``Overrideable``, whose answer is always
contiguous. The real flagos convolution runs the vendor's own (the router re-tags it to the vendor's device), and
that picks cuDNN on CUDA (MIOpen on DCU) and its format: channels_last when the input or the weight is.
Inductor's layout optimisation makes channels_last weights for every graph with convolutions, so the compiled
graph's stride check of the convolution's output failed on ResNet-50 (a GPU node, torch 2.11). The hook answers an
``Overrideable`` flagos convolution as the vendor's library answers: with cuDNN turned off (``torch.backends.cudnn``)
the vendor takes a native kernel, whose output is contiguous, so torch's own answer stands.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .base import DEVICE

NAME = "_conv_determine_backend_memory_format"


def _vendor_backend(vendor_type: str) -> Any:
    backends = torch._C._ConvBackend
    return backends.Miopen if vendor_type == "dcu" or torch.version.hip else backends.Cudnn


def hooked(original: Callable[..., Any], vendor_type: str) -> Callable[..., Any]:
    """``original`` (torch's function), answering for flagos tensors as ``vendor_type``'s library does."""
    vendor = _vendor_backend(vendor_type)
    overrideable = torch._C._ConvBackend.Overrideable

    def determine(input: Any, weight: Any, backend: Any) -> Any:
        if backend == overrideable and input.device.type == DEVICE and torch.backends.cudnn.enabled:
            return original(input, weight, vendor)
        return original(input, weight, backend)

    determine.__flagos__ = True  # type: ignore[attr-defined]
    determine.__wrapped__ = original  # type: ignore[attr-defined]
    return determine


def follow_vendor_conv_layout(vendor_type: str) -> None:
    """Install the hook on ``torch._C``, where FakeTensor's convolution looks the function up at each call."""
    current = getattr(torch._C, NAME)
    if not getattr(current, "__flagos__", False):
        setattr(torch._C, NAME, hooked(current, vendor_type))


def problems() -> list[str]:
    """What the hook needs of this torch line."""
    found = [] if callable(getattr(torch._C, NAME, None)) else [f"torch._C.{NAME}"]
    backends = getattr(torch._C, "_ConvBackend", None)
    if backends is None or not all(hasattr(backends, n) for n in ("Overrideable", "Cudnn", "Miopen")):
        found.append("torch._C._ConvBackend with Overrideable, Cudnn and Miopen")
    return found
