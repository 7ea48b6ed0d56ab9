"""The two parts of flagos' compile registration (``torch_fl.compile`` says when each runs)."""

from __future__ import annotations

from .. import _core
from . import _torch_compat


def interface() -> None:
    """Dynamo's device interface for flagos."""
    from .device import FlagosInterface

    _torch_compat.register_interface(FlagosInterface)


def inductor() -> None:
    """Inductor's backend, device op overrides and route pass for flagos, for this process's vendor."""
    from . import codegen, graphs, routes

    gpu = _core.accelerator() in ("cuda", "dcu")
    _torch_compat.supply_fused_attention_backward_meta()
    missing = _torch_compat.problems(gpu)
    if missing:
        raise RuntimeError("this torch line lacks: " + "; ".join(missing))
    if gpu:
        from torch._inductor.codegen.triton import TritonScheduling

        _torch_compat.declare_gpu()
        _torch_compat.tune_triton_for_vendor("cuda")  # HIP builds of torch call their GPUs cuda too
        _torch_compat.profile_on_vendor("cuda")
        _torch_compat.share_template_heuristics("cuda")
        _torch_compat.enable_vendor_features("cuda")
        _torch_compat.follow_vendor_conv_layout(_core.accelerator())
        graphs.enable("cuda")  # mode="reduce-overhead" through flagos graphs
        _torch_compat.register_op_overrides(codegen.GpuOpOverrides())
        _torch_compat.register_backend(TritonScheduling, codegen.GpuWrapper, routes.RoutePass())
    else:
        from torch._inductor.codegen.cpp import CppScheduling

        _torch_compat.schedule_as_cpu()
        _torch_compat.share_template_heuristics("cpu")
        _torch_compat.register_op_overrides(codegen.EmulationOpOverrides())
        _torch_compat.register_backend(CppScheduling, codegen.EmulationWrapper, routes.RoutePass())
    _torch_compat.keep_fused_attention_extern()
    routes.guard_decompositions()
