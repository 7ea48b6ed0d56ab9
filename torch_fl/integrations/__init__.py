"""Training frameworks that find flagos by name, without torch_fl depending on them.

Lightning is optional: ``import torch_fl`` never imports it. ``install()`` (run by ``import torch_fl``) registers
the flagos accelerator at once when Lightning is already imported, and otherwise leaves a finder on
``sys.meta_path`` that registers it right after Lightning's accelerator registry module first executes, so
``Trainer(accelerator="flagos")`` works in whichever order the two are imported. The HF Trainer's mixed-device
failure gets its hint the same way (trainer_hint.py). HF accelerate needs no code here:
it asks ``torch.accelerator``, which names flagos once torch_fl is imported (docs/frameworks.md).
"""

from __future__ import annotations

import warnings
from types import ModuleType

from .._after_import import after_import

# the modules that define each Lightning namespace's AcceleratorRegistry
REGISTRY_MODULES = ("lightning.pytorch.accelerators", "pytorch_lightning.accelerators")
# the module that defines the HF Trainer
TRAINER_MODULE = "transformers.trainer"


def _register(module: ModuleType) -> None:
    # this runs inside the user's `import lightning`: a Lightning release this code does not fit must cost the
    # flagos accelerator only, never the import
    try:
        from . import lightning

        lightning.register(module)
    except Exception as exc:  # noqa: BLE001 - any failure here is reported, not raised
        warnings.warn(
            f"torch_fl could not register accelerator='flagos' with {module.__name__} ({type(exc).__name__}: {exc}); "
            "pass strategy=SingleDeviceStrategy('flagos:0') and an Accelerator of your own instead",
            RuntimeWarning,
            stacklevel=2,
        )


def _hint_trainer(module: ModuleType) -> None:
    # inside the user's `import transformers.trainer`: a release this does not fit loses the hint, never the import
    try:
        from . import trainer_hint

        trainer_hint.register(module)
    except Exception as exc:  # noqa: BLE001 - any failure here is reported, not raised
        warnings.warn(
            f"torch_fl could not add its FlagosTrainingArguments hint to {module.__name__} "
            f"({type(exc).__name__}: {exc}); the Trainer works without it",
            RuntimeWarning,
            stacklevel=2,
        )


def install() -> None:
    """Register with every Lightning namespace imported so far, and watch for the others; the same for the HF
    Trainer's mixed-device hint (trainer_hint.py)."""
    after_import(REGISTRY_MODULES, _register)
    after_import((TRAINER_MODULE,), _hint_trainer)
