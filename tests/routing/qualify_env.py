"""What the qualification's tests (test_qualify.py, test_qualify_providers.py) run their child processes with."""

from __future__ import annotations

import os
from pathlib import Path

HERE = Path(__file__).parent
# seconds an operator may run beyond its tuning: the demo's sin never returns after its first call, so every full
# run waits this long once. Each other operator's samples take well under a second alone, but the first one of a
# worker took over 6 s beside 13 other test workers on a GPU node (its first flagos calls, under load): the margin
# keeps a slow machine from a timeout. The demo's erf tunes for longer than this on its first call.
TIMEOUT = 20


def emulation_env(**extra: str) -> dict[str, str]:
    """The emulation, on any machine (a GPU node too), with the demo provider importable beside the installed
    torch_fl: the node's own PYTHONPATH (where the wheel may be installed) stays on the path."""
    path = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "FLAGOS_ACCELERATOR": "cpu", **extra}
