"""Unit tests of variants, indexes, publishing and the install checks (no docker, no torch_fl import).

Wheels here are synthetic: a zip with a METADATA that says what a real build's would (name, version with its
pt<line><toolchain> label, Requires-Python, the torch pin), and a RECORD, so that pip can install them for real.
Stub torch wheels and indexes come from docker/scripts/install_smoke.py, the install check's own helper.
"""

from __future__ import annotations

import importlib.util
import os
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[3]


def _load_install_smoke() -> ModuleType:
    spec = importlib.util.spec_from_file_location("install_smoke", REPO / "docker" / "scripts" / "install_smoke.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


install_smoke = _load_install_smoke()


def make_wheel(directory: Path, label: str, py: str = "cp310", pin: str | None = None, abi: str = "abi3") -> Path:
    """``torch_fl-0.1.0+<label>-<py>-<abi>-manylinux_2_28_x86_64.whl`` (by default ``cp310-abi3``, a build's one
    wheel for every CPython from 3.10 on) with a METADATA pinning its torch line."""
    line = label[2:5]
    pin = pin or f"torch<{line[0]}.{int(line[1:]) + 1},>={line[0]}.{int(line[1:])}"
    name = f"torch_fl-0.1.0+{label}-{py}-{abi}-manylinux_2_28_x86_64.whl"
    directory.mkdir(parents=True, exist_ok=True)
    meta = (
        "Metadata-Version: 2.2\nName: torch-fl\n"
        f"Version: 0.1.0+{label}\nRequires-Python: >=3.10\nRequires-Dist: {pin}\n\n"
    )
    info = f"torch_fl-0.1.0+{label}.dist-info"
    tag = f"{py}-{abi}-manylinux_2_28_x86_64"
    files = {
        f"{info}/METADATA": meta.encode(),
        # WHEEL too, so that pip itself can resolve against these (tests/unit/distribution/test_line_pages_pip.py)
        f"{info}/WHEEL": f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {tag}\n".encode(),
        "torch_fl/__init__.py": b"",
    }
    # RECORD: pip refuses to install a wheel without one (tests/unit/distribution/test_keep_torch_pip.py installs)
    record = "".join(f"{n},{install_smoke._record_hash(d)},{len(d)}\n" for n, d in files.items())
    with zipfile.ZipFile(directory / name, "w") as zf:
        for n, d in files.items():
            zf.writestr(n, d)
        zf.writestr(f"{info}/RECORD", record + f"{info}/RECORD,,\n")
    return directory / name


@pytest.fixture
def wheel_factory():
    return make_wheel


@pytest.fixture
def smoke() -> ModuleType:
    """docker/scripts/install_smoke.py: its stub torch index stands for a torch index with another torch."""
    return install_smoke


@pytest.fixture
def pip_env() -> dict[str, str]:
    """The environment of a pip that sees only the sources on its command line: no pip.conf, no PIP_* of this
    machine (PIP_FIND_LINKS names a real torch here), no cache."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_CACHE_DIR="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env
