"""Wheel variants: which torch line and which vendor toolchain a torch-fl build is for.

A build's local version is ``pt<major><minor:02>`` + the toolchain: ``0.1.0+pt213cpu``, ``0.1.0+pt211cu130``,
``0.1.0+pt210dtk2604``. The torch line is in it because the extension only loads into the torch minor line it was
compiled against (the wheel also requires that line); the minor is zero-padded so that labels of one toolchain
sort like their torch lines (``pt209`` < ``pt210``). The toolchain is in it because one index per toolchain is what
keeps pip from mixing them (``pt211cu130`` sorts above ``pt211cpu``).

Pure functions, no torch import: the build's metadata provider (torch_fl/_wheel_metadata.py) loads this file by
path, and ``python -m torch_fl info`` uses it to say whether the installed variant fits the node.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TOOLCHAIN = r"cpu|cu\d+|rocm\d+|dtk\d+"
_LABEL_RE = re.compile(rf"^pt(?P<major>\d)(?P<minor>\d\d)(?P<toolchain>{_TOOLCHAIN})$")
_TOOLCHAIN_RE = re.compile(rf"^(?:{_TOOLCHAIN})$")
_VERSION_RE = re.compile(r"^(?P<major>\d+)\.(?P<minor>\d+)")


class VariantError(ValueError):
    """A label or version that does not name a variant."""


def torch_line(torch_version: str) -> tuple[int, int]:
    """``"2.11.0+cu130"`` -> ``(2, 11)``."""
    m = _VERSION_RE.match(torch_version)
    if not m:
        raise VariantError(f"torch version {torch_version!r} does not start with MAJOR.MINOR")
    return int(m.group("major")), int(m.group("minor"))


def toolchain_from_torch(torch_version: str, cuda: str | None = None, hip: str | None = None) -> str:
    """The toolchain a torch build stands for: its local tag (``+cu130``, ``+cpu``, a DTK tag), else what the build
    itself reports (PyPI's default Linux torch has no local tag and is a CUDA build)."""
    local = torch_version.split("+", 1)[1] if "+" in torch_version else ""
    if dtk := re.search(r"dtk(\d+)", local):
        return f"dtk{dtk.group(1)}"
    tag = local.replace(".", "")
    if _TOOLCHAIN_RE.match(tag):
        return tag
    if hip:
        return "rocm" + "".join(hip.split(".")[:2])
    if cuda:
        return "cu" + "".join(cuda.split(".")[:2])
    return "cpu"


@dataclass(frozen=True, order=True)
class Variant:
    line: tuple[int, int]
    toolchain: str

    @property
    def label(self) -> str:
        major, minor = self.line
        if not (0 <= major <= 9 and 0 <= minor <= 99):
            raise VariantError(f"torch line {major}.{minor} does not fit pt<major><minor:02>")
        return f"pt{major}{minor:02d}{self.toolchain}"

    @property
    def torch_requirement(self) -> str:
        major, minor = self.line
        return f"torch>={major}.{minor},<{major}.{minor + 1}"

    def describe(self) -> str:
        return f"{self.label} (torch {self.line[0]}.{self.line[1]}, {self.toolchain})"


def make(torch_version: str, toolchain: str) -> Variant:
    if not _TOOLCHAIN_RE.match(toolchain):
        raise VariantError(
            f"toolchain {toolchain!r} is not one of cpu, cuNNN, rocmNN, dtkNNNN (set TORCH_FL_VARIANT to one)"
        )
    return Variant(torch_line(torch_version), toolchain)


def parse(label: str) -> Variant:
    """``"pt211cu130"`` -> Variant((2, 11), "cu130"); a label without a torch line (older builds) is an error."""
    m = _LABEL_RE.match(label)
    if not m:
        raise VariantError(f"local version {label!r} is not pt<major><minor:02><toolchain> (e.g. pt213cpu)")
    return Variant((int(m.group("major")), int(m.group("minor"))), m.group("toolchain"))


def from_version(version: str) -> Variant:
    """The variant of a torch-fl version string ``0.1.0+pt211cu130``."""
    if "+" not in version:
        raise VariantError(f"torch-fl {version} has no local version: it is not a variant build")
    return parse(version.split("+", 1)[1])


@dataclass(frozen=True)
class Node:
    """What a node offers: its torch, the toolchain that torch was built for, and the accelerators it sees."""

    torch_version: str
    toolchain: str
    devices: int  # accelerators of the toolchain that torch sees (0 on a CPU node)

    @property
    def wanted(self) -> Variant:
        return Variant(torch_line(self.torch_version), self.toolchain)


def fit(installed: Variant, node: Node, built_runtimes: tuple[str, ...] = ()) -> list[str]:
    """Why ``installed`` does not fit ``node`` (empty list: it fits)."""
    out = []
    if installed.line != node.wanted.line:
        out.append(
            f"torch line: the wheel is for torch {installed.line[0]}.{installed.line[1]}, "
            f"the node has torch {node.torch_version}"
        )
    if installed.toolchain != node.toolchain:
        out.append(
            f"vendor runtime: the wheel is built for {installed.toolchain}, the node's torch is {node.toolchain}"
        )
    if node.toolchain != "cpu" and node.devices == 0:
        out.append(f"accelerator: torch is a {node.toolchain} build but sees no device (driver, visibility?)")
    runtime = _runtime_of(installed.toolchain)
    if built_runtimes and runtime not in built_runtimes:
        out.append(f"vendor runtime: the extension has {', '.join(built_runtimes)}, not {runtime}")
    return out


def _runtime_of(toolchain: str) -> str:
    if toolchain.startswith("cu"):
        return "cuda"
    if toolchain.startswith(("dtk", "rocm")):
        return "dcu"
    return "cpu"


# ---------------------------------------------------------------------------------------------- index pages
# The index has one page per (toolchain directory, torch line): a node's pip sees only the wheels of its own torch
# line, so no "higher" build of another line can ask pip to replace the node's torch.
def index_dir(toolchain: str) -> str:
    """The index directory of a toolchain: DTK releases share ``dcu/`` (the wheel's label still names its DTK)."""
    return "dcu" if toolchain.startswith("dtk") else toolchain


def line_page(line: tuple[int, int]) -> str:
    """The page directory of a torch line inside a toolchain's index: ``(2, 13)`` -> ``torch-2.13``."""
    return f"torch-{line[0]}.{line[1]}"


def page_path(directory: str, line: tuple[int, int]) -> str:
    """``("cpu", (2, 13))`` -> ``cpu/torch-2.13``: the index below the base URL that serves that torch line."""
    return f"{directory}/{line_page(line)}"


def install_line(base: str, toolchain: str, torch_version: str) -> str:
    """The pip line of a node whose installed torch is ``torch_version`` (a ``toolchain`` build): that very torch
    pinned and the torch-fl page of its line as an extra index (``keep_torch_line``)."""
    return keep_torch_line(base, page_path(index_dir(toolchain), torch_line(torch_version)), torch_version)


def keep_torch_line(base: str, page: str, torch: str) -> str:
    """The one form of the pip line that installs torch-fl beside a node's torch and never changes that torch.

    ``torch`` is the installed torch's version as pip knows it, local label included (``2.15.0+cpu``): the
    installed build satisfies the pin, so pip keeps it and fetches no torch, and a page of another line can only
    make pip refuse. The local label stays in: ``==2.15.0+cpu`` matches that build only, where ``==2.15.0`` would
    also match ``2.15.0+cu130``. The README writes this line with shell variables for ``torch`` and the line in
    ``page`` (tests/unit/distribution/test_keep_torch_pip.py holds the two to this function).
    """
    return f'pip install "torch=={torch}" torch-fl --extra-index-url "{base.rstrip("/")}/{page}/simple/"'


def pip_line(base: str, directory: str, line: tuple[int, int]) -> str:
    """The pip line for torch ``line`` from the index directory ``directory`` under ``base`` (a URL): a new
    environment's, as it pins only the line and so lets pip choose the torch of that line."""
    page = page_path(directory, line)
    return f'pip install "torch=={line[0]}.{line[1]}.*" torch-fl --extra-index-url "{base.rstrip("/")}/{page}/simple/"'
