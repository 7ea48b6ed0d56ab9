"""scikit-build-core dynamic-metadata provider: version variant and torch pin.

The compiled extension only works with the torch minor line it was built
against, so the wheel says so (``torch>=2.13,<2.14``), and its local version
names the toolchain variant (``0.1.0+cpu``, ``+cu130``, ``+dtk2604``) so that
per-variant indexes never mix.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from importlib import metadata
from typing import Any

from packaging.version import Version

VARIANT_ENV = "TORCH_FL_VARIANT"


def torch_variant(torch_version: str) -> str:
    """The variant tag implied by an installed torch's version string."""
    local = Version(torch_version).local or ""
    if dtk := re.search(r"dtk(\d+)", local):
        return f"dtk{dtk.group(1)}"
    if re.fullmatch(r"cu\d+|rocm[\d.]+|cpu", local):
        return local.replace(".", "")
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"  # never import an installed torch_fl mid-build
    import torch  # no local tag (PyPI's default build): ask torch itself

    cuda = torch.version.cuda
    return "cu" + cuda.replace(".", "") if cuda else "cpu"


def torch_pin(torch_version: str) -> str:
    v = Version(torch_version)
    return f"torch>={v.major}.{v.minor},<{v.major}.{v.minor + 1}"


def dynamic_metadata(settings: Mapping[str, Any], project: Mapping[str, Any]) -> dict[str, Any]:
    base = settings.get("base-version")
    if not isinstance(base, str):
        raise RuntimeError("[[tool.dynamic-metadata]] for torch_fl needs base-version = \"X.Y.Z\"")
    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        raise RuntimeError(
            "torch is not installed in the building Python: install the torch you build against, "
            "then build with --no-build-isolation (pip wheel --no-build-isolation .)"
        ) from None
    variant = os.environ.get(VARIANT_ENV) or torch_variant(torch_version)
    if not re.fullmatch(r"[a-z0-9]+", variant):
        raise RuntimeError(f"{VARIANT_ENV}={variant!r} is not a valid local version tag: use e.g. cpu, cu130, dtk2604")
    return {"version": f"{base}+{variant}", "dependencies": [torch_pin(torch_version)]}
