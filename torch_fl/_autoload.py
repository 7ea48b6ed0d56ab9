"""torch's device autoload hook for torch-fl, installed as the top-level module ``_torch_fl_autoload``.

torch calls ``load`` at every ``import torch`` (the ``torch.backends`` entry point). Installing the wheel must not
change a process that never asks for flagos: registering the device makes flagos PyTorch's one accelerator, which
stops plain CUDA autograd in that process. So ``load`` does nothing unless ``FLAGOS_AUTOLOAD=1``; otherwise
``import torch_fl`` is how a program opts in. This file lives outside the torch_fl package in the wheel because
importing any module inside torch_fl runs torch_fl's ``__init__``, which registers the device.

What ``load`` does in every process is harmless: it teaches ``torch.load`` one message. A checkpoint saved from
flagos tensors names its storages' location ``flagos:N``; without torch_fl, torch can only say it does not know how to
restore that location. The deserializer below answers for those locations alone, with the two ways out. It comes
after every deserializer of torch's (priority 90; torch's own run 10-26), so once torch_fl is loaded torch's
PrivateUse1 deserializer restores ``flagos`` first and this one is never asked. It never tags, so saving is unchanged.
"""

from __future__ import annotations

import os
import warnings

VAR = "FLAGOS_AUTOLOAD"


def _restore_without_torch_fl(storage, location: str):
    if not location.startswith("flagos"):
        return None
    raise RuntimeError(
        f"this checkpoint holds flagos tensors ({location}), and the flagos device is not loaded: `import torch_fl` "
        "before torch.load, or load it to the host with torch.load(..., map_location='cpu')"
    )


def _register_checkpoint_hint() -> None:
    try:
        from torch.serialization import register_package

        register_package(90, lambda obj: None, _restore_without_torch_fl)
    except Exception:  # an older or newer torch without this hook: the hint is a nicety, never a failure
        pass


def load() -> None:
    _register_checkpoint_hint()
    value = os.environ.get(VAR, "").strip()
    if value in ("", "0"):
        return
    if value != "1":
        warnings.warn(
            f"{VAR}={value!r} is not one of 0, 1: torch_fl was not loaded with torch. Set {VAR}=1 to load it with "
            f"`import torch`, or unset {VAR} and `import torch_fl` where flagos is wanted.",
            stacklevel=2,
        )
        return
    try:
        import torch_fl  # noqa: F401  (importing registers the device)
    except Exception as exc:  # `import torch` must keep working; the explicit import shows the full error
        warnings.warn(
            f"{VAR}=1, but torch_fl could not be loaded, so the flagos device is not available: "
            f"{type(exc).__name__}: {exc}",
            stacklevel=2,
        )
