"""The summary a run ends with (stages and their durations, images, wheel, test counts): shown as a table (``rich``
when it is installed, plain text otherwise) and written as ``summary.md`` into the report directory."""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .wheelcheck import WheelInfo


@dataclass(frozen=True)
class ImageRef:
    """A docker image as a run used it: the reference and its id ("?" or "missing" where docker has none)."""

    ref: str
    id: str


@dataclass(frozen=True)
class TestCounts:
    __test__ = False  # not a pytest test class

    tests: int
    failures: int
    errors: int
    skipped: int
    seconds: float

    @property
    def passed(self) -> int:
        return self.tests - self.failures - self.errors - self.skipped

    @property
    def ok(self) -> bool:
        return self.tests > 0 and self.failures == 0 and self.errors == 0

    def line(self) -> str:
        return (
            f"{self.passed} passed, {self.failures} failed, {self.errors} errors, {self.skipped} skipped/xfailed "
            f"({self.tests} tests, {self.seconds:.1f}s)"
        )


def parse_junit(path: Path) -> TestCounts:
    """Totals of a JUnit XML file (root ``<testsuites>`` or ``<testsuite>``)."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    counts = [sum(int(s.get(key, 0)) for s in suites) for key in ("tests", "failures", "errors", "skipped")]
    return TestCounts(*counts, sum(float(s.get("time", 0) or 0) for s in suites))


@dataclass
class Stage:
    name: str
    status: str  # ran | up to date | reused | failed | skipped | planned
    seconds: float = 0.0
    note: str = ""


@dataclass
class Summary:
    name: str  # the toolchain, or the session of a run without one (base-image, clean)
    stages: list[Stage] = field(default_factory=list)
    images: dict[str, ImageRef] = field(default_factory=dict)  # by role
    wheel: WheelInfo | None = None
    wheel_path: Path | None = None
    tests: TestCounts | None = None
    bench: list[str] = field(default_factory=list)
    reports: Path | None = None
    notes: list[str] = field(default_factory=list)

    def add(self, name: str, status: str, seconds: float = 0.0, note: str = "") -> None:
        self.stages.append(Stage(name, status, seconds, note))

    @contextmanager
    def stage(self, name: str, note: str = "") -> Iterator[Stage]:
        """A stage timed over the ``with`` block: "ran" unless the block sets another status, "failed" when it
        raises (the exception goes on)."""
        stage = Stage(name, "ran", note=note)
        start = time.monotonic()
        try:
            yield stage
        except BaseException:
            stage.status = "failed"
            raise
        finally:
            stage.seconds = time.monotonic() - start
            self.stages.append(stage)

    def rows(self) -> list[tuple[str, str]]:
        out = [(f"{role} image", f"{image.ref}  {image.id[:19]}") for role, image in self.images.items()]
        if self.wheel:
            grafted = ", ".join(p.rsplit("/", 1)[-1] for p in self.wheel.grafted) or "none"
            wheel = str(self.wheel_path or self.wheel.path.name)
            out += [("wheel", wheel), ("tag", self.wheel.tag), ("sha256", self.wheel.sha256), ("grafted libs", grafted)]
        if self.tests:
            out.append(("tests", self.tests.line()))
        if self.bench:
            out.append(("benchmark", ", ".join(self.bench)))
        if self.reports:
            out.append(("reports", str(self.reports)))
        return out + [("note", n) for n in self.notes]

    def markdown(self) -> str:
        lines = [f"# torch-fl `{self.name}` run", "", "| stage | result | seconds | note |", "|---|---|---:|---|"]
        lines += [f"| {s.name} | {s.status} | {s.seconds:.1f} | {s.note} |" for s in self.stages]
        lines += ["", "| what | value |", "|---|---|", *(f"| {k} | `{v}` |" for k, v in self.rows())]
        return "\n".join(lines) + "\n"

    def text(self) -> str:
        width = max([len(s.name) for s in self.stages] + [len(k) for k, _ in self.rows()] + [5])
        lines = [f"summary ({self.name})"]
        for s in self.stages:
            note = f"  {s.note}" if s.note else ""
            lines.append(f"  {s.name:<{width}}  {s.status:<10} {s.seconds:7.1f}s{note}")
        lines += [f"  {k:<{width}}  {v}" for k, v in self.rows()]
        return "\n".join(lines)

    def show(self) -> None:
        if not self.stages and not self.rows():
            return
        try:
            from rich.console import Console
            from rich.table import Table
        except ImportError:
            print(self.text(), flush=True)
            return
        table = Table(title=f"torch-fl {self.name}: summary")
        table.add_column("stage / item")
        table.add_column("result")
        table.add_column("seconds", justify="right")
        table.add_column("detail", overflow="fold")
        for s in self.stages:
            style = {"failed": "red", "ran": "green"}.get(s.status, "cyan")
            table.add_row(s.name, f"[{style}]{s.status}[/]", f"{s.seconds:.1f}", s.note)
        for k, v in self.rows():
            table.add_row(k, "", "", v)
        Console(width=160).print(table)
