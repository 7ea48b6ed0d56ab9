"""Qualify a provider's kernels operator by operator, against native, before a conf routes anything to them.

    python -m torch_fl qualify --provider flaggems [--workers 8] [--budget 540] [--out DIR]

For every operator the provider claims, samples (PyTorch's OpInfo inputs per dtype, and the calls that real
workloads make, recorded with :func:`recording`) run on native and on the provider in crash-isolated worker
processes. Each (operator, dtype) gets one verdict: pass, wrong values, wrong metadata, crash, timeout or
unsupported; each failure keeps its first failing sample and a command that reproduces it. Where an operator
passes, provider/native time is measured at its largest real sample. ``<out>/report.json`` and ``report.md``
hold the result; build_tools/generate_confs.py turns a committed report into confs.
"""

from __future__ import annotations

from .calls import Sample, SampleStore, recording
from .verdict import VERDICTS

__all__ = ["VERDICTS", "Sample", "SampleStore", "recording"]
