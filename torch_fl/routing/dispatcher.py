"""Operator facts from torch's dispatcher and the router's registrations.

Which aten ops this torch has, which return views, which the flagos device runs itself, which reach the router and
which the router takes by name. Each is asked of the dispatcher, so none can drift from torch or from the C++
registrations (csrc/dispatch/, csrc/aten/).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from functools import cache

import torch

from .. import _core

# torch's entry points for out-of-tree convolution (csrc/dispatch/router.cpp)
_OVERRIDEABLE_HOOKS = frozenset({"convolution_overrideable", "convolution_backward_overrideable"})
# out= variants whose generic body (CompositeExplicitAutograd) checks the device itself and accepts CPU, CUDA and XPU
# only ("mode only supports CPU, CUDA and XPU device type"): routed by name, the vendor's runs, as for plain CUDA
_DEVICE_CHECKED_OUT_OPS = frozenset({"mode.values"})


@cache
def _aten_schemas() -> tuple[frozenset[str], frozenset[str]]:
    """(every aten op the dispatcher has, as written in confs; those returning views)."""
    names = frozenset(n[6:] for n in torch._C._dispatch_get_all_op_names() if n.startswith("aten::"))
    views: set[str] = set()
    for schema in torch._C._jit_get_all_schemas():  # also lists TorchScript-only ops: filter by names
        if not schema.name.startswith("aten::"):
            continue
        name = schema.name[6:] + (f".{schema.overload_name}" if schema.overload_name else "")
        if name in names and any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns):
            views.add(name)
    return names, frozenset(views)


def known_ops() -> frozenset[str]:
    return _aten_schemas()[0]


def view_ops() -> frozenset[str]:
    return _aten_schemas()[1]


def has_kernel(op: str, key: str) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{op}", key)


class DeviceKernels(Mapping[str, str]):
    """Ops with a flagos kernel of their own (csrc/aten/kernels.cpp): the
    router never sees them, so they can only be native."""

    REASON = (
        "kernel of the flagos device itself (allocation, copy, resize, view, record_stream or the shallow-copy "
        "check); always native"
    )

    @staticmethod
    def _has_kernel(op: str) -> bool:
        return has_kernel(op, "PrivateUse1") and op not in intercepted()

    def __getitem__(self, op: str) -> str:
        if op in known_ops() and self._has_kernel(op):
            return self.REASON
        raise KeyError(op)

    def __contains__(self, op: object) -> bool:
        return isinstance(op, str) and op in known_ops() and self._has_kernel(op)

    def __iter__(self) -> Iterator[str]:
        return (op for op in sorted(known_ops()) if self._has_kernel(op))

    def __len__(self) -> int:
        return sum(1 for _ in self)


@cache
def intercepted() -> frozenset[str]:
    """Router entries by name: from load on the unboxed fast-path ops (csrc/dispatch/fast_ops.cpp), which have a
    flagos kernel but are routed, and then every op ``intercept`` adds."""
    return frozenset(_core.intercepted_ops())


def intercept(ops: Collection[str]) -> None:
    """Have the router take ``ops`` by name, and the ops torch would keep from it otherwise: those implemented
    for every backend through their out= variant, the ``_foreach_*`` family, the convolution hooks (csrc/dispatch/
    router.cpp says why), the out= variants whose generic body refuses devices it does not name, the composites
    that the vendors run as one kernel, and the generic bodies that the vendors replace with a kernel of their own."""
    fused = _vendor_fused_composites()
    ops = {
        *ops,
        *_structured_functional_ops(),
        *_multi_tensor_ops(),
        *_composite_out_ops(),
        *_vendor_replaced_composites(),
        *_OVERRIDEABLE_HOOKS,
        *_DEVICE_CHECKED_OUT_OPS,
        *fused,
    }
    wanted = {op for op in ops if op in fused or not has_kernel(op, "CompositeImplicitAutograd")} - intercepted()
    if wanted:
        _core.intercept_ops(sorted(wanted))
        intercepted.cache_clear()


def fast_path_ops() -> frozenset[str]:
    """Ops whose native route skips boxing (csrc/dispatch/fast_ops.cpp); their other routes, overrides
    and dispatch log are those of every other op."""
    return frozenset(_core.fast_path_ops())


def reaches_router(op: str) -> bool:
    """Whether calls of ``op`` on flagos tensors reach the router: not for the
    device's own bookkeeping kernels, nor for ops torch decomposes above the
    device (CompositeImplicitAutograd); the router then sees their parts."""
    if op in intercepted():
        return True
    return not any(
        has_kernel(op, key) for key in ("PrivateUse1", "CompositeImplicitAutograd", "CompositeExplicitAutograd")
    )


@cache
def transfer_ops() -> frozenset[str]:
    """Ops that move data between devices (csrc/dispatch/data_movement.h): native or a provider, never cpu."""
    bases = frozenset(_core.transfer_ops())
    return frozenset(op for op in known_ops() if op.partition(".")[0] in bases)


@cache
def _multi_tensor_ops() -> frozenset[str]:
    """The ``_foreach_*`` family. torch's generic kernel walks the list one tensor at a time, so on flagos each
    element would reach the router as an op of its own; an accelerator's kernel (CUDA's) takes the whole list
    in a few launches. Routed by name, the native route reaches that kernel."""
    return frozenset(
        op for op in known_ops() if op.startswith("_foreach_") and has_kernel(op, "CompositeExplicitAutograd")
    )


@cache
def _composite_out_ops() -> frozenset[str]:
    """out= variants that the vendors implement but other devices get as torch's generic body (the functional op,
    then a copy into ``out``: addr.out, any.dims_out, ...). Through that body a host ``out`` would be filled by a
    copy, which may join devices, where the vendor's kernel refuses it; routed by name, the vendor's kernel runs."""
    found = set()
    for schema in torch._C._jit_get_all_schemas():
        if not schema.name.startswith("aten::"):
            continue
        op = schema.name[6:] + (f".{schema.overload_name}" if schema.overload_name else "")
        writes_out = any(a.kwarg_only and a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)
        if (
            writes_out
            and op in known_ops()
            and has_kernel(op, "CompositeExplicitAutograd")
            and (has_kernel(op, "CPU") or has_kernel(op, "CUDA"))
        ):
            found.add(op)
    return frozenset(found)


@cache
def _vendor_fused_composites() -> frozenset[str]:
    """Ops torch decomposes on a device without a kernel of its own (CompositeImplicitAutograd) but that the vendors
    run as one kernel: silu_backward is one fused kernel on CUDA and sigmoid, sub and three muls as a composite.
    Routed by name, flagos launches the vendor's kernels, as plain CUDA does. A vendor lacking the kernel (the
    CPU-only list on CUDA) decomposes below the router instead, so the union of both is safe."""
    return frozenset(
        op
        for op in known_ops()
        if has_kernel(op, "CompositeImplicitAutograd") and (has_kernel(op, "CPU") or has_kernel(op, "CUDA"))
    )


@cache
def _vendor_replaced_composites() -> frozenset[str]:
    """Ops torch implements for every device with one generic body (CompositeExplicitAutograd) that a vendor
    replaces with a kernel of its own. Without a name in the router, flagos runs the generic body where plain CUDA
    runs the vendor's kernel: ``_grouped_mm``'s body loops over the groups after reading their offsets on the host,
    which no graph can hold, where CUDA's kernel (bfloat16 on sm90 and sm100) reads them on the device. Routed by
    name, the native route reaches the vendor's kernel, as for plain CUDA."""
    return frozenset(
        op
        for op in known_ops()
        if has_kernel(op, "CompositeExplicitAutograd") and (has_kernel(op, "CPU") or has_kernel(op, "CUDA"))
    )


@cache
def _structured_functional_ops() -> frozenset[str]:
    """Ops torch implements for every backend through their out= variant."""
    return frozenset(op for op in known_ops() if has_kernel(op, "CompositeExplicitAutogradNonFunctional"))
