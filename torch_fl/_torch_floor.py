"""The oldest torch line torch_fl supports, checked by ``import torch_fl`` before the compiled core loads.

A torch older than the floor lacks APIs the core links against, and its loader would fail with an undefined
symbol that names neither torch_fl nor the fix. CMakeLists.txt reads ``FLOOR`` from this file, so the build and
the import refuse the same torch lines.
"""

from __future__ import annotations

import re

FLOOR = "2.9"

_LINE = re.compile(r"(\d+)\.(\d+)")


def torch_line(version: str) -> tuple[int, int] | None:
    """(major, minor) of a torch version string (``2.9.1+cu128``, ``2.10.0a0+git1234``, a DAS torch's local
    suffix); None when it does not start with two numbers."""
    match = _LINE.match(version.strip())
    return (int(match.group(1)), int(match.group(2))) if match else None


def refusal(version: str, location: str = "") -> ImportError | None:
    """The ImportError that ``import torch_fl`` raises when ``version`` is a torch line older than ``FLOOR``, else
    None (returned, not raised, so the package can raise it among its imports).

    A version that cannot be read passes: vendor builds spell their versions their own way, and the extension's
    loader still reports a torch it cannot use.
    """
    line = torch_line(version)
    floor = torch_line(FLOOR)
    if line is None or floor is None or line >= floor:
        return None
    found = f"torch {version}" + (f" ({location})" if location else "")
    return ImportError(
        f"torch_fl needs torch>={FLOOR}, but found {found}. Install the torch line this torch-fl wheel was "
        f"built for (`pip show torch-fl` lists it under Requires; every line is {FLOOR} or newer), then import "
        "torch_fl again."
    )
