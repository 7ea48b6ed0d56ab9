"""How this process started: ``python -m torch_fl`` lets the CLI report what would stop ``import torch_fl``.

Standard library only, so that the package asks it before its compiled extension loads.
"""

from __future__ import annotations

import sys


def launched_as_cli() -> bool:
    """Whether this import is `python -m torch_fl ...` locating its __main__: Python sets argv[0] to "-m" while
    it imports the package, and the interpreter's own command line names torch_fl as the module."""
    argv = list(getattr(sys, "orig_argv", ()))
    return sys.argv[:1] == ["-m"] and "-m" in argv and argv[argv.index("-m") + 1 :][:1] == ["torch_fl"]
