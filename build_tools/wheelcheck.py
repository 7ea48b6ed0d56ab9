"""Read a (repaired) wheel: its tags, version label, shared libraries and grafted libraries.

auditwheel grafts the shared libraries it vendors into ``<package>.libs/``; torch's own libraries must never be
there (the user's torch provides them, and two copies of libc10 in one process is a crash waiting to happen).
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

# sonames that belong to torch: never grafted, whatever the matrix says.
TORCH_LIBS = ("libc10*.so*", "libtorch*.so*", "libshm*.so*", "libcaffe2*.so*", "libgomp*.so*")
# the one compiled part of the package, which torch loads (torch.ops.load_library): it holds no CPython ABI
CORE_LIBRARY = "torch_fl/libtorch_fl_core.so"
# the local version label: pt<torch line><toolchain> (torch_fl/_variant.py)
LABEL_RE = re.compile(r"^pt\d{3}(?P<toolchain>[a-z0-9]+)$")


class WheelError(ValueError):
    pass


@dataclass(frozen=True)
class WheelInfo:
    path: Path
    version: str
    python_tags: tuple[str, ...]
    abi_tags: tuple[str, ...]
    platform_tags: tuple[str, ...]
    sha256: str
    extension_modules: tuple[str, ...]
    grafted: tuple[str, ...]

    @property
    def local_label(self) -> str:
        return self.version.split("+", 1)[1] if "+" in self.version else ""

    @property
    def tag(self) -> str:
        return ".".join(self.platform_tags)

    @property
    def interpreter_tag(self) -> str:
        """``cp310-abi3``: the Python and ABI tags (dotted where the wheel carries several)."""
        return f"{'.'.join(self.python_tags)}-{'.'.join(self.abi_tags)}"

    @property
    def cpython_modules(self) -> tuple[str, ...]:
        """The extension modules built for one CPython's ABI (``_C.cpython-311-x86_64-linux-gnu.so``)."""
        return tuple(m for m in self.extension_modules if ".cpython-" in m.rsplit("/", 1)[-1])


def local_label(filename: str) -> str:
    """The local version label of a wheel file name (``pt213cpu``), "" without one."""
    try:
        _name, version, _build, _tags = parse_wheel_filename(filename)
    except InvalidWheelFilename as exc:
        raise WheelError(f"{filename}: not a wheel file name ({exc})") from None
    return version.local or ""


def interpreter_tag(filename: str) -> str:
    """The Python and ABI tags of a wheel file name (``cp310-abi3``; dotted where it carries several)."""
    try:
        _name, _version, _build, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename as exc:
        raise WheelError(f"{filename}: not a wheel file name ({exc})") from None
    return f"{'.'.join(_unique(t.interpreter for t in tags))}-{'.'.join(_unique(t.abi for t in tags))}"


def is_abi3(filename: str) -> bool:
    """Is the wheel ``filename`` one for every CPython from its tag's on (``cp310-abi3``)?"""
    return re.fullmatch(r"cp3\d+-abi3", interpreter_tag(filename)) is not None


def label_matches(label: str, variant: str) -> bool:
    """Does ``label`` carry ``variant`` (a family such as ``dtk*`` matches dtk2504, dtk2604, ...)?"""
    m = LABEL_RE.match(label)
    return bool(m) and fnmatch.fnmatchcase(m.group("toolchain"), variant)


def strip_hash(soname: str) -> str:
    """auditwheel renames grafted libraries ``libfoo-1a2b3c4d.so.1``; return ``libfoo.so.1``."""
    return re.sub(r"-[0-9a-f]{8}(?=\.so)", "", soname)


def matching(grafted: Sequence[str], patterns: Sequence[str]) -> list[str]:
    """The ``grafted`` members whose soname, without auditwheel's hash, matches one of ``patterns``."""
    return [m for m in grafted if any(fnmatch.fnmatch(strip_hash(m.rsplit("/", 1)[-1]), p) for p in patterns)]


def _unique(values) -> tuple[str, ...]:
    return tuple(sorted(set(values)))


def inspect(path: Path) -> WheelInfo:
    try:
        _name, version, _build, tags = parse_wheel_filename(path.name)
    except InvalidWheelFilename as exc:
        raise WheelError(f"{path}: not a wheel file name ({exc})") from None
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        bad = zf.testzip()
    if bad is not None:
        raise WheelError(f"{path}: corrupt member {bad}")
    return WheelInfo(
        path=path,
        version=str(version),
        python_tags=_unique(t.interpreter for t in tags),
        abi_tags=_unique(t.abi for t in tags),
        platform_tags=_unique(t.platform for t in tags),
        sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
        extension_modules=tuple(
            sorted(n for n in names if re.search(r"\.(cpython-[^/]*\.)?so$", n) and ".libs/" not in n)
        ),
        grafted=tuple(sorted(n for n in names if re.search(r"\.libs/[^/]+\.so(\.|$)", n))),
    )


def problems(info: WheelInfo, *, variant: str, wheel_tag: str, excludes: Sequence[str]) -> list[str]:
    """What is wrong with a repaired wheel for a matrix row whose wheel is tagged ``wheel_tag`` (``cp310-abi3``: one
    wheel for every CPython of the row); empty when it is fine."""
    out = []
    if not label_matches(info.local_label, variant):
        out.append(f"version {info.version} does not carry the variant label +pt<torch line>{variant}")
    if info.interpreter_tag != wheel_tag:
        out.append(f"tagged {info.interpreter_tag}, not {wheel_tag} (scikit-build-core's wheel.py-api sets it)")
    if not any(t.startswith("manylinux") for t in info.platform_tags):
        out.append(f"platform tag {info.tag} is not a manylinux tag (was the wheel repaired?)")
    if CORE_LIBRARY not in info.extension_modules:
        out.append(f"no {CORE_LIBRARY} inside")
    if bound := info.cpython_modules:
        out.append(f"{', '.join(bound)} is built for one CPython's ABI: a wheel for every Python holds none")
    if torch_libs := matching(info.grafted, TORCH_LIBS):
        out.append("torch libraries were grafted: " + ", ".join(torch_libs))
    if excluded := [g for g in matching(info.grafted, excludes) if g not in torch_libs]:
        out.append("excluded libraries were grafted: " + ", ".join(excluded))
    return out
