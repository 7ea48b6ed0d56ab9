"""Run a function right after a module of another package has executed, without importing that package.

``after_import(names, action)`` calls ``action(module)`` at once for each named module already imported, and puts
one finder on ``sys.meta_path`` that calls it right after each of the others executes; other imports pass through
untouched. torch_fl adapts optional packages this way (Lightning's accelerator registry, torch's distributed
checkpoint writer) so that ``import torch_fl`` costs none of their import time.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Sequence
from types import ModuleType

Action = Callable[[ModuleType], None]


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``action(module)`` once each watched module has executed; other imports pass through untouched."""

    def __init__(self, names: Sequence[str], action: Action) -> None:
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
    def __init__(self, loader: importlib.abc.Loader, action: Action) -> None:
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


_watched: set[tuple[str, Action]] = set()


def after_import(names: Sequence[str], action: Action) -> None:
    """``action(module)`` for each of ``names``: now if it is imported, else right after it executes (once each)."""
    waiting = []
    for name in names:
        if (name, action) in _watched:
            continue
        _watched.add((name, action))
        if name in sys.modules:
            action(sys.modules[name])
        else:
            waiting.append(name)
    if waiting:
        sys.meta_path.insert(0, _AfterImport(waiting, action))
