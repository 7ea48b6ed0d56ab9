"""The self-check of the internals the other modules of this package lean on."""

from __future__ import annotations

from . import conv_layout
from .attention import _fused_attention_problems
from .fallback import _call_function_honours_should_fallback
from .gpu import GPU_TYPE_USERS, PROFILER_BENCH, _profiler_benches


def problems(gpu: bool) -> list[str]:
    """What this torch line lacks of the internals above that a GPU vendor (``gpu``) or the CPU emulation needs,
    one line each (empty when all are there): registration refuses with this list rather than failing halfway,
    and the compile suite asserts it is empty for both."""
    import importlib
    import inspect

    from torch._dynamo import device_interface
    from torch._inductor import decomposition, graph, lowering, scheduler, utils
    from torch._inductor.codegen import common
    from torch._inductor.runtime import hints

    found: list[str] = []

    def need(ok: bool, what: str) -> None:
        if not ok:
            found.append(what)

    if gpu:
        need(isinstance(getattr(utils, "GPU_TYPES", None), list), "torch._inductor.utils.GPU_TYPES (a list)")
        need(
            isinstance(inspect.getattr_static(hints.DeviceProperties, "create", None), classmethod),
            "DeviceProperties.create (a classmethod)",
        )
        gpu_type = getattr(utils, "get_gpu_type", None)
        torch_own = gpu_type.__wrapped__ if getattr(gpu_type, "__flagos__", False) else gpu_type  # type: ignore[union-attr]
        need(
            callable(torch_own) and getattr(torch_own, "__module__", None) == utils.__name__,
            "torch._inductor.utils.get_gpu_type (defined there, so modules imported later bind torch_fl's)",
        )
        benches = _profiler_benches()
        need(
            len(benches) == 1 or (not benches and callable(getattr(utils, PROFILER_BENCH[0], None))),
            "one of torch._inductor.utils." + "/".join(PROFILER_BENCH) + " reading get_gpu_type (the profiler bench), "
            f"or {PROFILER_BENCH[0]} timing on cuda by name (torch <= 2.10)",
        )
        for name in GPU_TYPE_USERS:
            try:
                bound = getattr(importlib.import_module(name), "get_gpu_type", None)
            except ImportError:
                bound = None
            need(bound is gpu_type, f"{name} binds torch._inductor.utils.get_gpu_type by name")
        found.extend(conv_layout.problems())
    else:
        need(callable(getattr(utils, "get_current_backend", None)), "torch._inductor.utils.get_current_backend")
        need(
            getattr(common, "get_current_backend", None) is getattr(utils, "get_current_backend", 0),
            "torch._inductor.codegen.common binds get_current_backend by name",
        )
        need(callable(getattr(scheduler.BaseSchedulerNode, "is_cpu", None)), "BaseSchedulerNode.is_cpu")
    need(
        "device_custom_pass" in inspect.signature(common.register_backend_for_device).parameters,
        "register_backend_for_device(device_custom_pass=...)",
    )
    need(callable(getattr(common, "register_device_op_overrides", None)), "register_device_op_overrides")
    need(callable(getattr(device_interface, "register_interface_for_device", None)), "register_interface_for_device")
    need(
        "override_decomp" in inspect.signature(lowering.make_fallback).parameters,
        "lowering.make_fallback(override_decomp=...)",
    )
    need(
        callable(getattr(lowering, "tag_to_layout_constraint", None))
        and callable(getattr(lowering, "get_layout_constraint_tag", None)),
        "lowering's layout-constraint helpers",
    )
    need(isinstance(getattr(decomposition, "decompositions", None), dict), "Inductor's decomposition table")
    found.extend(_fused_attention_problems())
    if not _call_function_honours_should_fallback():  # torch 2.9: the per-node fallback is ours (_fallback_by_node)
        need(isinstance(getattr(lowering, "lowerings", None), dict), "torch._inductor.lowering.lowerings (a dict)")
        need(
            "add_to_fallback_set" in inspect.signature(lowering.fallback_handler).parameters,
            "lowering.fallback_handler(add_to_fallback_set=...)",
        )
        need(hasattr(graph.GraphLowering, "call_function"), "GraphLowering.call_function")
    return found
