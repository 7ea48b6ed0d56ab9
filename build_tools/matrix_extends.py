"""``extends = "<row>"`` in configs/toolchains.toml: a row takes every key of the row it names and overrides what
it sets, so that a torch line of a vendor states only how it differs from its sibling."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .tomlfields import Problems


def _deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def resolve(rows: Any, problems: Problems) -> Any:
    """The toolchain tables with ``extends = "<row>"`` resolved: a row takes every key of the row it names and
    overrides what it sets (a torch line of a vendor differs from its sibling in a few keys)."""
    if not isinstance(rows, dict):
        return rows
    out: dict[str, Any] = {}

    def row_of(name: str, seen: tuple[str, ...]) -> Any:
        row = rows[name]
        if not isinstance(row, dict) or "extends" not in row:
            return row
        parent = row["extends"]
        where = f"toolchains.{name}.extends"
        if parent not in rows or not isinstance(rows[parent], dict):
            problems.add(where, f"no [toolchains.{parent}] table to extend")
            return {k: v for k, v in row.items() if k != "extends"}
        if parent in seen:
            problems.add(where, f"extends itself through {' -> '.join((*seen, parent))}")
            return {k: v for k, v in row.items() if k != "extends"}
        return _deep_merge(row_of(parent, (*seen, parent)), row)

    for name in rows:
        out[name] = row_of(name, (name,))
    return out
