"""A provider for the qualification's own test (test_qualify.py): right for two operators and wrong in every way
the qualification must tell apart for the others. Imported by every qualification process (``--import``)."""

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


def _sin(x):  # never returns: a hang
    threading.Event().wait()


def _cos(x):
    raise NotImplementedError("demo has no cos kernel for this input")


KERNELS = {"neg": _neg, "tanh": _tanh, "exp": _exp, "sigmoid": _sigmoid, "sqrt": _sqrt, "sin": _sin, "cos": _cos}
EXPECTED = {
    "neg": "pass",
    "tanh": "pass",
    "exp": "wrong values",
    "sigmoid": "wrong metadata",
    "sqrt": "crash",
    "sin": "timeout",
    "cos": "unsupported",
}

torch_fl.register_provider("demo", KERNELS, version="1.0")
torch_fl.reload_routes()
