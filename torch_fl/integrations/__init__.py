"""Training frameworks that find flagos by name, without torch_fl depending on them.

Lightning is optional: ``import torch_fl`` never imports it. ``install()`` (run by ``import torch_fl``) registers
the flagos accelerator at once when Lightning is already imported, and otherwise leaves a finder on
``sys.meta_path`` that registers it right after Lightning's accelerator registry module first executes, so
``Trainer(accelerator="flagos")`` works in whichever order the two are imported. HF accelerate needs no code here:
it asks ``torch.accelerator``, which names flagos once torch_fl is imported (docs/frameworks.md).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Callable, Sequence
from types import ModuleType

# the modules that define each Lightning namespace's AcceleratorRegistry
REGISTRY_MODULES = ("lightning.pytorch.accelerators", "pytorch_lightning.accelerators")


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


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``action(module)`` once each watched module has executed; other imports pass through untouched."""

    def __init__(self, names: Sequence[str], action: Callable[[ModuleType], None]) -> None:
        self.names = set(names)
        self.action = action

    def find_spec(self, fullname, path, target=None):  # noqa: ANN001 - the MetaPathFinder signature
        if fullname not in self.names:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                spec.loader = _RunAfter(spec.loader, self.action)
                return spec
            if spec is not None:
                return spec
        return None


class _RunAfter(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader, action: Callable[[ModuleType], None]) -> None:
        self.loader = loader
        self.action = action

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        # the module's own loader stays its __loader__ and __spec__.loader: importlib.resources and reloads use it
        module.__spec__.loader = self.loader
        module.__loader__ = self.loader
        self.loader.exec_module(module)
        self.action(module)


_finder: _AfterImport | None = None


def install() -> None:
    """Register with every Lightning namespace imported so far, and watch for the others."""
    global _finder
    for name in REGISTRY_MODULES:
        if name in sys.modules:
            _register(sys.modules[name])
    waiting = [n for n in REGISTRY_MODULES if n not in sys.modules]
    if waiting and _finder is None:
        _finder = _AfterImport(waiting, _register)
        sys.meta_path.insert(0, _finder)
