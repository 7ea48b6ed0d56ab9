"""What Inductor generates for flagos: the wrapper code around the kernels, and the device calls it contains.

Emulation: the kernels are Inductor's C++ kernels for the CPU, called on the host memory behind flagos tensors.
The wrapper calls each one through ``torch_fl.compile.host.call``, which opens the kernel's flagos blocks when the
host-read trap (FLAGOS_EMU_TRAP) is on and is a plain call otherwise.

GPU vendors: the kernels are Inductor's Triton kernels, launched on the vendor's raw stream of the current flagos
stream (the same stream: csrc/runtime/cuda.cpp). The wrapper is Inductor's own; only the device calls it writes
(set the device, guard it, synchronize) name ``torch.flagos``.

Both wrappers allocate flagos buffers through ``torch_fl._core.empty_strided``, as Inductor's own wrapper has a
direct allocation call for cpu and cuda buffers: the generic ``empty_strided(..., device='flagos')`` it writes for
other devices parses keywords and goes through the dispatcher, tens of times per graph call.
"""

from __future__ import annotations

from textwrap import dedent
from typing import Any

from torch._inductor import config as inductor_config
from torch._inductor.codegen.common import DeviceOpOverrides
from torch._inductor.codegen.wrapper import PythonWrapperCodegen, SubgraphPythonWrapperCodegen
from torch._inductor.virtualized import V

_HOST_CALL = "from torch_fl.compile.host import call as flagos_host_call"
_ALLOCATE = "from torch_fl._core import empty_strided as empty_strided_flagos"


def _import_once(wrapper: Any, line: str) -> None:
    """Add an import to the generated module once; a subgraph's imports are its root wrapper's."""
    root = wrapper
    while getattr(root, "parent_wrapper", None) is not None:
        root = root.parent_wrapper
    if not root.imports.contains(line):
        root.imports.writeline(line)


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
        _import_once(self, _HOST_CALL)
        self.writeline(  # type: ignore[attr-defined]
            f"flagos_host_call({', '.join([kernel_name, *call_args])}){self.ending}"  # type: ignore[attr-defined]
        )
        return None


class _FlagosAllocations:
    """Flagos buffers allocated with ``torch_fl._core.empty_strided``; pinned, tracked and other devices' buffers
    as Inductor writes them. The signature is taken loosely: torch lines add parameters after ``stride``."""

    def make_allocation(
        self, name: str, device: Any, dtype: Any, shape: Any, stride: Any, *args: Any, **kwargs: Any
    ) -> str:
        allocation_shape = args[0] if args else kwargs.get("allocation_shape")
        pinned = args[1] if len(args) > 1 else kwargs.get("is_pinned", False)
        tracked = getattr(getattr(inductor_config, "test_configs", None), "track_memory_lifecycle", False)
        if device.type != "flagos" or pinned or tracked:
            return super().make_allocation(name, device, dtype, shape, stride, *args, **kwargs)  # type: ignore[misc]
        _import_once(self, _ALLOCATE)
        tuple_of = self.codegen_python_shape_tuple  # type: ignore[attr-defined]
        view, strides = tuple_of(shape), tuple_of(stride)
        allocated = view if allocation_shape is None else tuple_of(allocation_shape)
        out = f"{name} = empty_strided_flagos({allocated}, {strides}, {dtype})"
        if allocated != view:  # a buffer allocated larger than the view the graph uses, as Inductor does it
            out += f".as_strided({view}, {strides})"
        return out


def _creator(root: type, subgraph: type) -> Any:
    """Inductor's ``create`` for a wrapper pair: ``subgraph`` for a subgraph, ``root`` otherwise."""

    def create(
        is_subgraph: bool, subgraph_name: str | None, parent_wrapper: Any, partition_signatures: Any = None
    ) -> PythonWrapperCodegen:
        if is_subgraph:
            return subgraph(subgraph_name, parent_wrapper, partition_signatures)
        return root()

    return staticmethod(create)


class EmulationSubgraphWrapper(_FlagosAllocations, _HostKernelCalls, SubgraphPythonWrapperCodegen):
    pass


class EmulationWrapper(_FlagosAllocations, _HostKernelCalls, PythonWrapperCodegen):
    """Inductor's wrapper, calling its C++ kernels through the host-access helper."""


class GpuSubgraphWrapper(_FlagosAllocations, SubgraphPythonWrapperCodegen):
    pass


class GpuWrapper(_FlagosAllocations, PythonWrapperCodegen):
    """Inductor's own wrapper for the Triton kernels, with flagos' allocation call."""


EmulationWrapper.create = _creator(EmulationWrapper, EmulationSubgraphWrapper)  # type: ignore[method-assign]
GpuWrapper.create = _creator(GpuWrapper, GpuSubgraphWrapper)  # type: ignore[method-assign]
