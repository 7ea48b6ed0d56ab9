"""Unit tests of variants, indexes, publishing and the install checks (no docker, no torch_fl import).

Wheels here are synthetic: a zip with a METADATA that says what a real build's would (name, version with its
pt<line><toolchain> label, Requires-Python, the torch pin).
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def make_wheel(directory: Path, label: str, py: str = "cp311", pin: str | None = None) -> Path:
    """``torch_fl-0.1.0+<label>-<py>-<py>-manylinux_2_28_x86_64.whl`` with a METADATA pinning its torch line."""
    line = label[2:5]
    pin = pin or f"torch<{line[0]}.{int(line[1:]) + 1},>={line[0]}.{int(line[1:])}"
    name = f"torch_fl-0.1.0+{label}-{py}-{py}-manylinux_2_28_x86_64.whl"
    directory.mkdir(parents=True, exist_ok=True)
    meta = (
        "Metadata-Version: 2.2\nName: torch-fl\n"
        f"Version: 0.1.0+{label}\nRequires-Python: >=3.10\nRequires-Dist: {pin}\n\n"
    )
    with zipfile.ZipFile(directory / name, "w") as zf:
        zf.writestr(f"torch_fl-0.1.0+{label}.dist-info/METADATA", meta)
        # WHEEL too, so that pip itself can resolve against these (tests/unit/distribution/test_line_pages_pip.py)
        tag = f"{py}-{py}-manylinux_2_28_x86_64"
        zf.writestr(
            f"torch_fl-0.1.0+{label}.dist-info/WHEEL", f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {tag}\n"
        )
        zf.writestr("torch_fl/__init__.py", "")
    return directory / name


@pytest.fixture
def wheel_factory():
    return make_wheel
