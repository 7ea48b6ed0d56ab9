"""Framework training runs, one after the other in one process (tests/models/test_frameworks.py starts it).

    python frameworks_run.py OUT RUN [RUN...]

Each RUN is one of RUNS below. A tiny model, built on the CPU from a fixed seed (dropout off), trains STEPS steps;
OUT/RUN.pt receives the per-step losses, the device type the parameters trained on, the dtype of a Linear's output
during training (bfloat16 when autocast is on) and the trained parameters, moved to the CPU; or, when the run
raised, ``error``: its traceback.

One process for several runs saves the framework imports (seconds each). accelerate keeps its process state in
singletons (PartialState, AcceleratorState, GradientState), and the CPU reference must never share it with the
flagos run: every run starts with the environment it names and those singletons reset.
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from pathlib import Path

import torch
import vision_import  # before transformers and Lightning, which import torchvision

STEPS = 4
BATCH = 4
# each run's ACCELERATE_* environment (the caller's is dropped)
RUNS: dict[str, dict[str, str]] = {
    "hf-cpu": {},  # TrainingArguments(use_cpu=True): the reference
    "hf-flagos": {},  # FlagosTrainingArguments
    "hf-flagos-bf16": {},  # FlagosTrainingArguments(bf16=True)
    "hf-env": {"ACCELERATE_TORCH_DEVICE": "flagos"},  # plain TrainingArguments with accelerate's setting
    "hf-env-bf16": {"ACCELERATE_TORCH_DEVICE": "flagos", "ACCELERATE_MIXED_PRECISION": "bf16"},
    "hf-unset": {},  # plain TrainingArguments without the setting
    "pl-cpu": {},  # Trainer(accelerator="cpu"): the reference
    "pl-flagos": {},  # Trainer(accelerator="flagos", devices=1)
    "pl-flagos-bf16": {},  # the same with precision="bf16-mixed"
}


def _record_linear_dtype(model: torch.nn.Module, seen: dict) -> None:
    linear = next(m for m in model.modules() if isinstance(m, torch.nn.Linear) or type(m).__name__ == "Conv1D")

    def hook(_module, _inputs, output):
        seen.setdefault("dtype", output.dtype)

    linear.register_forward_hook(hook)


def hf(run: str) -> dict:
    import transformers

    if run.startswith("hf-flagos"):
        from torch_fl.integrations.hf import FlagosTrainingArguments as Arguments
    else:
        Arguments = transformers.TrainingArguments

    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=64,
        bos_token_id=0,
        eos_token_id=0,
        n_positions=16,
        n_embd=32,
        n_layer=1,
        n_head=2,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    model = transformers.GPT2LMHeadModel(config)
    tokens = torch.randint(0, 64, (BATCH * STEPS, 12), generator=torch.Generator().manual_seed(1))
    data = [{"input_ids": t, "labels": t} for t in tokens]
    losses: list[float] = []
    seen: dict = {}
    _record_linear_dtype(model, seen)

    class Recording(transformers.Trainer):
        def compute_loss(self, model, inputs, *args, **kwargs):
            loss = super().compute_loss(model, inputs, *args, **kwargs)
            value = loss[0] if isinstance(loss, tuple) else loss
            losses.append(value.detach().float().item())
            seen.setdefault("device", next(model.parameters()).device.type)
            seen.setdefault("input_device", inputs["input_ids"].device.type)
            return loss

    with tempfile.TemporaryDirectory() as out:
        args = Arguments(
            output_dir=out,
            use_cpu=run == "hf-cpu",
            bf16=run == "hf-flagos-bf16",
            per_device_train_batch_size=BATCH,
            max_steps=STEPS,
            learning_rate=1e-2,
            lr_scheduler_type="constant",
            warmup_steps=0,
            logging_strategy="no",
            save_strategy="no",
            report_to=[],
            disable_tqdm=True,
            dataloader_num_workers=0,
            seed=0,
        )
        trainer = Recording(model=model, args=args, train_dataset=data)
        trainer.train()
    return {
        "losses": losses,
        "device": seen["device"],
        "input_device": seen["input_device"],
        "args_device": str(args.device),
        "dtype": seen["dtype"],
        "params": {k: v.detach().cpu() for k, v in model.state_dict().items()},
    }


def pl(run: str) -> dict:
    import lightning

    lightning.seed_everything(0, verbose=False)
    losses: list[float] = []
    seen: dict = {}

    class Regression(lightning.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))

        def training_step(self, batch, _index):
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.net(x).float(), y)
            losses.append(loss.detach().item())
            seen.setdefault("device", next(self.parameters()).device.type)
            seen.setdefault("input_device", x.device.type)
            return loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-2)

    model = Regression()
    _record_linear_dtype(model, seen)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(BATCH * STEPS, 8, generator=g)
    data = torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True).sin())
    trainer = lightning.Trainer(
        accelerator="cpu" if run == "pl-cpu" else "flagos",
        devices=1,
        precision="bf16-mixed" if run.endswith("bf16") else "32-true",
        max_steps=STEPS,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model, torch.utils.data.DataLoader(data, batch_size=BATCH))
    return {
        "losses": losses,
        "device": seen["device"],
        "input_device": seen["input_device"],
        "root_device": str(trainer.strategy.root_device),
        "dtype": seen["dtype"],
        "params": {k: v.detach().cpu() for k, v in model.state_dict().items()},
    }


def _fresh_state(run: str) -> None:
    """The run's own ACCELERATE_* environment, and accelerate's singletons as in a new process."""
    for key in [k for k in os.environ if k.startswith("ACCELERATE_")]:
        del os.environ[key]
    os.environ.update(RUNS[run])
    if run.startswith("hf-"):
        from accelerate.state import AcceleratorState, GradientState

        AcceleratorState._reset_state(reset_partial_state=True)
        GradientState._reset_state()


def main(out: str, *runs: str) -> None:
    unknown = [run for run in runs if run not in RUNS]
    if unknown or not runs:
        raise SystemExit(f"frameworks_run.py: unknown run(s) {unknown}; runs: {', '.join(RUNS)}")
    import torch_fl  # noqa: F401  (the flagos device, and Lightning's accelerator="flagos")

    vision_import.load()

    for run in runs:
        _fresh_state(run)
        try:
            result = hf(run) if run.startswith("hf-") else pl(run)
        except Exception as exc:  # the caller asserts on it: a run that must stop, or a failure to report
            result = {"error": "".join(traceback.format_exception(exc))}
        torch.save(result, Path(out, f"{run}.pt"))


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main(*sys.argv[1:])
