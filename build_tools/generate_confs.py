#!/usr/bin/env python3
"""Write configs/backends_<vendor>.conf from configs/routes.toml.

    python build_tools/generate_confs.py            rewrite the confs (atomically, only when changed)
    python build_tools/generate_confs.py --check    exit 1 with a unified diff when a conf is stale

A vendor table with ``qualified = "<provider>"`` takes its provider routes from the committed qualification
report that ``[qualified]`` names for that provider (``python -m torch_fl qualify``; torch_fl/qualify/routes.py
turns a report into blocks, for this script and for a node's own qualification alike): the provider for every
operator that passed, native with the verdict and its reproduction for every other. ``tuned = true`` keeps only
the operators that are also no slower than native. Hand-written blocks of the vendor win over the report.

The confs are committed so that an installed wheel needs no generator; this script is
their only writer. Operator names are checked against torch's schemas when torch is
importable (torch is optional here: the generator must run in a bare CI job too).
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
import textwrap
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomllib

if __package__ in (None, ""):  # run as a script (python build_tools/generate_confs.py) or loaded by path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from build_tools.outputs import atomic_write_text  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
SOURCE = CONFIGS / "routes.toml"
SCRIPT_NAME = "build_tools/generate_confs.py"


def _by_path(name: str, relative: str):
    """A module of torch_fl loaded by path: importing torch_fl needs the built wheel. Both modules loaded here
    import nothing but the standard library: torch_fl/_names.py (the route names) and torch_fl/qualify/routes.py
    (a qualification report as conf blocks)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / relative)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_NAMES = _by_path("torch_fl_route_names", "torch_fl/_names.py")
_QUALIFIED = _by_path("torch_fl_qualified_routes", "torch_fl/qualify/routes.py")
BUILTIN_ROUTES = _NAMES.BUILTIN_ROUTES
ROUTE_ALIASES = tuple(_NAMES.ROUTE_ALIASES)
ROUTE_NAME_RE = _NAMES.ROUTE_NAME_RE
COMMENT_WIDTH = 92

_OP_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)?")

_TOP_KEYS = {"providers", "groups", "vendors", "qualified"}
_VENDOR_KEYS = {"summary", "default", "default_reason", "routes", "qualified", "tuned"}
_BLOCK_KEYS = {"ops", "groups", "chain", "reason"}


class SourceError(ValueError):
    """routes.toml is malformed; the message says where and how to fix it."""


@dataclass(frozen=True)
class Block:
    """Ops sharing one chain and one reason: one commented section of a conf."""

    ops: tuple[str, ...]  # sorted
    chain: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class VendorTable:
    vendor: str
    summary: str
    default: tuple[str, ...]
    default_reason: str
    blocks: tuple[Block, ...]
    qualified: tuple[str, str] | None = None  # (provider, version) of the report the blocks came from

    @property
    def file_name(self) -> str:
        return f"backends_{self.vendor}.conf"


# --- reading and validating routes.toml ------------------------------------------------


def load_source(path: str | os.PathLike[str] = SOURCE) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SourceError(f"{path}: {exc}") from None


def build_tables(source: Mapping[str, Any], known_ops: Collection[str] | None = None) -> list[VendorTable]:
    """Validate ``source`` (parsed routes.toml) and return one table per vendor, sorted by name."""
    _check_keys(source, _TOP_KEYS, "routes.toml")
    routes = _valid_routes(source.get("providers", []))
    groups = _groups(source.get("groups", {}), known_ops)
    vendors = source.get("vendors")
    if not isinstance(vendors, Mapping) or not vendors:
        raise SourceError("routes.toml: no [vendors.<name>] tables; add one per vendor")
    used: set[str] = set()
    reports = _reports(source.get("qualified", {}), routes)
    scope = _Scope(routes, groups, known_ops, used)
    tables = [_vendor(name, vendors[name], scope, reports) for name in sorted(vendors)]
    unused = sorted(set(groups) - used)
    if unused:
        raise SourceError(f"routes.toml: [groups] {', '.join(unused)} defined but never used; delete or use them")
    return tables


