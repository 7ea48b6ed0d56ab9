"""Read a frozen dataclass from a TOML table, driven by its fields.

Each field declares its key once (``key(doc, ...)``): the annotation gives the type (``str``, ``bool``,
``tuple[str, ...]``, ``Mapping[str, str]``, a nested dataclass, or rows of one: ``tuple[Row, ...]`` named
``key#1``, ``key#2``, ... and ``Mapping[str, Row]``), a field without a default is required, and the metadata holds
the dotted TOML path and the check of the value. Problems are collected so the caller reports them all at once,
unknown keys with the nearest known names.
"""

from __future__ import annotations

import difflib
import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field, field, fields, is_dataclass
from typing import Any

# a check returns the problem with a value (or with one item of a list, one key of a table), None when it is fine
Check = Callable[[Any], "str | None"]


def key(doc: str, *, toml: str = "", check: Check | None = None, **kw: Any) -> Any:
    """A TOML key: its documentation, its dotted path where that is not the field name, and its check."""
    return field(metadata={"doc": doc, "toml": toml, "check": check}, **kw)


def given(check: Check | None = None, *, quoted: bool = False) -> Any:
    """A field the reader hands rather than reads: the name of the table a row comes from. A row whose name fails
    ``check`` is not read; a ``quoted`` name is written ``table."name"`` in problems."""
    return field(metadata={"given": True, "check": check, "quoted": quoted})


def rule(ok: Callable[[Any], Any], problem: str) -> Check:
    """A check that reports ``problem`` (``{v!r}`` is the value) where ``ok(value)`` is false."""
    return lambda value: None if ok(value) else problem.format(v=value)


def matches(pattern: re.Pattern[str], hint: str) -> Check:
    return lambda value: None if pattern.match(value) else f"expected {hint}, got {value!r}"


one_line = rule(lambda value: "\n" not in value, "must be one line")


def keys_of(cls: type) -> list[Field[Any]]:
    return [f for f in fields(cls) if not f.metadata.get("given")]


def path_of(f: Field[Any]) -> str:
    return f.metadata.get("toml") or f.name


class Problems(list[str]):
    """``dotted.key: problem`` lines, in the order they were found."""

    def add(self, where: str, problem: str) -> None:
        self.append(f"{where}: {problem}")

    def unknown(self, where: str, names: list[str], known: list[str]) -> None:
        for name in names:
            near = difflib.get_close_matches(name, known, n=1)
            self.add(_join(where, name), "unknown key" + (f" (did you mean {near[0]}?)" if near else " (typo?)"))


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


# per annotated type: how a TOML value of it is recognised, and what a problem says was expected
_KINDS: dict[Any, tuple[Callable[[Any], bool], str]] = {
    Any: (lambda v: True, "anything"),  # a value its caller checks
    bool: (lambda v: isinstance(v, bool), "true or false"),
    str: (lambda v: isinstance(v, str), "a string"),
    tuple: (lambda v: isinstance(v, list) and all(isinstance(x, str) and x for x in v), "a list of non-empty strings"),
}


def _convert(tp: Any, value: Any, where: str, problems: Problems, **handed: Any) -> Any:
    """``value`` as ``tp`` (lists become tuples, tables dicts or dataclasses); None with a problem if it is not one."""
    kind, args = typing.get_origin(tp) or tp, typing.get_args(tp)
    if is_dataclass(tp) or kind is Mapping or (kind is tuple and args[0] is not str):
        if not isinstance(value, list if kind is tuple else dict):
            problems.add(where, f"expected {'a list' if kind is tuple else 'a table'}, got {value!r}")
            return None
        if is_dataclass(tp):
            return read(tp, value, where, problems, **handed)
        row = args[0] if kind is tuple else args[1]  # a row with a problem is None in the rows
        if kind is tuple:
            return tuple(_convert(row, v, f"{where}#{n}", problems) for n, v in enumerate(value, 1))
        name = next((f for f in fields(row) if f.metadata.get("given")), None) if is_dataclass(row) else None
        rows = {}
        for k, v in value.items():
            at = _join(where, f'"{k}"' if name and name.metadata["quoted"] else k)
            if name and name.metadata["check"] and (problem := name.metadata["check"](k)):
                problems.add(at, problem)
            else:
                rows[k] = _convert(row, v, at, problems, **({name.name: k} if name else {}))
        return rows
    accepts, expected = _KINDS[kind]
    if accepts(value):
        return tuple(value) if kind is tuple else value
    problems.add(where, f"expected {expected}, got {value!r}")
    return None


def _check(f: Field[Any], value: Any, where: str, problems: Problems) -> None:
    check = f.metadata.get("check")
    if check is None:
        return
    if isinstance(value, tuple):
        items = [(where, v) for v in value]
    else:
        items = [(f"{where}.{k}", k) for k in value] if isinstance(value, dict) else [(where, value)]
    for at, item in items:
        if problem := check(item):
            problems.add(at, problem)


def read(cls: type, table: Mapping[str, Any], where: str, problems: Problems, **handed: Any) -> Any:
    """An instance of the dataclass ``cls`` from ``table`` (``where`` is its dotted name), or None when
    ``problems`` got a problem with it. ``handed`` are the fields given rather than read."""
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = dict(handed)
    known: list[str] = []
    start = len(problems)
    for f in keys_of(cls):
        path = path_of(f)
        known.append(path)
        at = _join(where, path)
        node: Any = table
        for part in path.split("."):
            node = node.get(part, MISSING) if isinstance(node, dict) else MISSING
        if node is MISSING:
            if f.default is MISSING and f.default_factory is MISSING:
                problems.add(at, "missing (required)")
            continue
        value = _convert(hints[f.name], node, at, problems)
        if value is not None:
            _check(f, value, at, problems)
            values[f.name] = value
    groups = {p.split(".", 1)[0] for p in known if "." in p}
    for group in sorted(groups & set(table)):
        sub = table[group]
        if not isinstance(sub, dict):
            problems.add(_join(where, group), f"expected a table, got {sub!r}")
            continue
        inner = [p.split(".", 1)[1] for p in known if p.startswith(group + ".")]
        problems.unknown(_join(where, group), sorted(set(sub) - set(inner)), inner)
    top = {p.split(".", 1)[0] for p in known}
    problems.unknown(where, sorted(set(table) - top), sorted(top))
    return cls(**values) if len(problems) == start else None


def docs(cls: type, title: str) -> list[str]:
    """Markdown rows ``| `key` | doc |`` of every key of ``cls``, nested tables spelt out."""
    hints = typing.get_type_hints(cls)
    out: list[str] = []
    for f in keys_of(cls):
        if is_dataclass(hints[f.name]):
            out += [row.replace("| `", f"| `{path_of(f)}.", 1) for row in docs(hints[f.name], "")]
        else:
            out.append(f"| `{path_of(f)}` | {f.metadata['doc']} |")
    return [f"`{title}`", "", "| key | meaning |", "| --- | --- |", *out] if title else out
