"""The node checks' one timer: microseconds per call over a batch of calls, the GPU drained before and after.

Free of torch_fl, so a plain-cuda arm that must not import torch_fl can use it too.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch


def batch_us(fn: Callable[[], object], repeat: int) -> float:
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(repeat):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / repeat * 1e6
