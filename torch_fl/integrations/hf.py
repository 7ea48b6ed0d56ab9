"""HF ``Trainer`` on flagos: ``FlagosTrainingArguments``, a drop-in for ``transformers.TrainingArguments``.

accelerate 1.16 and later find flagos by themselves: they ask ``torch.accelerator``, which answers with the
PrivateUse1 device first. Earlier accelerate takes ``cuda`` whenever torch sees CUDA, and the Trainer's
``Accelerator`` places the model on that device. ``TrainingArguments`` decides the Trainer's device
itself, from a fixed list of device types: with one process it takes ``cuda:0`` whenever torch sees CUDA, else
``ACCELERATE_TORCH_DEVICE`` (else the CPU), and refuses ``bf16=True`` unless CUDA, XPU, NPU, MPS, ... says it has
bf16. So on a GPU node the Trainer trains on CUDA past flagos, and under emulation ``bf16=True`` is refused.

``FlagosTrainingArguments`` keeps accelerate's own setup (its process state, seeds, mixed precision) and changes
the answers: the device, the Trainer's and accelerate's, is the process's flagos device, and bf16 is checked
against flagos (``torch.flagos.is_bf16_supported``). Importing this module imports transformers; ``import
torch_fl`` does not.
"""

from __future__ import annotations

from functools import cached_property

import torch

try:
    import transformers
except ImportError as _exc:
    raise ImportError(
        "torch_fl.integrations.hf needs transformers and accelerate: pip install 'torch-fl[hf]'"
    ) from _exc

NAME = "flagos"


class FlagosTrainingArguments(transformers.TrainingArguments):
    """``TrainingArguments`` whose Trainer trains on flagos (``use_cpu=True`` still means the CPU)."""

    def __post_init__(self) -> None:
        wants_bf16, wants_bf16_eval = self.bf16, self.bf16_full_eval
        if (wants_bf16 or wants_bf16_eval) and not self.use_cpu and not torch.flagos.is_bf16_supported():
            raise ValueError("bf16=True: this flagos device has no bf16; pass bf16=False (or fp16=True)")
        # transformers' own bf16 check knows only its listed device types; flagos was checked above
        self.bf16 = self.bf16_full_eval = False
        super().__post_init__()
        self.bf16, self.bf16_full_eval = wants_bf16, wants_bf16_eval
        if wants_bf16 and self.mixed_precision == "no":
            self.mixed_precision = "bf16"  # what accelerate's autocast reads; the parent sets it from bf16
        if self.fp16 and self.bf16:
            raise ValueError("At most one of fp16 and bf16 can be True, but not both")

    @cached_property
    def _setup_devices(self) -> torch.device:
        device = transformers.TrainingArguments._setup_devices.func(self)  # accelerate's state, as usual
        if self.use_cpu:
            return device
        if self.distributed_state is not None and self.distributed_state.num_processes > 1:
            index = self.distributed_state.local_process_index
        else:
            index = torch.flagos.current_device()
        device = torch.device(NAME, index)
        torch.flagos.set_device(device)
        if self.distributed_state is not None:  # the Accelerator the Trainer makes places the model here
            self.distributed_state.device = device
        # one flagos device per process: the Trainer wraps the model in DataParallel when n_gpu > 1, and the
        # parent counts CUDA devices here
        self._n_gpu = 1
        return device
