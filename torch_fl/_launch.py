"""How this process started: ``python -m torch_fl`` lets the CLI report what would stop ``import torch_fl``.

Standard library only, so that the package asks it before its compiled core loads.
"""

from __future__ import annotations

import os
import sys


def launched_as_cli() -> bool:
    """Whether this import is the CLI locating its entry point: `python -m torch_fl ...` (Python sets argv[0] to
    "-m" while it imports the package, and the interpreter's own command line names torch_fl as the module), or the
    `torch-fl` console script, whose wrapper pip writes and runs as the process's __main__."""
    argv = list(getattr(sys, "orig_argv", ()))
    as_module = sys.argv[:1] == ["-m"] and "-m" in argv and argv[argv.index("-m") + 1 :][:1] == ["torch_fl"]
    script = getattr(sys.modules.get("__main__"), "__file__", None) or ""
    return as_module or os.path.basename(script) == "torch-fl"
