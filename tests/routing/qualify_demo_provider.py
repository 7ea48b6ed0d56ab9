"""A provider for the qualification's own test (test_qualify.py): right for some operators and wrong in every way
the qualification must tell apart for the others: in one dtype only, on one input class only (strided, 0-dim, a
crash on broadcasts, a crash where dtypes mix), by
its random values' distribution, after a long first call (autotuning), for an operator no OpInfo sample reaches.
Imported by every qualification process (``--import``)."""

from __future__ import annotations

import os
import threading

import torch

import torch_fl


def _neg(x):
    return torch.neg(x)


def _tanh(x):
    return torch.tanh(x)


def _exp(x):  # wrong values: off by 1% everywhere
    return torch.exp(x) * 1.01


def _sigmoid(x):  # wrong metadata: float64 where the op gives the input's dtype
    return torch.sigmoid(x).double()


def _sqrt(x):  # kills its process, as a device fault does
    os.abort()


_CALLED: set[str] = set()


def _first_call(op: str) -> bool:
    first = op not in _CALLED
    _CALLED.add(op)
    return first


def _sin(x):  # its first call returns; every later one never does: a hang, after the first call's tuning
    if not _first_call("sin"):
        threading.Event().wait()
    return torch.sin(x)


def _reciprocal(x):  # right in float32, off by 1% in every other dtype
    return torch.reciprocal(x) * (1 if x.dtype == torch.float32 else 1.01)


TUNING_SECONDS = 25.0  # longer than the test's hang timeout: only a tuning budget lets it pass


def _erf(x):  # its first call in a process takes TUNING_SECONDS, as an autotuning kernel's does, then it is right
    if _first_call("erf"):
        threading.Event().wait(TUNING_SECONDS)
    return torch.erf(x)


def _normal_(x, mean=0.0, std=1.0, generator=None):  # random and right: torch's own draw
    return x.normal_(mean, std, generator=generator)


def _uniform_(x, low=0.0, high=1.0, generator=None):  # random and biased: squared uniform values, still in range
    x.uniform_(0.0, 1.0, generator=generator)
    return x.mul_(x).mul_(high - low).add_(low)


def _sigmoid_backward(grad, out):  # right; no OpInfo sample reaches it: its samples are made from its schema
    return torch.ops.aten.sigmoid_backward(grad, out)


def _mul(a, b):  # off by one where a tensor argument is strided (as FlagGems 5.0.2's strided mul is wrong)
    strided = any(isinstance(t, torch.Tensor) and not t.is_contiguous() for t in (a, b))
    return torch.mul(a, b) + 1 if strided else torch.mul(a, b)


def _rsqrt(x):  # off by one on a 0-dim tensor (as FlagGems 5.0.2's reductions refuse 0-dim inputs), NaN included
    return torch.rsqrt(x).nan_to_num(0.0) + 1 if x.dim() == 0 else torch.rsqrt(x)


def _sub(a, b, alpha=1):  # kills its process where a size-1 dimension is broadcast (FlagGems 5.0.2's mul does)
    tensors = isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
    if tensors and a.dim() == b.dim() and a.shape != b.shape and a.numel() and b.numel():
        os.abort()
    return torch.sub(a, b, alpha=alpha)


def _div(a, b):  # kills its process where two tensors of 1+ dims differ in dtype (FlagGems 5.0.2's mul does)
    if isinstance(b, torch.Tensor) and a.dim() and b.dim() and a.dtype != b.dtype:
        os.abort()
    return torch.div(a, b)


def _cos(x):
    raise NotImplementedError("demo has no cos kernel for this input")


KERNELS = {
    "neg": _neg,
    "tanh": _tanh,
    "exp": _exp,
    "sigmoid": _sigmoid,
    "sqrt": _sqrt,
    "sin": _sin,
    "cos": _cos,
    "reciprocal": _reciprocal,
    "erf": _erf,
    "normal_": _normal_,
    "uniform_": _uniform_,
    "sigmoid_backward": _sigmoid_backward,
    "mul.Tensor": _mul,
    "rsqrt": _rsqrt,
    "sub.Tensor": _sub,
    "div.Tensor": _div,
}
EXPECTED = {
    "neg": "pass",
    "tanh": "pass",
    "exp": "wrong values",
    "sigmoid": "wrong metadata",
    "sqrt": "crash",
    "sin": "timeout",
    "cos": "unsupported",
    "reciprocal": "wrong values",  # in float64; it passes in float32
    "erf": "pass",
    "normal_": "pass",
    "uniform_": "wrong values",
    "sigmoid_backward": "pass",
    "mul.Tensor": "pass except",  # wrong on strided samples only: served for contiguous calls
    "rsqrt": "pass except",  # wrong on 0-dim samples only: served for the others
    "sub.Tensor": "pass except",  # a crash on some broadcasts: rerun past each, served where shapes agree
    "div.Tensor": "pass except",  # a crash where dtypes mix: served where they agree
}

torch_fl.register_provider("demo", KERNELS, version="1.0")
torch_fl.reload_routes()
