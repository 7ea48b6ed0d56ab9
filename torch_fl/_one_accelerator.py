"""PyTorch's one-accelerator rule, made explicit.

Importing torch_fl registers flagos as PrivateUse1, and from then on PyTorch treats flagos as *the* accelerator of
the process (``at::getAccelerator()``). Its autograd engine only gives streams to nodes on that accelerator, so a
backward over tensors of another accelerator (plain ``cuda``) stops on an internal assert deep in the engine
(``opt_ready_stream && opt_parent_stream``). Upstream keeps this rule by design.

This module wraps the engine object that every Python-level backward goes through (``Tensor.backward``,
``torch.autograd.backward`` and ``torch.autograd.grad`` all end in ``Variable._execution_engine.run_backward``):
it refuses such a backward before any work starts, with an error that says why and what to do, and it turns the
internal assert into the same error wherever it still comes from (a graph whose root is not on the accelerator
itself). It also notes that autograd has run, so the exit path knows to settle the engine's device threads.
"""

from __future__ import annotations

from typing import Any

from torch.autograd.variable import Variable

# Device types whose gradients need streams in the autograd engine (at::accelerator::isAccelerator).
_OTHER_ACCELERATORS = frozenset({"cuda", "hip", "xpu", "mps", "mtia", "hpu"})
_ENGINE_ASSERT = "opt_ready_stream && opt_parent_stream"


class OneAcceleratorError(RuntimeError):
    """Autograd over another accelerator's tensors in a process that has imported torch_fl."""


def message(device_type: str) -> str:
    return (
        f"torch_fl: backward() over {device_type} tensors cannot run in a process that has imported torch_fl. "
        "PyTorch allows one accelerator per process, and importing torch_fl made flagos that accelerator "
        "(torch.accelerator.current_accelerator() is now 'flagos'), so PyTorch's autograd engine has no streams "
        f"for {device_type} tensors. Either train on flagos (model.to('flagos'); on a GPU node flagos runs on the "
        f"same GPU), or run the plain {device_type} work in a process that does not import torch_fl (an installed "
        "torch_fl is loaded with torch only when FLAGOS_AUTOLOAD=1)."
    )


class _GuardedEngine:
    """Delegates to torch's engine; checks each backward first."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self.used = False

    def run_backward(self, tensors: Any, *args: Any, **kwargs: Any) -> Any:
        self.used = True
        for t in tensors:
            device = getattr(t, "device", None)  # roots may also be GradientEdges
            if device is not None and device.type in _OTHER_ACCELERATORS:
                raise OneAcceleratorError(message(device.type))
        try:
            return self._engine.run_backward(tensors, *args, **kwargs)
        except RuntimeError as exc:
            if _ENGINE_ASSERT in str(exc) and not isinstance(exc, OneAcceleratorError):
                # the assert does not say which device; cuda is the one it is met with (HIP torch says cuda too)
                raise OneAcceleratorError(message("cuda")) from exc
            raise

    def __getattr__(self, name: str) -> Any:  # queue_callback, is_checkpoint_valid, ...
        return getattr(self._engine, name)


_guard: _GuardedEngine | None = None


def install() -> None:
    global _guard
    if not isinstance(Variable._execution_engine, _GuardedEngine):
        _guard = _GuardedEngine(Variable._execution_engine)
        Variable._execution_engine = _guard


def autograd_used() -> bool:
    return _guard is not None and _guard.used
