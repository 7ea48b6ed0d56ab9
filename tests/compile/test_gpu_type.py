"""Inductor's "GPU type of the process" is flagos where flagos sits on a GPU vendor, and torch's own answer elsewhere.

``torch._inductor.utils.get_gpu_type`` asserts that at most one of its GPU types is available; on a CUDA node with
flagos declared a GPU both cuda and flagos are, which failed every compilation there. The child below plays that
node on the CPU emulation: torch.cuda says it is available, and the GPU registration steps run by hand.
"""

from __future__ import annotations

import torch

import torch_fl

ON_A_CUDA_NODE = """
import sys, torch, torch_fl
torch.cuda.is_available = lambda: True                # what Inductor sees on a CUDA node
import torch.utils._triton
torch.utils._triton.has_triton = lambda **_: False    # its device check would query the GPU this host lacks
import torch._inductor.fx_passes.joint_graph          # a module that binds get_gpu_type by name, loaded first
import torch.testing._internal.inductor_utils as testing
from torch._inductor import comm_analysis, utils
from torch_fl.compile import _torch_compat

report("testing_before", testing.GPU_TYPE)
report("loaded_before", [m for m in _torch_compat.GPU_TYPE_USERS if m in sys.modules])
original = utils.get_gpu_type
utils.GPU_TYPES.append("flagos")                      # flagos declared a GPU, torch's function unchanged
original.cache_clear()
try:
    report("torch_answer", original())
except AssertionError:
    report("torch_answer", "AssertionError")
utils.GPU_TYPES.remove("flagos")
original.cache_clear()

_torch_compat.declare_gpu()
_torch_compat.declare_gpu()                           # idempotent
for name in _torch_compat.GPU_TYPE_USERS:             # the rest load after the fix
    __import__(name)
report("answers", {m: sys.modules[m].get_gpu_type() for m in ("torch._inductor.utils", *_torch_compat.GPU_TYPE_USERS)})
report("first_gpu_type", utils.GPU_TYPES[0])
report("flagos_entries", utils.GPU_TYPES.count("flagos"))
report("keeps_torch_function", utils.get_gpu_type.__wrapped__ is original)
report("comm_analysis_own", comm_analysis.get_gpu_type.__module__ == comm_analysis.__name__)
report("testing_after", testing.GPU_TYPE)
import torch._inductor.select_algorithm as select_algorithm   # binds do_bench_using_profiling by name
_torch_compat.profile_on_vendor("cuda")
benches = [getattr(utils, n) for n in _torch_compat.PROFILER_BENCH if getattr(getattr(utils, n, None), "__flagos__", 0)]
report("profiler_device", [b.__globals__["get_gpu_type"]() for b in benches])
# the function select_algorithm calls is the vendor copy, or calls it through utils' globals
outer = select_algorithm.do_bench_using_profiling
report("profiler_rebound", outer is utils.do_bench_using_profiling and (outer in benches or (
    outer.__globals__ is utils.__dict__ and "_do_bench_using_profiling" in outer.__code__.co_names)))
report("problems", _torch_compat.problems(gpu=True))
"""


def test_gpu_type_is_flagos_on_a_gpu_vendor_wherever_inductor_asks(run_child):
    child = run_child(ON_A_CUDA_NODE)
    data = child.data
    # the failure seen on the H200, reproduced with torch's own function
    assert data["torch_answer"] == "AssertionError", child.describe()
    # one module bound the function before the fix and the others after it: both kinds answer flagos
    assert data["loaded_before"] and len(data["loaded_before"]) < len(data["answers"]) - 1, child.describe()
    assert set(data["answers"].values()) == {"flagos"}, child.describe()
    assert data["first_gpu_type"] == "flagos" and data["flagos_entries"] == 1, child.describe()
    assert data["keeps_torch_function"] and data["comm_analysis_own"], child.describe()
    assert (data["testing_before"], data["testing_after"]) == ("cuda", "flagos"), child.describe()
    # the profiler-based benchmark names the vendor's profiler activity, never a "FLAGOS" one torch lacks; torch 2.9
    # and 2.10 time on "cuda" by name, so there is nothing to redirect on those lines
    if tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 11):
        assert data["profiler_device"] == ["cuda"] and data["profiler_rebound"], child.describe()
    else:
        assert data["profiler_device"] == [], child.describe()
    assert data["problems"] == [], child.describe()


def test_gpu_type_is_torch_s_own_where_flagos_is_not_on_a_gpu():
    # this process's flagos: the CPU emulation in CI, CUDA on a GPU node (build_tools/node/cuda_node.sh compile)
    out = torch.compile(lambda x: x * 2 + 1)(torch.arange(3.0).to("flagos"))
    assert out.cpu().tolist() == [1.0, 3.0, 5.0]
    from torch._inductor import utils

    if torch_fl.accelerator() in ("cuda", "dcu"):
        assert utils.get_gpu_type() == "flagos" and utils.GPU_TYPES[0] == "flagos"
    else:
        assert "flagos" not in utils.GPU_TYPES
        assert not getattr(utils.get_gpu_type, "__flagos__", False)
