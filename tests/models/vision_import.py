"""``import torchvision`` in the test images, whose torchvision is PyPI's CUDA build beside a CPU torch.

torchvision's models are plain Python, but its package import registers fake kernels for its compiled detection
ops. PyPI's torchvision is built against the CUDA torch, so on a CPU torch its ``_C`` cannot load (it needs
libc10_cuda) and the import stops at ``torchvision::nms does not exist``. ``load()`` then declares the two op
schemas that the import touches unconditionally (schemas only, no kernels: torchvision still reports
``_has_ops() == False`` and its detection ops raise its own error). transformers and Lightning (through
torchmetrics) import torchvision where it is installed, so every process of the model suite calls ``load()`` before
them. The suite uses no compiled op.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch

_KEEP: list[object] = []


def load():
    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "the model suite needs torchvision; install the test requirements "
            "(docker/cpu/requirements-test.txt and requirements-models.txt)"
        )
    libs = sorted(Path(next(iter(spec.submodule_search_locations))).glob("_C*.so"))
    try:
        if libs:
            torch.ops.load_library(str(libs[0]))
        loaded = bool(libs)
    except OSError:
        loaded = False
    if not loaded and not hasattr(torch.ops.torchvision, "nms"):
        lib = torch.library.Library("torchvision", "DEF")  # kept alive in _KEEP
        for op in ("nms", "qnms"):
            lib.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _KEEP.append(lib)
    import torchvision

    return torchvision
