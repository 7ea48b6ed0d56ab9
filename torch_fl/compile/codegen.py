"""What Inductor generates for flagos: the wrapper code around the kernels, and the device calls it contains.

Emulation: the kernels are Inductor's C++ kernels for the CPU, called on the host memory behind flagos tensors.
The wrapper calls each one through ``torch_fl.compile.host.call``, which opens the kernel's flagos blocks when the
host-read trap (FLAGOS_EMU_TRAP) is on and is a plain call otherwise.

GPU vendors: the kernels are Inductor's Triton kernels, launched on the vendor's raw stream of the current flagos
stream (the same stream: csrc/runtime/cuda.cpp). The wrapper is Inductor's own; only the device calls it writes
(set the device, guard it, synchronize) name ``torch.flagos``.
"""

from __future__ import annotations

from textwrap import dedent
from typing import Any

from torch._inductor.codegen.common import DeviceOpOverrides
from torch._inductor.codegen.wrapper import PythonWrapperCodegen, SubgraphPythonWrapperCodegen
from torch._inductor.virtualized import V

_HOST_CALL = "from torch_fl.compile.host import call as flagos_host_call"


class _FlagosDeviceCalls(DeviceOpOverrides):
    """The device calls every vendor's wrapper writes the same way: through ``torch.flagos``."""

    def set_device(self, device_idx: int) -> str:
        return f"torch.flagos.set_device({device_idx})"

    def synchronize(self) -> str:
        return "torch.flagos.synchronize()"

    def device_guard(self, device_idx: int) -> str:
        return f"torch.flagos.device({device_idx})"

    def current_stream(self) -> str:
        return "torch.flagos.current_stream()"


class EmulationOpOverrides(_FlagosDeviceCalls):
    """Device calls in the wrapper under the CPU emulation: kernels run on the calling thread, stream 0."""

    def import_get_raw_stream_as(self, name: str) -> str:
        return dedent(
            f"""
            def {name}(_):
                return 0
            """
        )

    def cpp_kernel_type(self) -> str:
        return "void*"


class GpuOpOverrides(_FlagosDeviceCalls):
    """Device calls in the wrapper on a GPU vendor: the raw stream is the vendor's current stream, which is the
    current flagos stream."""

    def import_get_raw_stream_as(self, name: str) -> str:
        return f"from torch._C import _cuda_getCurrentRawStream as {name}"

    def cpp_kernel_type(self) -> str:
        return "CUfunction"


class _HostKernelCalls:
    """Calls Inductor's C++ kernels for flagos tensors the way it calls them for CPU tensors, through the
    host-access helper."""

    def _generate_kernel_call_helper(
        self, kernel_name: str, call_args: list[str], *, device: Any = None, triton: bool = True, **kwargs: Any
    ) -> None:
        device = device or V.graph.get_current_device_or_throw()
        if triton or device.type != "flagos":
            return super()._generate_kernel_call_helper(  # type: ignore[misc]
                kernel_name, call_args, device=device, triton=triton, **kwargs
            )
        root: Any = self
        while getattr(root, "parent_wrapper", None) is not None:  # a subgraph's imports are its root's
            root = root.parent_wrapper
        if not root.imports.contains(_HOST_CALL):
            root.imports.writeline(_HOST_CALL)
        self.writeline(  # type: ignore[attr-defined]
            f"flagos_host_call({', '.join([kernel_name, *call_args])}){self.ending}"  # type: ignore[attr-defined]
        )
        return None


class EmulationSubgraphWrapper(_HostKernelCalls, SubgraphPythonWrapperCodegen):
    pass


class EmulationWrapper(_HostKernelCalls, PythonWrapperCodegen):
    @staticmethod
    def create(
        is_subgraph: bool, subgraph_name: str | None, parent_wrapper: Any, partition_signatures: Any = None
    ) -> PythonWrapperCodegen:
        if is_subgraph:
            return EmulationSubgraphWrapper(subgraph_name, parent_wrapper, partition_signatures)
        return EmulationWrapper()
