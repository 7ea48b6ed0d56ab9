"""``nox -s wheels``: the operator's release command. Builds every wheel of the matrix into wheels/ and indexes them.

The matrix is the rows of configs/toolchains.toml: one build and one wheel per row, tagged ``cp3X-abi3`` for the
oldest CPython of its ``pythons`` (the core library holds no CPython ABI), which pip takes on each of them. A row
whose last build is current is skipped (the build flow's own up-to-date check), so a stopped run resumes where it
stopped. A row that cannot be built on this host (its base image cannot be had, e.g. the DTK image) is reported and
left out; the others still build. ``--list`` prints the matrix without building anything; row names build those
rows only (`nox -s wheels -- cpu cpu29`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from . import dockercli, flow, pipeline
from .matrix import Matrix, Toolchain
from .product import variants
from .summary import Summary


@dataclass(frozen=True)
class Entry:
    """One wheel of the matrix: one row's."""

    toolchain: Toolchain
    line: str  # "2.15"

    @property
    def wheel_tag(self) -> str:
        return self.toolchain.wheel_tag  # "cp311-abi3"

    def describe(self) -> str:
        return f"{self.toolchain.wheel_dir} torch-{self.line} {self.wheel_tag}"


def torch_line(toolchain: Toolchain) -> str:
    """The torch line a row builds for: from its requirement, or, for an image that brings torch, its ``torch.line``
    key; "?" where neither says."""
    if toolchain.torch.from_image:
        return toolchain.torch.line or "?"
    spec = toolchain.torch.requirement.split("==", 1)
    if len(spec) != 2:
        return toolchain.torch.line or "?"
    major, minor = variants.torch_line(spec[1])
    return f"{major}.{minor}"


def entries(matrix: Matrix) -> list[Entry]:
    """Every wheel of the matrix, one per row, by variant and torch line."""
    out = [Entry(row, torch_line(row)) for row in matrix.toolchains.values()]
    return sorted(out, key=lambda e: (e.toolchain.wheel_dir, _line_key(e.line)))


def _line_key(line: str) -> tuple[int, ...]:
    return tuple(int(x) for x in line.split(".")) if line != "?" else (0,)


def listing(matrix: Matrix) -> str:
    """``--list``: one line per wheel."""
    return "\n".join(e.describe() for e in entries(matrix))


def build_all(f: flow.Flow, summary: Summary, posargs: Sequence[str]) -> list[str]:
    """Build every row's wheel; the rows that did not build (the summary says why). `nox -s wheels`
    then indexes wheels/ in its venv, which has the index renderer (this process need not)."""
    if list(posargs) == ["--list"]:
        f.echo(f"the wheel matrix of {f.matrix.path}, {len(entries(f.matrix))} wheels:")
        print(listing(f.matrix))
        return []
    if unknown := [a for a in posargs if a not in f.matrix.toolchains]:
        rows = ", ".join(f.matrix.toolchains)
        raise flow.UserError(f"nox -s wheels takes --list or row names ({rows}), not {' '.join(unknown)}")
    failed = []
    for row in f.matrix.toolchains.values():
        if posargs and row.name not in posargs:
            continue
        t0 = time.monotonic()
        pythons = _span(row.served_pythons)
        try:
            f.toolchain(row.name)
            image = row.builder_image
            if row.image_hint and not f.runner.ask(lambda image=image: dockercli.image_id(f.images.client(), image)):
                summary.add(f"wheels {row.name}", "skipped", 0.0, f"{row.builder_image} is not on this host")
                continue
            built = pipeline.build(f, row.name, Summary(row.name))
        except flow.ERRORS as exc:
            summary.add(f"wheels {row.name}", "failed", time.monotonic() - t0, str(exc).splitlines()[0][:120])
            failed.append(row.name)
            continue
        note = f"torch {torch_line(row)}, {row.wheel_tag} for CPython {pythons}"
        summary.add(f"wheels {row.name}", "ran", time.monotonic() - t0, note)
        f.echo(f"{row.name}: wheels/{row.wheel_dir}/{built.wheel.name}")
    return failed


def _span(versions: Sequence[str]) -> str:
    """("3.10", "3.11", "3.12") -> "3.10–3.12"; a gap keeps the list."""
    minors = [int(v.split(".")[1]) for v in versions]
    if len(versions) > 2 and minors == list(range(minors[0], minors[-1] + 1)):
        return f"{versions[0]}–{versions[-1]}"
    return ", ".join(versions)


def wheel_table(matrix: Matrix) -> str:
    """README.md's table of the release's wheels: one row per (index directory, wheel tag), its torch lines and the
    CPythons each line's one wheel serves."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for row in matrix.toolchains.values():
        group = (variants.index_dir(row.wheel_dir), row.wheel_tag, _span(row.served_pythons))
        groups.setdefault(group, []).append(torch_line(row))
    lines = ["| index directory | torch lines | wheel (one per line) | CPython |", "|---|---|---|---|"]
    for (directory, tag, span), torch_lines in sorted(groups.items()):
        ordered = ", ".join(sorted(set(torch_lines), key=_line_key))
        lines.append(f"| `{directory}/` | {ordered} | `{tag}` | {span} |")
    return "\n".join(lines)
