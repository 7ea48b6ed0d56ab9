"""Every place where torch_fl's compile support leans on torch internals that change between torch lines.

Checked against torch 2.9 (DTK 26.04's line), 2.10, 2.11 (the H200 node), 2.13 (cpu CI) and 2.14 (the cpu
index's second line). Each function names what it relies on, so a new torch line is checked here and nowhere else.
One module per concern:
  fallback    Inductor's per-node ATen fallback and its decomposition tables (the route pass)
  attention   the fused attention hook's ops kept as extern calls
  gpu         flagos as Inductor's GPU on a GPU vendor (GPU type, Triton target, profiler, template tables)
  conv_layout the memory format of a flagos convolution's fake result, as the vendor's library picks it
  features    the Inductor features gated on the device name ``cuda``, opened to flagos on a GPU vendor
  cudagraphs  mode="reduce-overhead": flagos graphs where Inductor decides about CUDA graphs (imported by name)
  backend     the registrations, and the emulation's C++ scheduling
  checks      ``problems``: what registration needs and this torch line lacks
"""

from .attention import (
    FUSED_ATTENTION_OPS,
    _fused_attention_backward_meta,
    _fused_attention_problems,
    _has_meta,
    keep_fused_attention_extern,
    supply_fused_attention_backward_meta,
)
from .backend import register_backend, register_interface, register_op_overrides, schedule_as_cpu
from .base import DEVICE
from .checks import problems
from .conv_layout import follow_vendor_conv_layout
from .fallback import inductor_decomposition_tables, mark_fallback
from .features import FEATURES, enable_vendor_features, enabled_features, feature_problems, graph_device_as, hooked
from .gpu import (
    GPU_TYPE_USERS,
    PROFILER_BENCH,
    declare_gpu,
    gpu_type_is_flagos,
    profile_on_vendor,
    share_template_heuristics,
    tune_triton_for_vendor,
)

__all__ = [
    "DEVICE",
    "FEATURES",
    "FUSED_ATTENTION_OPS",
    "GPU_TYPE_USERS",
    "PROFILER_BENCH",
    "_fused_attention_backward_meta",
    "_fused_attention_problems",
    "_has_meta",
    "declare_gpu",
    "enable_vendor_features",
    "enabled_features",
    "feature_problems",
    "follow_vendor_conv_layout",
    "gpu_type_is_flagos",
    "graph_device_as",
    "hooked",
    "inductor_decomposition_tables",
    "keep_fused_attention_extern",
    "mark_fallback",
    "problems",
    "profile_on_vendor",
    "register_backend",
    "register_interface",
    "register_op_overrides",
    "schedule_as_cpu",
    "share_template_heuristics",
    "supply_fused_attention_backward_meta",
    "tune_triton_for_vendor",
]
