"""One arm's side of the profile diff: a few steps under torch.profiler, summed per ATen op and per kernel name.

Runs in an arm's process (zoo_arm.py); profdiff.py compares two arms' tables. Torch is imported when called, so
that the parent, which plans and diffs, never loads it.

Per op (and per other scope a kernel was launched in): calls, self host µs (the op's own host time, without the
ops it called, so that the ops add up to the host time of the step), self device µs (the kernels the profiler
attributes to this op, and not to an op it called) and those kernels' count; per kernel name: launches, device
µs and the ops that launched them. On the CPU emulation the arms are profiled with host activity only: the plain
arm runs on the host, which has no device to record, and flagos' emulated kernels would otherwise look like
kernels the host never launches.
"""

from __future__ import annotations

import re
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

KERNEL_NAME_CHARS = 160  # templated kernel names run to thousands of characters; both arms are cut alike
# The vendor runtime's and driver's own calls (cudaStreamIsCapturing, cudaMalloc, cuLaunchKernel, hipMemcpyAsync):
# never an op's scope. The profiler can link a kernel to one of them as well as to the op that launched it (seen on
# the H100 for the cudaStreamIsCapturing the caching allocator makes when it grows a segment), which counted that
# kernel twice, once for a step that happened to grow the pool.
RUNTIME_CALL = re.compile(r"^(cuda|hip|cu|hsa)[A-Z]")


def kernel_key(name: str) -> str:
    """A kernel's name, cut to KERNEL_NAME_CHARS, with a digest of the whole where it was cut: two kernels that
    differ only past the cut (a cast's source type, a vector width deep in the template) stay two."""
    if len(name) <= KERNEL_NAME_CHARS:
        return name
    return f"{name[:KERNEL_NAME_CHARS]}…#{zlib.crc32(name.encode()):08x}"


def collect(step: Callable[[], Any], sync: Callable[[], None], steps: int, device: bool) -> dict[str, Any]:
    """``steps`` calls of ``step`` profiled; ``device``: record the GPU's kernels (CUDA activity) too."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + [ProfilerActivity.CUDA] * device
    sync()
    with profile(activities=activities) as prof:
        for _ in range(steps):
            step()
        sync()  # the last step's kernels end inside the profile
    ops: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0])
    kernels: Counter[str] = Counter()
    kernel_us: Counter[str] = Counter()
    launched_by: dict[str, Counter[str]] = defaultdict(Counter)
    for event in prof.events():
        # ATen ops, and any other scope a kernel was launched in directly (a record_function around a launch):
        # the profiler links each kernel to the innermost scope open at its launch
        if event.device_type != DeviceType.CPU or not (event.name.startswith("aten::") or event.kernels):
            continue
        if RUNTIME_CALL.match(event.name):
            continue
        row = ops[event.name]
        row[0] += 1
        row[1] += event.self_cpu_time_total
        for kernel in event.kernels:
            name = kernel_key(kernel.name)
            row[2] += kernel.duration
            row[3] += 1
            kernels[name] += 1
            kernel_us[name] += kernel.duration
            launched_by[name][event.name] += 1
    return {
        "steps": steps,
        "device": device,
        "ops": {name: [c / steps, h / steps, d / steps, k / steps] for name, (c, h, d, k) in ops.items()},
        "kernels": {
            name: {
                "launches": n / steps,
                "device_us": kernel_us[name] / steps,
                "ops": {op: c / steps for op, c in launched_by[name].most_common(3)},
            }
            for name, n in kernels.items()
        },
    }
