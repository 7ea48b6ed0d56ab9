"""Read a (repaired) wheel: its tags, version label, extension modules and grafted libraries.

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

# sonames that belong to torch: never grafted, whatever the matrix says.
TORCH_LIBS = ("libc10*.so*", "libtorch*.so*", "libshm*.so*", "libcaffe2*.so*", "libgomp*.so*")
_WHEEL_RE = re.compile(
    r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-(?P<build>\d[^-]*))?-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl$"
)


class WheelError(ValueError):
    pass


@dataclass(frozen=True)
class WheelInfo:
    path: Path
    name: str
    version: str
    python_tags: tuple[str, ...]
    abi_tags: tuple[str, ...]
    platform_tags: tuple[str, ...]
    sha256: str
    size: int
    extension_modules: tuple[str, ...]
    grafted: tuple[str, ...]

    @property
    def local_label(self) -> str:
        return self.version.split("+", 1)[1] if "+" in self.version else ""

    @property
    def tag(self) -> str:
        return ".".join(self.platform_tags)


def parse_filename(filename: str) -> dict[str, str]:
    m = _WHEEL_RE.match(filename)
    if not m:
        raise WheelError(f"{filename}: not a wheel file name")
    return m.groupdict()


def _soname_base(member: str) -> str:
    return member.rsplit("/", 1)[-1]


def grafted_libraries(names: Sequence[str]) -> list[str]:
    """Shared libraries inside ``*.libs/`` directories (where auditwheel puts what it grafts)."""
    return sorted(n for n in names if re.search(r"\.libs/[^/]+\.so(\.|$)", n))


def strip_hash(soname: str) -> str:
    """auditwheel renames grafted libraries ``libfoo-1a2b3c4d.so.1``; return ``libfoo.so.1``."""
    return re.sub(r"-[0-9a-f]{8}(?=\.so)", "", soname)


def matching(grafted: Sequence[str], patterns: Sequence[str]) -> list[str]:
    out = []
    for member in grafted:
        base = strip_hash(_soname_base(member))
        if any(fnmatch.fnmatch(base, p) for p in patterns):
            out.append(member)
    return out


def inspect(path: Path) -> WheelInfo:
    parts = parse_filename(path.name)
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        bad = zf.testzip()
    if bad is not None:
        raise WheelError(f"{path}: corrupt member {bad}")
    h = hashlib.sha256(path.read_bytes()).hexdigest()
    return WheelInfo(
        path=path,
        name=parts["name"],
        version=parts["version"],
        python_tags=tuple(parts["py"].split(".")),
        abi_tags=tuple(parts["abi"].split(".")),
        platform_tags=tuple(parts["plat"].split(".")),
        sha256=h,
        size=path.stat().st_size,
        extension_modules=tuple(
            sorted(n for n in names if re.search(r"\.(cpython-[^/]*\.)?so$", n) and ".libs/" not in n)
        ),
        grafted=tuple(grafted_libraries(names)),
    )


def problems(info: WheelInfo, *, variant: str, python_tag: str, excludes: Sequence[str]) -> list[str]:
    """What is wrong with a repaired wheel for a matrix row; empty when it is fine."""
    out = []
    # the label is pt<torch line><toolchain> (torch_fl/_variant.py); a family such as "dtk*" (read from the image
    # by the builder) matches dtk2504, dtk2604, ...
    m = re.fullmatch(r"pt\d{3}(?P<toolchain>[a-z0-9]+)", info.local_label or "")
    if not m or not fnmatch.fnmatchcase(m.group("toolchain"), variant):
        out.append(f"version {info.version} does not carry the variant label +pt<torch line>{variant}")
    if python_tag not in info.python_tags:
        out.append(f"python tag {'.'.join(info.python_tags)} is not {python_tag}")
    if not any(t.startswith("manylinux_") or t.startswith("manylinux") for t in info.platform_tags):
        out.append(f"platform tag {info.tag} is not a manylinux tag (was the wheel repaired?)")
    if not info.extension_modules:
        out.append("no extension module inside")
    torch_libs = matching(info.grafted, TORCH_LIBS)
    if torch_libs:
        out.append("torch libraries were grafted: " + ", ".join(torch_libs))
    excluded = [g for g in matching(info.grafted, excludes) if g not in torch_libs]
    if excluded:
        out.append("excluded libraries were grafted: " + ", ".join(excluded))
    return out
