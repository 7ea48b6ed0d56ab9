"""Route names: the one Python home of the built-in routes, their aliases and the shape of a route name.

No imports beyond ``re``: the conf parser, the environment reader, the route resolver, the provider registry and
the conf generator (build_tools/generate_confs.py, which loads this file by path) all read it. The C++ router
keeps its own copy of the built-in names (csrc/dispatch).
"""

from __future__ import annotations

import re

NATIVE = "native"
CPU = "cpu"
BUILTIN_ROUTES = (NATIVE, CPU)
ROUTE_ALIASES = {"cuda": NATIVE}  # older confs say `add.Tensor = cuda`
RESERVED = (*BUILTIN_ROUTES, *ROUTE_ALIASES, "default")  # never a provider's name
ROUTE_NAME_PATTERN = "[a-z][a-z0-9_]*"  # lowercase identifiers
ROUTE_NAME_RE = re.compile(ROUTE_NAME_PATTERN)
