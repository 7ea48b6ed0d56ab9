"""The Triton launch hook's reading of a launcher call (torch_fl/replay/_triton.py), on stand-in launchers shaped
like Triton 3.6's CudaLauncher and HIPLauncher: what becomes a parameter, in which width, and what is refused.
Triton itself needs a GPU; the layout it reads is the one its 3.6 source generates."""

from __future__ import annotations

CHECKS = r"""
import struct, sys, types, torch, torch_fl
from torch_fl.replay import _record, _triton

drv = types.ModuleType("fake_triton_driver")
drv.FLOAT_STORAGE_TYPE = {"fp16": "uint16_t", "bf16": "uint16_t", "fp32": "uint32_t", "fp64": "uint64_t"}
sys.modules[drv.__name__] = drv
nofloat = types.ModuleType("fake_old_driver")
sys.modules[nofloat.__name__] = nofloat

class HookChain:  # Triton >= 3.5 passes its hook chains, empty unless a profiler added one
    def __init__(self, calls=()):
        self.calls = list(calls)

def launcher(module=drv.__name__, **attrs):
    cls = type("Launcher", (), {"__module__": module})
    obj = cls()
    obj._torch_fl_signature = ["*fp32", "*fp32", "i32", "i1", "fp32", "bf16", "constexpr"]
    obj._torch_fl_tensordesc = None
    base = dict(global_scratch_size=0, profile_scratch_size=0, launch_cooperative_grid=False, launch_pdl=False)
    for k, v in {**base, **attrs}.items():
        setattr(obj, k, v)
    return obj

torch.cuda.current_stream = lambda: types.SimpleNamespace(cuda_stream=77)   # no GPU here
_triton._TRITON_LINE = (3, 6)
x, y = torch.randn(8), torch.randn(8)
def call(l, meta=(4, 1, 0), hooks=(HookChain(), HookChain()), stream=77, args=None, warp=32):
    args = [x, y, 5, True, 2.5, 1.5, 128] if args is None else args
    try:
        return _triton._describe(l, warp, (3, 2, 1), stream, (meta, None, *hooks, *args))
    except _record.Refused as exc:
        return str(exc)

grid, block, shared, params = call(launcher(), meta=(4, 1, 96))
report("layout", {"grid": list(grid), "block": list(block), "shared": shared,
                  "params": [[k, v] for k, v in params], "x": x.data_ptr(), "y": y.data_ptr(),
                  "fp32": int.from_bytes(struct.pack("<f", 2.5), "little"),
                  "bf16": int.from_bytes(struct.pack("<f", 1.5), "little") >> 16})
report("hip_warp", list(call(launcher(), warp=64)[1]))
report("refusals", {
    "hook": call(launcher(), hooks=(HookChain([print]), HookChain())),
    "stream": call(launcher(), stream=78),
    "clusters": call(launcher(), meta=(4, 2, 0)),
    "scratch": call(launcher(global_scratch_size=64)),
    "cooperative": call(launcher(launch_cooperative_grid=True)),
    "tensordesc": call(type("T", (), {"_torch_fl_signature": ["*fp32"], "_torch_fl_tensordesc": [object()]})()),
    "no_signature": call(type("N", (), {})()),
    "arity": call(launcher(), args=[x, y]),
    "float_width_unknown": call(launcher(module=nofloat.__name__)),
})
_triton._TRITON_LINE = (3, 4)
report("other_triton", call(launcher()))
"""


def test_launcher_call_becomes_parameters(run_child):
    child = run_child(CHECKS)
    d = child.data["layout"]
    assert d["grid"] == [3, 2, 1] and d["block"] == [128, 1, 1] and d["shared"] == 96
    # constexpr dropped; i32 and i1 as integers; floats in their own width; then the two null scratch pointers
    assert d["params"] == [
        ["ptr", d["x"]],
        ["ptr", d["y"]],
        ["bytes", 5],
        ["bytes", 1],
        ["bytes", d["fp32"]],
        ["bytes", d["bf16"]],
        ["bytes", 0],
        ["bytes", 0],
    ]
    assert child.data["hip_warp"] == [256, 1, 1]


def test_what_the_layout_does_not_cover_is_refused(run_child):
    r = run_child(CHECKS).data
    refused = r["refusals"]
    assert refused["hook"].startswith("a launch hook is installed")
    assert refused["stream"] == "a launch on a stream other than the current one"
    assert refused["clusters"].startswith("a launch of thread-block clusters")
    assert refused["scratch"] == "a kernel that needs Triton's global_scratch memory"
    assert refused["cooperative"] == "a cooperative or PDL launch"
    assert refused["tensordesc"] == "a kernel with tensor descriptors (TMA)"
    assert refused["no_signature"] == "a Triton launcher made before torch_fl's launch hook"
    assert refused["arity"] == "a launch whose arguments do not match its signature"
    assert refused["float_width_unknown"].startswith("a float parameter of a Triton")
    assert r["other_triton"].startswith("Triton 3.4, whose launcher layout the replay does not know")
