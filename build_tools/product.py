"""The product's pure-Python modules, read by the tooling by path: importing the torch_fl package needs the
built core, and the product never reaches back into build_tools."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

_ROOT = Path(__file__).resolve().parents[1]


def by_path(name: str, relative: str) -> ModuleType:
    """A standard-library-only module of torch_fl, loaded once under ``name`` from ``relative`` to the checkout."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, _ROOT / relative)
    assert spec is not None and spec.loader is not None, relative
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


# the wheel's variant scheme, under the name the package build's metadata provider loads it by
variants = by_path("torch_fl_variant_scheme", "torch_fl/_variant.py")
