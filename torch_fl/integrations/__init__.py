"""Training frameworks that find flagos by name, without torch_fl depending on them.

Lightning is optional: ``import torch_fl`` never imports it. ``install()`` (run by ``import torch_fl``) registers
the flagos accelerator at once when Lightning is already imported, and otherwise leaves a finder on
``sys.meta_path`` that registers it right after Lightning's accelerator registry module first executes, so
``Trainer(accelerator="flagos")`` works in whichever order the two are imported. The HF Trainer's mixed-device
failure gets its hint the same way (trainer_hint.py). HF accelerate needs no code here:
it asks ``torch.accelerator``, which names flagos once torch_fl is imported (docs/frameworks.md).
"""

from __future__ import annotations

import importlib
import warnings
from types import ModuleType

from .._after_import import after_import

# the modules that define each Lightning namespace's AcceleratorRegistry
REGISTRY_MODULES = ("lightning.pytorch.accelerators", "pytorch_lightning.accelerators")
# the module that defines the HF Trainer
TRAINER_MODULE = "transformers.trainer"


def _guarded(module: ModuleType, integration: str, what: str, way_out: str) -> None:
    # this runs inside the user's import of `module`: a release the integration does not fit costs what it adds,
    # never the import
    try:
        importlib.import_module(f"{__name__}.{integration}").register(module)
    except Exception as exc:  # noqa: BLE001 - any failure here is reported, not raised
        warnings.warn(
            f"torch_fl could not {what} {module.__name__} ({type(exc).__name__}: {exc}); {way_out}",
            RuntimeWarning,
            stacklevel=3,
        )


def _register(module: ModuleType) -> None:
    _guarded(
        module,
        "lightning",
        "register accelerator='flagos' with",
        "pass strategy=SingleDeviceStrategy('flagos:0') and an Accelerator of your own instead",
    )


def _hint_trainer(module: ModuleType) -> None:
    _guarded(module, "trainer_hint", "add its FlagosTrainingArguments hint to", "the Trainer works without it")


def install() -> None:
    """Register with every Lightning namespace imported so far, and watch for the others; the same for the HF
    Trainer's mixed-device hint (trainer_hint.py)."""
    after_import(REGISTRY_MODULES, _register)
    after_import((TRAINER_MODULE,), _hint_trainer)