def _reports(table: Any, routes: set[str]) -> dict[str, dict[str, Any]]:
    """[qualified] provider = "report path (relative to configs/)": the parsed reports."""
    import json

    if not isinstance(table, Mapping):
        raise SourceError("routes.toml: [qualified] must be a table of provider = \"qualified/<report>.json\"")
    reports = {}
    for provider, rel in table.items():
        where = f"routes.toml: [qualified] {provider}"
        if provider not in routes:
            raise SourceError(f"{where}: '{provider}' is not a provider of routes.toml's providers list")
        path = CONFIGS / str(rel)
        try:
            reports[provider] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise SourceError(f"{where}: cannot read the report {path}: {exc}") from None
        if reports[provider].get("provider") != provider:
            raise SourceError(f"{where}: {path} is a report of {reports[provider].get('provider')!r}")
    return reports


def _check_keys(table: Any, allowed: set[str], where: str) -> None:
    if not isinstance(table, Mapping):
        raise SourceError(f"{where}: expected a table")
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise SourceError(f"{where}: unknown key {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")


def _strings(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise SourceError(f"{where}: expected a list of strings")
    return value


def _text(value: Any, where: str) -> str:
    # Multi-line TOML strings are reflowed anyway; collapse their line breaks here.
    if not isinstance(value, str) or not value.strip():
        raise SourceError(f"{where}: missing or empty; say in a sentence why")
    return " ".join(value.split())


def _valid_routes(providers: Any) -> set[str]:
    names = _strings(providers, "routes.toml: providers")
    for name in names:
        if not ROUTE_NAME_RE.fullmatch(name):
            raise SourceError(f"routes.toml: providers: bad route name '{name}'; use {_NAMES.ROUTE_NAME_PATTERN}")
    return {*BUILTIN_ROUTES, *ROUTE_ALIASES, *names}


def _groups(table: Any, known_ops: Collection[str] | None) -> dict[str, list[str]]:
    if not isinstance(table, Mapping):
        raise SourceError("routes.toml: [groups] must be a table of name = [ops]")
    groups = {}
    for name, ops in table.items():
        where = f"routes.toml: [groups] {name}"
        if not ROUTE_NAME_RE.fullmatch(name):
            raise SourceError(f"{where}: group names are lowercase identifiers")
        groups[name] = _strings(ops, where)
        for op in groups[name]:
            _check_op(op, where, known_ops)
    return groups


def _check_op(op: str, where: str, known_ops: Collection[str] | None) -> None:
    if not _OP_RE.fullmatch(op) or op == "default":
        raise SourceError(f"{where}: bad operator name '{op}'; write aten names like 'add.Tensor' or 'relu'")
    if known_ops is not None and op not in known_ops:
        near = difflib.get_close_matches(op, list(known_ops), n=5, cutoff=0.6)
        hint = f"nearest: {', '.join(near)}" if near else "no operator has a similar name"
        raise SourceError(f"{where}: '{op}' is not an aten operator of this torch; {hint}")


def _check_chain(chain: Any, where: str, routes: set[str]) -> tuple[str, ...]:
    names = _strings(chain, where)
    if not names:
        raise SourceError(f"{where}: empty chain; name at least one route")
    for name in names:
        if name not in routes:
            raise SourceError(f"{where}: unknown route '{name}'; valid routes: {', '.join(sorted(routes))}")
    if len(set(names)) != len(names):
        raise SourceError(f"{where}: a route is listed twice in {names}")
    return tuple(names)


@dataclass(frozen=True)
class _Scope:
    """What every table of routes.toml is checked against, and the groups the tables use (filled as they are read)."""

    routes: set[str]
    groups: Mapping[str, list[str]]
    known_ops: Collection[str] | None
    used_groups: set[str]


def _vendor(name: str, table: Any, scope: _Scope, reports: Mapping[str, dict[str, Any]] | None = None) -> VendorTable:
    where = f"routes.toml: [vendors.{name}]"
    if not ROUTE_NAME_RE.fullmatch(name):
        raise SourceError(f"{where}: vendor names are lowercase identifiers (they name backends_<vendor>.conf)")
    _check_keys(table, _VENDOR_KEYS, where)
    default = _check_chain(table.get("default"), f"{where} default", scope.routes)
    if not any(route in BUILTIN_ROUTES for route in default):
        raise SourceError(f"{where} default: the chain must contain native or cpu so every operator has a route")
    blocks = []
    seen: dict[str, int] = {}  # op -> block number, to name both blocks of a duplicate
    for number, block in enumerate(table.get("routes", []), start=1):
        blocks.append(_block(block, f"{where} routes #{number}", scope))
        for op in blocks[-1].ops:
            if op in seen:
                raise SourceError(f"{where}: '{op}' is in routes #{seen[op]} and routes #{number}; keep one")
            seen[op] = number
    qualified = None
    if "qualified" in table:
        provider = table["qualified"]
        if provider not in (reports or {}):
            raise SourceError(f"{where} qualified: no report for {provider!r} in [qualified]; add its path there")
        report = reports[provider]
        for ops, chain, reason in _QUALIFIED.blocks(report, bool(table.get("tuned")), frozenset(seen)):
            if ops:  # names come from the report's torch, not this one: never filtered, so --check is stable
                blocks.append(Block(ops=tuple(sorted(ops)), chain=chain, reason=" ".join(reason.split())))
        qualified = (provider, report.get("provider_version") or "unversioned")
    elif "tuned" in table:
        raise SourceError(f"{where} tuned: only a table with 'qualified' can be tuned")
    return VendorTable(
        vendor=name,
        summary=_text(table.get("summary"), f"{where} summary"),
        default=default,
        default_reason=_text(table["default_reason"], f"{where} default_reason") if "default_reason" in table else "",
        blocks=tuple(blocks),
        qualified=qualified,
    )


def _block(block: Any, where: str, scope: _Scope) -> Block:
    _check_keys(block, _BLOCK_KEYS, where)
    if "reason" not in block:
        raise SourceError(f"{where}: no 'reason'; every per-op route says why it leaves the default")
    reason = _text(block["reason"], f"{where} reason")
    ops = list(_strings(block.get("ops", []), f"{where} ops"))
    for group in _strings(block.get("groups", []), f"{where} groups"):
        if group not in scope.groups:
            defined = ", ".join(sorted(scope.groups)) or "none"
            raise SourceError(f"{where}: unknown group '{group}'; defined: {defined}")
        scope.used_groups.add(group)
        ops.extend(scope.groups[group])
    if not ops:
        raise SourceError(f"{where}: no ops; list them in 'ops' or name a [groups] entry in 'groups'")
    for op in ops:
        _check_op(op, f"{where} ops", scope.known_ops)
    if len(set(ops)) != len(ops):
        twice = sorted(op for op in set(ops) if ops.count(op) > 1)
        raise SourceError(f"{where}: an operator is listed twice: {', '.join(twice)}")
    return Block(
        ops=tuple(sorted(ops)), chain=_check_chain(block.get("chain"), f"{where} chain", scope.routes), reason=reason
    )


# --- rendering -------------------------------------------------------------------------


def render(source: Mapping[str, Any], *, known_ops: Collection[str] | None = None) -> dict[str, str]:
    """Conf file name -> text, for every vendor in ``source``."""
    return {table.file_name: render_table(table) for table in build_tables(source, known_ops)}


def render_table(table: VendorTable) -> str:
    lines = [
        f"# generated by {SCRIPT_NAME} from configs/routes.toml, do not edit",
        f"# vendor: {table.vendor}",
        *_comment(table.summary),
        f"# regenerate: python {SCRIPT_NAME}; check: python {SCRIPT_NAME} --check",
        "#",
        "# op.overload = route[, next-route ...]: the first route usable at start-up wins.",
        "# default applies to every operator without a line of its own.",
    ]
    if table.qualified:  # in the header: start-up warns when another version of the provider is installed
        lines += [f"qualified {table.qualified[0]} {table.qualified[1]}"]
    lines += [""]
    if table.default_reason:
        lines += _comment(table.default_reason)
    lines += [f"default = {', '.join(table.default)}"]
    for block in table.blocks:
        lines += ["", *_comment(block.reason)]
        lines += [f"{op} = {', '.join(block.chain)}" for op in block.ops]
    return "\n".join(lines) + "\n"


def _comment(text: str) -> list[str]:
    return textwrap.wrap(
        text,
        width=COMMENT_WIDTH,
        initial_indent="# ",
        subsequent_indent="# ",
        break_long_words=False,
        break_on_hyphens=False,
    )


# --- writing and checking -----------------------------------------------------------------


def stale(out_dir: Path, rendered: Mapping[str, str]) -> list[str]:
    """Unified diffs (committed -> generated) for every conf that differs; [] when current."""
    diffs = []
    for name, text in sorted(rendered.items()):
        path = out_dir / name
        current = path.read_text(encoding="utf-8") if path.is_file() else ""
        if current != text:
            diffs.append(
                "".join(
                    difflib.unified_diff(
                        current.splitlines(keepends=True),
                        text.splitlines(keepends=True),
                        fromfile=f"{path} (committed)",
                        tofile=f"{path} (generated)",
                    )
                )
            )
    for path in sorted(out_dir.glob("backends_*.conf")):
        if path.name not in rendered:
            diffs.append(f"{path}: no vendor in routes.toml generates it; delete it or add the vendor\n")
    return diffs


def write(out_dir: Path, rendered: Mapping[str, str]) -> list[Path]:
    """Write the changed confs, each atomically (build_tools/outputs.py)."""
    written = []
    for name, text in sorted(rendered.items()):
        path = out_dir / name
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            continue
        written.append(atomic_write_text(path, text))
    return written


def torch_known_ops() -> frozenset[str] | None:
    """Every aten op the installed torch's dispatcher has (``add.Tensor``, ``relu``), or None without torch.

    The same set the runtime validates confs against, so a name passing here passes there.
    """
    try:
        import torch  # lazy and optional: only used to validate names
    except ImportError:
        return None
    prefix = "aten::"
    return frozenset(name[len(prefix) :] for name in torch._C._dispatch_get_all_op_names() if name.startswith(prefix))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 on a difference")
    parser.add_argument("--source", type=Path, default=SOURCE, help="the declarative source (default: %(default)s)")
    parser.add_argument("--out-dir", type=Path, default=CONFIGS, help="where the confs live (default: %(default)s)")
    parser.add_argument("--no-torch", action="store_true", help="do not check op names against torch's schemas")
    args = parser.parse_args(argv)

    known_ops = None if args.no_torch else torch_known_ops()
    if known_ops is None and not args.no_torch:
        print("generate_confs: torch is not importable; operator names are not checked", file=sys.stderr)
    try:
        rendered = render(load_source(args.source), known_ops=known_ops)
    except SourceError as exc:
        print(f"generate_confs: error: {exc}", file=sys.stderr)
        return 2
    if args.check:
        diffs = stale(args.out_dir, rendered)
        if diffs:
            sys.stdout.write("".join(diffs))
            print(f"generate_confs: confs are stale; run: python {SCRIPT_NAME}", file=sys.stderr)
            return 1
        return 0
    for path in write(args.out_dir, rendered):
        print(f"generate_confs: wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
