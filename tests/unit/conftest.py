"""Import the pure-Python modules under test without the compiled core.

``import torch_fl`` loads the compiled core, which unit tests must not need: ``torch_fl`` is registered as a
bare package (its directory, without running its ``__init__.py``), so its pure-Python modules import as they do
in the wheel, relative imports included. Test modules ``import torch_fl_conf`` and friends (the names below);
pytest imports this conftest before any test module.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]

MODULES = {
    "torch_fl_names": "torch_fl._names",
    "torch_fl_errors": "torch_fl._errors",
    "torch_fl_conf": "torch_fl.routing.conf",
    "torch_fl_env": "torch_fl._env",
    "torch_fl_routing": "torch_fl.routing.table",
    "torch_fl_torch_floor": "torch_fl._torch_floor",
    "torch_fl_torch_line": "torch_fl._torch_line",
    "torch_fl_variant": "torch_fl._variant",
    "torch_fl_launch": "torch_fl._launch",
}
SCRIPTS = {
    "generate_confs": ROOT / "build_tools" / "generate_confs.py",
    "mixed_device_check": ROOT / "tests" / "node" / "mixed_device_check.py",
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


if "torch_fl" not in sys.modules:
    _package = ModuleType("torch_fl")
    _package.__path__ = [str(ROOT / "torch_fl")]
    sys.modules["torch_fl"] = _package
for _alias, _module in MODULES.items():
    sys.modules[_alias] = importlib.import_module(_module)
for _name, _path in SCRIPTS.items():
    load_by_path(_name, _path)
