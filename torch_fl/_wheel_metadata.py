"""scikit-build-core dynamic-metadata provider: the variant version and the torch pin.

Part of the package build (pyproject.toml names it), so it lives with the package and stays out of the wheel
(``wheel.exclude``). The extension only works with the torch minor line it was built against, so the wheel pins it
(``torch>=2.13,<2.14``) and its local version names that line and the toolchain (``0.1.0+pt213cpu``): builds never
collide and indexes never mix. The scheme, ``_variant.py`` beside this file, is loaded by path: the build must not
import the package, whose ``__init__`` loads the compiled core that this build is making.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

VARIANT_ENV = "TORCH_FL_VARIANT"
_SCHEME_NAME = "torch_fl_variant_scheme"


def _load_scheme() -> Any:
    if _SCHEME_NAME in sys.modules:
        return sys.modules[_SCHEME_NAME]
    spec = importlib.util.spec_from_file_location(_SCHEME_NAME, Path(__file__).with_name("_variant.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[_SCHEME_NAME] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


variants = _load_scheme()


def torch_variant(torch_version: str) -> str:
    """The toolchain implied by an installed torch's version string (asks torch when it has no local tag)."""
    if torch_version.partition("+")[2]:
        return variants.toolchain_from_torch(torch_version)
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"  # never import an installed torch_fl mid-build
    import torch  # no local tag (PyPI's default build): ask torch itself

    return variants.toolchain_from_torch(torch_version, torch.version.cuda, getattr(torch.version, "hip", None))


def torch_pin(torch_version: str) -> str:
    return variants.Variant(variants.torch_line(torch_version), "cpu").torch_requirement


def dynamic_metadata(settings: Mapping[str, Any], project: Mapping[str, Any]) -> dict[str, Any]:
    base = settings.get("base-version")
    if not isinstance(base, str):
        raise RuntimeError('[[tool.dynamic-metadata]] for torch_fl needs base-version = "X.Y.Z"')
    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        raise RuntimeError(
            "torch is not installed in the building Python: install the torch you build against, "
            "then build with --no-build-isolation (pip wheel --no-build-isolation .)"
        ) from None
    toolchain = os.environ.get(VARIANT_ENV) or torch_variant(torch_version)
    try:
        variant = variants.make(torch_version, toolchain)
    except variants.VariantError as exc:
        raise RuntimeError(f"{VARIANT_ENV}={toolchain!r}: {exc}") from None
    return {"version": f"{base}+{variant.label}", "dependencies": [variant.torch_requirement]}
