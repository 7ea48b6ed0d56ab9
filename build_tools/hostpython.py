"""The host's own CPythons, for the Pythons the matrix takes from the host (``[pythons."X.Y"] source = "host"``).

No Debian release ships 3.10 or 3.12, so the test and node images that run them run a copy of the host's
installation: its prefix minus the test suite and whatever was installed into it (the images make a venv of their
own). No builder needs one: the wheel holds no CPython ABI. Found as ``pythonX.Y`` on PATH when that runs, else
under pyenv's ``versions/X.Y.*`` (pyenv's shims answer only for the versions that ``pyenv global`` names).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

# Parts of an installation that no image needs: CPython's own tests, bytecode caches and the packages installed into
# it (a pyenv installation may carry site-wide hooks of the machine it was built on).
_SKIPPED = ("test", "site-packages", "__pycache__", "idle_test")


class HostPythonError(RuntimeError):
    """A Python the matrix takes from the host, which the host does not have."""


def _prefix_of(executable: str) -> Path | None:
    ask = "import sys; print(sys.base_prefix)"
    try:
        res = subprocess.run([executable, "-c", ask], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return Path(res.stdout.strip()) if res.returncode == 0 and res.stdout.strip() else None


def _pyenv_versions(version: str) -> list[Path]:
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    found = [p for p in root.glob(f"{version}.*") if (p / "bin" / f"python{version}").is_file()]
    return sorted(found, key=lambda p: tuple(int(x) if x.isdigit() else 0 for x in p.name.split(".")), reverse=True)


def find(version: str) -> Path:
    """The installation prefix of the host's CPython ``version`` ("3.12"), or a ``HostPythonError`` that says how to
    get one."""
    candidates = [f"python{version}", *(str(p / "bin" / f"python{version}") for p in _pyenv_versions(version))]
    for exe in candidates:
        prefix = _prefix_of(exe)
        if prefix and (prefix / "lib" / f"python{version}" / "os.py").is_file():  # its standard library
            return prefix
    raise HostPythonError(
        f'configs/toolchains.toml takes CPython {version} from the host ([pythons."{version}"] source = "host"), '
        f"but no python{version} with its standard library was found on PATH or under pyenv's "
        f"versions/{version}.*: install it (e.g. `pyenv install {version}`), or leave {version} out of the rows you "
        "build"
    )


def files(prefix: Path) -> Iterator[tuple[Path, Path]]:
    """(file, path relative to the prefix) of what the images need of an installation; links as their targets."""
    for dirpath, dirnames, filenames in os.walk(prefix):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIPPED)
        here = Path(dirpath)
        for name in sorted(filenames):
            path = here / name
            if name.endswith((".pyc", ".pyo")) or not path.is_file():  # a dangling link is no file either
                continue
            # a link (bin/python3 -> python3.10) is staged as the file it names: the context holds plain files
            yield (path.resolve() if path.is_symlink() else path), path.relative_to(prefix)
