"""Samples from PyTorch's OpInfo database: every OpInfo's sample inputs for each dtype, run on the device under the
recorder, so each sample is an ATen call as the router receives it (``torch.add`` becomes ``add.Tensor``)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Collection
from pathlib import Path
from typing import Any

import torch

from .calls import SampleStore, _Recorder

# The dtypes a qualification covers unless told otherwise: the floating types models train and infer in, float64
# (every vendor here has it), and the integer and bool types of indices, masks and counts. An operator that takes
# none of a dtype's inputs says so in the report (native refuses every sample made for it).
DEFAULT_DTYPES = ("float32", "bfloat16", "float16", "float64", "int64", "int32", "bool")
ALL_DTYPES = (*DEFAULT_DTYPES, "int16", "int8", "uint8", "complex64", "complex128")


def named_after(info: Any, ops: Collection[str]) -> bool:
    """Whether ``info`` bears the name of one of ``ops``: ``mul.Tensor`` and ``mul_`` have OpInfo ``mul``,
    ``mse_loss`` has ``nn.functional.mse_loss``, ``max_pool2d_with_indices`` has ``nn.functional.max_pool2d``."""
    names = {info.name.rsplit(".", 1)[-1], getattr(info, "aten_name", None) or ""} - {""}
    bases = {op.split(".")[0].strip("_") for op in ops}
    return any(base.startswith(name) for base in bases for name in names if len(name) > 1)


def record_opinfo(
    samples: Path,
    device: str,
    vendor: str,
    ops: Collection[str],
    dtypes: Collection[str],
    per_opinfo: int = 4,
    named_only: bool = False,
) -> dict[str, int]:
    """Record the calls to ``ops`` that OpInfo samples make on ``device`` into ``samples``; returns counts.

    ``vendor`` is the device type whose dtype support OpInfo is asked for ("cuda" on GPUs, "cpu" on the
    emulation). ``named_only`` runs only the OpInfos named after one of ``ops`` (a resumed run's few pending
    operators), not the whole database, whose other entries reach them only now and then."""
    os.environ.setdefault("PYTORCH_TEST_WITH_SLOW", "1")
    from torch.testing._internal.common_methods_invocations import op_db

    store = SampleStore(samples, per_signature=2)
    wanted = set(ops)
    counts = {"opinfos": 0, "samples": 0, "errors": 0}
    for info in op_db:
        if named_only and not named_after(info, wanted):
            continue
        supported = {str(d).removeprefix("torch.") for d in info.supported_dtypes(vendor)}
        for dtype_name in dtypes:
            if dtype_name not in supported:
                continue
            dtype = getattr(torch, dtype_name)
            recorder = _Recorder(store, f"opinfo:{info.name}", wanted.__contains__)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    inputs = info.sample_inputs(device, dtype, requires_grad=False)
                    for n, sample in enumerate(inputs):
                        if n >= per_opinfo:
                            break
                        with recorder:
                            info.op(sample.input, *sample.args, **sample.kwargs)
                        counts["samples"] += 1
            except Exception:  # noqa: BLE001  (a sample the native route refuses qualifies nothing)
                counts["errors"] += 1
        counts["opinfos"] += 1
    store.flush()
    counts["skipped"] = store.skipped
    return counts
