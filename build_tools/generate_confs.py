#!/usr/bin/env python3
"""Write configs/backends_<vendor>.conf from configs/routes.toml.

    python build_tools/generate_confs.py            rewrite the confs (atomically, only when changed)
    python build_tools/generate_confs.py --check    exit 1 with a unified diff when a conf is stale

How a ``qualified`` vendor table takes its blocks from a committed report (torch_fl/qualify/routes.py) is said above
``[qualified]`` in configs/routes.toml. The confs are committed so an installed wheel needs no generator; operator
names are checked against torch's schemas when torch is importable (a bare CI job has none).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import sys
import textwrap
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

if __package__ in (None, ""):  # run as a script (python build_tools/generate_confs.py) or loaded by path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from build_tools.outputs import atomic_write_text  # noqa: E402
from build_tools.product import by_path  # noqa: E402
from build_tools.tomlfields import Problems, key, matches, read  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
SOURCE = CONFIGS / "routes.toml"
SCRIPT_NAME = "build_tools/generate_confs.py"


_NAMES = by_path("torch_fl_route_names", "torch_fl/_names.py")
_QUALIFIED = by_path("torch_fl_qualified_routes", "torch_fl/qualify/routes.py")
BUILTIN_ROUTES = _NAMES.BUILTIN_ROUTES

_OP_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)?")


class SourceError(ValueError):
    """routes.toml is malformed; the message says where and how to fix it."""


Block = _QUALIFIED.Block  # (sorted ops, chain, reason): ops sharing one chain and reason, a section of a conf


@dataclass(frozen=True)
class VendorTable:
    vendor: str
    summary: str
    default: tuple[str, ...]
    default_reason: str
    blocks: tuple[Block, ...]
    qualified: tuple[str, str] | None = None  # (provider, version) of the report the blocks came from


_ROUTE_NAME = _NAMES.ROUTE_NAME_PATTERN
_lowercase = matches(re.compile(_ROUTE_NAME + r"\Z"), f"a lowercase identifier ({_ROUTE_NAME})")
_sentence = matches(re.compile(r"\s*\S"), "a sentence")


@dataclass(frozen=True)
class _Routes:
    """A ``[[vendors.<name>.routes]]`` block as written."""

    reason: str = key("why its operators leave the default (the comment above their lines)", check=_sentence)
    chain: tuple[str, ...] = key("the routes of its operators, in order of preference")
    ops: tuple[str, ...] = key("aten operator names", default=())
    groups: tuple[str, ...] = key("[groups] entries whose operators join ops", default=())


@dataclass(frozen=True)
class _Vendor:
    """A ``[vendors.<name>]`` table as written; None where a key is not written."""

    summary: str = key("one sentence in the conf's header", check=_sentence)
    default: tuple[str, ...] = key("the chain of every operator without a line of its own")
    default_reason: str = key("why that default", check=_sentence, default="")
    routes: tuple[_Routes, ...] = key("per-op blocks; they win over the report", default=())
    qualified: str = key("the provider whose [qualified] report gives the blocks", default=None)
    tuned: bool = key("keep only the report's operators no slower than native", default=None)


@dataclass(frozen=True)
class _Source:
    """routes.toml as written."""

    vendors: Mapping[str, _Vendor] = key("one table per backends_<vendor>.conf", check=_lowercase)
    providers: tuple[str, ...] = key("the routes besides the builtins", check=_lowercase, default=())
    groups: Mapping[str, tuple[str, ...]] = key("named operator lists", check=_lowercase, default_factory=dict)
    qualified: Mapping[str, str] = key("provider = its report, relative to configs/", default_factory=dict)


def load_source(path: str | os.PathLike[str] = SOURCE) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SourceError(f"{path}: {exc}") from None


def build_tables(source: Mapping[str, Any], known_ops: Collection[str] | None = None) -> list[VendorTable]:
    """Validate ``source`` (parsed routes.toml): one table per vendor, sorted by name, or every problem at once
    (the checks beyond the shape, of routes, groups, operators and reports, once the shape is right)."""
    problems = Problems()
    spec = read(_Source, dict(source), "", problems)
    routes = set() if spec is None else {*BUILTIN_ROUTES, *_NAMES.ROUTE_ALIASES, *spec.providers}
    tables = [] if spec is None else _Checks(spec, routes, known_ops, problems).tables()
    if problems:
        raise SourceError("\n".join(f"routes.toml: {problem}" for problem in problems))
    return tables


@dataclass
class _Checks:
    """What a well-formed routes.toml is checked against beyond its shape: routes, groups, operators, reports."""

    spec: _Source
    routes: set[str]
    known_ops: Collection[str] | None
    problems: Problems
    used_groups: set[str] = field(default_factory=set)  # filled as the blocks are checked

    def tables(self) -> list[VendorTable]:
        for name, ops in self.spec.groups.items():
            self.ops(ops, f"groups.{name}")
        reports = self.reports()
        if not self.spec.vendors:
            self.problems.add("vendors", "no [vendors.<name>] tables; add one per vendor")
        tables = [self.vendor(name, self.spec.vendors[name], reports) for name in sorted(self.spec.vendors)]
        if unused := sorted(set(self.spec.groups) - self.used_groups):
            self.problems.add("groups", f"{', '.join(unused)} defined but never used; delete or use them")
        return tables

    def reports(self) -> dict[str, dict[str, Any]]:
        """[qualified] provider = "report path (relative to configs/)": the reports that read well."""
        reports = {}
        for provider, rel in self.spec.qualified.items():
            path, where, report = CONFIGS / rel, f"qualified.{provider}", None
            try:
                report = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                self.problems.add(where, f"cannot read the report {path}: {exc}")
            if provider not in self.routes:
                self.problems.add(where, f"'{provider}' is not a provider of routes.toml's providers list")
            elif report is not None and report.get("provider") != provider:
                self.problems.add(where, f"{path} is a report of {report.get('provider')!r}")
            elif report is not None:
                reports[provider] = report
        return reports

    def ops(self, ops: tuple[str, ...], where: str) -> None:
        for op in ops:
            if not _OP_RE.fullmatch(op) or op == "default":
                self.problems.add(where, f"bad operator name '{op}'; write aten names like 'add.Tensor' or 'relu'")
            elif self.known_ops is not None and op not in self.known_ops:
                near = difflib.get_close_matches(op, list(self.known_ops), n=5, cutoff=0.6)
                hint = f"nearest: {', '.join(near)}" if near else "no operator has a similar name"
                self.problems.add(where, f"'{op}' is not an aten operator of this torch; {hint}")

    def chain(self, chain: tuple[str, ...], where: str) -> None:
        if not chain:
            self.problems.add(where, "empty chain; name at least one route")
        for name in chain:
            if name not in self.routes:
                self.problems.add(where, f"unknown route '{name}'; valid routes: {', '.join(sorted(self.routes))}")
        if len(set(chain)) != len(chain):
            self.problems.add(where, f"a route is listed twice in {list(chain)}")

    def vendor(self, name: str, vendor: _Vendor, reports: Mapping[str, dict[str, Any]]) -> VendorTable:
        where = f"vendors.{name}"
        self.chain(vendor.default, f"{where}.default")
        if vendor.default and not any(route in BUILTIN_ROUTES for route in vendor.default):
            self.problems.add(f"{where}.default", "the chain must contain native or cpu so every operator has a route")
        blocks: list[Block] = []
        seen: dict[str, int] = {}  # op -> block number, to name both blocks of a duplicate
        for number, block in enumerate(vendor.routes, start=1):
            blocks.append(self.block(block, f"{where}.routes#{number}"))
            for op in blocks[-1][0]:
                if seen.setdefault(op, number) != number:
                    self.problems.add(where, f"'{op}' is in routes#{seen[op]} and routes#{number}; keep one")
        qualified = None
        if vendor.qualified is not None and vendor.qualified not in self.spec.qualified:
            self.problems.add(f"{where}.qualified", f"no report for {vendor.qualified!r} in [qualified]; add it there")
        elif report := reports.get(vendor.qualified):
            # names come from the report's torch, not this one: never filtered, so --check is stable
            blocks += _QUALIFIED.blocks(report, bool(vendor.tuned), frozenset(seen))
            qualified = (vendor.qualified, report.get("provider_version") or "unversioned")
        if vendor.tuned is not None and vendor.qualified is None:
            self.problems.add(f"{where}.tuned", "only a table with 'qualified' can be tuned")
        return VendorTable(name, vendor.summary, vendor.default, vendor.default_reason, tuple(blocks), qualified)

    def block(self, block: _Routes, where: str) -> Block:
        self.ops(block.ops, f"{where}.ops")
        if unknown := [group for group in block.groups if group not in self.spec.groups]:
            defined = ", ".join(sorted(self.spec.groups)) or "none"
            self.problems.add(f"{where}.groups", f"unknown group {', '.join(map(repr, unknown))}; defined: {defined}")
        self.used_groups.update(block.groups)
        ops = [*block.ops, *(op for group in block.groups for op in self.spec.groups.get(group, ()))]
        if not ops:
            self.problems.add(where, "no ops; list them in 'ops' or name a [groups] entry in 'groups'")
        if twice := sorted(op for op in set(ops) if ops.count(op) > 1):
            self.problems.add(where, f"an operator is listed twice: {', '.join(twice)}")
        self.chain(block.chain, f"{where}.chain")
        return tuple(sorted(set(ops))), block.chain, block.reason


def render(source: Mapping[str, Any], *, known_ops: Collection[str] | None = None) -> dict[str, str]:
    """Conf file name -> text, for every vendor in ``source``."""
    return {f"backends_{table.vendor}.conf": render_table(table) for table in build_tables(source, known_ops)}


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
    lines += ["", *_comment(table.default_reason), f"default = {', '.join(table.default)}"]
    for ops, chain, reason in table.blocks:
        lines += ["", *_comment(reason)]
        lines += [f"{op} = {', '.join(chain)}" for op in ops]
    return "\n".join(lines) + "\n"


def _comment(text: str) -> list[str]:
    flat = " ".join(text.split())  # reflowed: a multi-line TOML string's line breaks are spaces like any other
    return textwrap.wrap(
        flat, width=92, initial_indent="# ", subsequent_indent="# ", break_long_words=False, break_on_hyphens=False
    )


def stale(out_dir: Path, rendered: Mapping[str, str]) -> list[str]:
    """Unified diffs (committed -> generated) for every conf that differs; [] when current."""
    diffs = []
    for name, text in sorted(rendered.items()):
        path = out_dir / name
        current = path.read_text(encoding="utf-8") if path.is_file() else ""
        if current != text:
            old, new = current.splitlines(keepends=True), text.splitlines(keepends=True)
            names = {"fromfile": f"{path} (committed)", "tofile": f"{path} (generated)"}
            diffs.append("".join(difflib.unified_diff(old, new, **names)))
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
    """Every aten op of the installed torch's dispatcher (``add.Tensor``), which the runtime checks confs against;
    None without torch."""
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
        if diffs := stale(args.out_dir, rendered):
            sys.stdout.write("".join(diffs))
            print(f"generate_confs: confs are stale; run: python {SCRIPT_NAME}", file=sys.stderr)
            return 1
        return 0
    for path in write(args.out_dir, rendered):
        print(f"generate_confs: wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
