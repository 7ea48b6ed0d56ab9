"""The HF Trainer's mixed-device failure names FlagosTrainingArguments (torch_fl/integrations/trainer_hint.py),
checked on a stand-in Trainer: no transformers, no torch."""

from __future__ import annotations

import types

import pytest

from torch_fl.integrations import trainer_hint

ROUTER_ERROR = (
    "Expected all tensors to be on the same device, but found at least two devices, flagos:0 and cpu! "
    "(when running embedding on the flagos device; move the host tensor 'indices' of shape [2, 8] with .to('flagos'))"
)


class Device:
    def __init__(self, kind: str) -> None:
        self.type = kind

    def __str__(self) -> str:
        return self.type


def trainer_module(error: Exception) -> types.ModuleType:
    class Trainer:
        def __init__(self, device: str) -> None:
            self.args = types.SimpleNamespace(device=Device(device))

        def training_step(self, model, inputs):  # noqa: ANN001
            raise error

        def prediction_step(self, model, inputs):  # noqa: ANN001
            return "predicted"

    module = types.ModuleType("transformers.trainer")
    module.Trainer = Trainer
    trainer_hint.register(module)
    trainer_hint.register(module)  # a second registration wraps nothing twice
    return module


def test_a_plain_trainers_mixed_devices_name_flagos_training_arguments() -> None:
    module = trainer_module(RuntimeError(ROUTER_ERROR))
    with pytest.raises(RuntimeError) as caught:
        module.Trainer("cpu").training_step(None, {})
    lines = str(caught.value).splitlines()
    assert lines[0] == ROUTER_ERROR
    assert lines[1].startswith("The Trainer's batches are on cpu") and lines[1].count("FlagosTrainingArguments") == 1
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert module.Trainer("cpu").prediction_step(None, {}) == "predicted"


@pytest.mark.parametrize(
    ("device", "error"),
    [("flagos", RuntimeError(ROUTER_ERROR)), ("cpu", RuntimeError("CUDA out of memory")), ("cpu", ValueError("x"))],
)
def test_other_failures_pass_unchanged(device: str, error: Exception) -> None:
    module = trainer_module(error)
    with pytest.raises(type(error)) as caught:
        module.Trainer(device).training_step(None, {})
    assert caught.value is error
