"""What the modules of this package share: the device name and rebinding a function where torch binds it by name."""

from __future__ import annotations

import sys
from typing import Any

DEVICE = "flagos"


def rebind(name: str, original: Any, replacement: Any) -> None:
    """Put ``replacement`` wherever a loaded module holds ``original`` under ``name`` (torch._inductor.utils and the
    modules that imported it by name); modules imported later take it from utils."""
    replacement.__flagos__ = True
    replacement.__wrapped__ = original
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if isinstance(namespace, dict) and namespace.get(name) is original:
            setattr(module, name, replacement)
