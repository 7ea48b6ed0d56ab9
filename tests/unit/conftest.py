"""Load the pure-Python modules under test by file path.

``import torch_fl`` loads the compiled extension, which unit tests must not need, so the
modules are loaded from their files and registered under flat names; test modules then
``import torch_fl_conf`` and friends. pytest imports this conftest before any test module.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]

MODULES = {
    "torch_fl_conf": ROOT / "torch_fl" / "_conf.py",
    "torch_fl_env": ROOT / "torch_fl" / "_env.py",
    "torch_fl_routing": ROOT / "torch_fl" / "_routing.py",
    "generate_confs": ROOT / "build_tools" / "generate_confs.py",
}


def load_by_path(name: str, path: Path) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before exec: dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


for _name, _path in MODULES.items():
    load_by_path(_name, _path)
