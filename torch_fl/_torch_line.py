"""The torch line check that ``import torch_fl`` makes before its compiled core loads.

The core links against the C++ symbols of the one torch minor line it was built with. In another line (after
``pip install -U torch``, say) the dynamic loader stops at the first missing symbol, a message that names neither
line nor the way out. The installed wheel's version carries its line (``0.1.0+pt215cpu``, torch_fl/_variant.py), so
the package compares it with the installed torch first and refuses with one TorchLineError that says both and gives
the pip line of the torch that is there. A source tree has no version of its own and is never refused here.

Standard library and ``_variant`` only: no torch import, so the unit tests decide with fake versions.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from types import ModuleType

from . import _variant

DIST = "torch-fl"
# The index base in the pip lines torch_fl prints, as the README names it: the user's shell fills it in.
INDEX_BASE = "$TORCH_FL_INDEX"


class TorchLineError(ImportError):
    """The installed torch-fl wheel is built for another torch line than the installed torch's."""


def wheel_version(package_dir: Path) -> str | None:
    """The version of the installed torch-fl distribution whose files are ``package_dir``, else None: a source
    checkout (or an editable install's tree) imported in front of, or without, an installed wheel has no version
    that speaks for it."""
    try:
        dist = metadata.distribution(DIST)
    except metadata.PackageNotFoundError:
        return None
    owned = Path(str(dist.locate_file("torch_fl")))
    return dist.version if owned.resolve() == package_dir.resolve() else None


def installed_torch(fallback: str) -> str:
    """The installed torch's version as pip knows it (its distribution's), which the ``torch==`` pin must match;
    ``fallback`` (``torch.__version__``) where torch has no distribution metadata."""
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return fallback


def check(torch: ModuleType, package_dir: Path) -> TorchLineError | None:
    """``refusal`` for the imported ``torch`` module and the torch_fl package at ``package_dir``."""
    hip = getattr(torch.version, "hip", None)
    toolchain = _variant.toolchain_from_torch(torch.__version__, torch.version.cuda, hip)
    location = str(Path(torch.__file__).parent)
    return refusal(wheel_version(package_dir), installed_torch(torch.__version__), location, toolchain)


def refusal(wheel: str | None, torch_version: str, location: str, toolchain: str) -> TorchLineError | None:
    """The error ``import torch_fl`` raises when the wheel ``wheel`` (a version, None for a source tree) is built
    for another torch line than ``torch_version`` (installed at ``location``, a ``toolchain`` build); else None
    (returned, not raised, so the package raises it among its imports and the CLI prints it).

    A wheel version without a variant label (a local build) or a torch version that does not start with a line
    passes: the core's loader still reports a torch it cannot use.
    """
    if wheel is None:
        return None
    try:
        built = _variant.from_version(wheel)
        line = _variant.torch_line(torch_version)
    except _variant.VariantError:
        return None
    if built.line == line:
        return None
    return TorchLineError(_message(wheel, built, torch_version, location, toolchain))


def _message(wheel: str, built: _variant.Variant, torch_version: str, location: str, toolchain: str) -> str:
    want = f"{built.line[0]}.{built.line[1]}"
    return (
        f"torch-fl {wheel} is built for torch {want} (variant {built.label}), but the installed torch is "
        f"{torch_version} ({location}); the compiled core loads only into torch {want}. Install the torch-fl "
        f"build of this torch's line, keeping torch as it is ({INDEX_BASE} is your torch-fl index, README.md's "
        f"Install):\n    {_variant.install_line(INDEX_BASE, toolchain, torch_version)}\n"
        f"or put torch {want} back (the line `pip show torch-fl` requires)."
    )
