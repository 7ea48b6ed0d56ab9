"""The FLAGOS_LOG categories Python writes (``config``, ``fallback``) and the switch of the C++ dispatch log."""

from __future__ import annotations

import sys
from collections import Counter

from .. import _core
from .._env import Settings
from .table import RouteTable


def log_config(settings: Settings, conf_path: str, table: RouteTable) -> None:
    counts = Counter(r.route for r in table.entries.values())
    summary = ", ".join(f"{k}={v}" for k, v in sorted(counts.items())) or "none"
    print(
        f"[flagos config] accelerator={_core.accelerator()} conf={conf_path} "
        f"default={table.default.route} per-op routes: {summary}; "
        f"overrides: {', '.join(o.var for o in settings.overrides) or 'none'}",
        file=sys.stderr,
    )


def log_fallbacks(table: RouteTable) -> None:
    for r in sorted(table.entries.values(), key=lambda r: r.op):
        for route_name, reason in r.skipped:
            print(f"[flagos fallback] {r.op}: skipped {route_name} ({reason}) -> {r.serves()}", file=sys.stderr)
        if r.gated() and not r.skipped:
            print(f"[flagos fallback] {r.op}: {r.serves()}", file=sys.stderr)


def set_dispatch_log(on: bool) -> None:
    """Switch the per-call dispatch log at run time (FLAGOS_LOG=dispatch at start)."""
    _core.set_log_dispatch(bool(on))
