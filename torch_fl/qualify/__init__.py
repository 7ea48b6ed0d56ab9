"""Qualify a provider's kernels operator by operator and dtype by dtype, against native, before a conf routes
anything to them.

    python -m torch_fl qualify --provider flaggems [--workers 8] [--budget 540] [--out DIR] [--dtypes ...]

For every operator the provider claims, samples (PyTorch's OpInfo inputs per dtype, the calls that real workloads
make, recorded with :func:`recording`, and samples made from the schema for a dtype neither reaches) run on native
and on the provider in crash-isolated worker processes. Each (operator, dtype) gets one verdict: pass, wrong
values, wrong metadata, crash, timeout or unsupported, or the reason no sample of it can exist; each failure keeps
its first failing sample and a command that reproduces it. Random operators are judged by the distribution of
their values; a sample's first provider call may autotune within a budget of its own. Where an operator passes,
provider/native time is measured at its largest real sample. ``<out>/report.json`` and ``report.md`` hold the
result; build_tools/generate_confs.py turns a committed report into confs whose routes serve the dtypes that
passed.
"""

from __future__ import annotations

from .calls import Sample, SampleStore, recording
from .verdict import VERDICTS

__all__ = ["VERDICTS", "Sample", "SampleStore", "recording"]
