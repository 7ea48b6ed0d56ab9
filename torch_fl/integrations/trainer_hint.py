"""The HF Trainer's mixed-device failure, told with its cause and the way out.

With flagos as the process's accelerator, accelerate puts the Trainer's model on flagos, while a plain
``transformers.TrainingArguments`` keeps the batches on the device it picks itself (the CPU, or ``cuda:0`` when
torch sees CUDA). The first op of the forward pass then meets two devices, and the router's message names the op
and the tensor but not why they differ. ``register`` wraps the Trainer's step methods so that this failure, and
only it, ends with the hint to use ``FlagosTrainingArguments``. It runs right after ``transformers.trainer``
executes (``install`` in this package), so ``import torch_fl`` imports nothing of transformers.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType
from typing import Any

DEVICE = "flagos"
MIXED_DEVICES = "Expected all tensors to be on the same device"  # the router's refusal (csrc/dispatch/router.cpp)
STEPS = ("training_step", "prediction_step")  # where the Trainer runs the model on a batch
HINT = (
    "The Trainer's batches are on {device}, the device a plain transformers.TrainingArguments chose, while its "
    "model is on flagos: pass torch_fl.integrations.hf.FlagosTrainingArguments (a drop-in for TrainingArguments) "
    "to train on flagos, or set ACCELERATE_TORCH_DEVICE=flagos on a torch without CUDA (docs/frameworks.md)."
)


def hint(args: Any, error: BaseException) -> str | None:
    """The hint for ``error`` raised in a step of a Trainer with ``args``, or None when it is not this failure."""
    text = str(error)
    if MIXED_DEVICES not in text or DEVICE not in text:
        return None
    device = getattr(args, "device", None)
    if device is None or getattr(device, "type", DEVICE) == DEVICE:
        return None  # the batches are on flagos: the mix has another cause
    return HINT.format(device=device)


def _with_hint(step: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(step)
    def run_step(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return step(self, *args, **kwargs)
        except RuntimeError as error:
            text = hint(getattr(self, "args", None), error)
            if text is None or type(error) is not RuntimeError:
                raise
            raise RuntimeError(f"{error}\n{text}") from error

    run_step.__torch_fl_hint__ = True  # type: ignore[attr-defined]
    return run_step


def register(module: ModuleType) -> None:
    """Wrap the step methods of ``module.Trainer`` (``transformers.trainer``) once."""
    trainer = module.Trainer
    for name in STEPS:
        step = trainer.__dict__.get(name)
        if step is not None and not getattr(step, "__torch_fl_hint__", False):
            setattr(trainer, name, _with_hint(step))
