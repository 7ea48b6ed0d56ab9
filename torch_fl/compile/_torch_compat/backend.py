"""Registering flagos with Dynamo and Inductor, and the emulation's C++ scheduling."""

from __future__ import annotations

from typing import Any

from .base import DEVICE


def register_backend(scheduling: Any, wrapper: Any, custom_pass: Any) -> None:
    """``register_backend_for_device(device, scheduling, wrapper, cpp_wrapper, fx_wrapper, custom_pass)``
    (torch >= 2.6 names the last one ``device_custom_pass``)."""
    from torch._inductor.codegen.common import register_backend_for_device

    register_backend_for_device(DEVICE, scheduling, wrapper, device_custom_pass=custom_pass)


def register_op_overrides(overrides: Any) -> None:
    """``get_device_op_overrides`` registers torch's own devices (cpu, cuda, xpu, mps, mtia) lazily, in torch 2.11
    only while its table is empty (later lines keep a flag), and gives any device it lacks the CPU's. Asking for the
    CPU's first fills the table with torch's before flagos joins it, so a cuda graph in this process still gets
    cuda's device calls."""
    from torch._inductor.codegen.common import get_device_op_overrides, register_device_op_overrides

    get_device_op_overrides("cpu")
    register_device_op_overrides(DEVICE, overrides)


def register_interface(interface: type) -> None:
    """Dynamo's registry takes ``flagos`` and each ``flagos:<i>`` (as torch does for ``cuda:<i>``)."""
    from torch._dynamo.device_interface import register_interface_for_device

    register_interface_for_device(DEVICE, interface)
    for index in range(interface.device_count()):
        register_interface_for_device(f"{DEVICE}:{index}", interface)


def schedule_as_cpu() -> None:
    """Under the CPU emulation Inductor's C++ backend generates flagos kernels. Inductor infers the backend from the
    device type in a few places, taking any non-CPU device for a Triton one; for flagos they must answer as for the
    CPU:
    - ``BaseSchedulerNode.is_cpu`` (torch._inductor.scheduler): the scheduler's loop-reordering and fusion
      heuristics for other devices assume Triton's tiling;
    - ``get_current_backend`` (torch._inductor.utils, bound by name in codegen.common and scheduler): the dtype
      propagation and checks of the kernel code generator follow it."""
    import inspect

    from torch._inductor import config, scheduler, utils
    from torch._inductor.codegen import common
    from torch._inductor.scheduler import BaseSchedulerNode

    backend_of = utils.get_current_backend
    if not getattr(backend_of, "__flagos__", False):
        # torch 2.9's takes no device and reads the graph's current one; 2.10 and later take an optional device
        takes_device = bool(inspect.signature(backend_of).parameters)

        def get_current_backend(device_type: str | None = None) -> str:
            if device_type is None:
                from torch._inductor.virtualized import V

                device_type = V.graph.get_current_device_or_throw().type
            if device_type == DEVICE:
                return config.cpu_backend
            # without a device parameter no caller passes one: the graph's device, read above, is the one asked
            return backend_of(device_type) if takes_device else backend_of()

        get_current_backend.__flagos__ = True  # type: ignore[attr-defined]
        for module in (utils, common, scheduler):
            if getattr(module, "get_current_backend", None) is backend_of:
                module.get_current_backend = get_current_backend  # type: ignore[attr-defined]

    original = BaseSchedulerNode.is_cpu
    if getattr(original, "__flagos__", False):
        return

    def is_cpu(self: Any) -> bool:
        device = self.get_device()
        return device is not None and device.type in ("cpu", DEVICE)

    is_cpu.__flagos__ = True  # type: ignore[attr-defined]
    BaseSchedulerNode.is_cpu = is_cpu  # type: ignore[method-assign]
