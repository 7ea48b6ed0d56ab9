"""Import the modules under test from the checkout, without the compiled core.

The unit tests are the one suite that tests the checkout itself (the others test the installed wheel from copies
without tests/unit), so the repository root goes on sys.path here, once for all of them: ``build_tools`` and the
tools under it import as a package. ``import torch_fl`` loads the compiled core, which unit tests must not need:
``torch_fl`` is registered as a bare package (its directory, without running its ``__init__.py``), so its
pure-Python modules import as they do in the wheel, relative imports included. Test modules ``import
torch_fl_conf`` and friends (the names below); pytest imports this conftest before any test module.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

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

if "torch_fl" not in sys.modules:
    _package = ModuleType("torch_fl")
    _package.__path__ = [str(ROOT / "torch_fl")]
    sys.modules["torch_fl"] = _package
for _alias, _module in MODULES.items():
    sys.modules[_alias] = importlib.import_module(_module)
