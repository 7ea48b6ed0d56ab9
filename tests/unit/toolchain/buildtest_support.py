"""Shared helpers of the build-tooling unit tests (a uniquely named module: test dirs are not packages)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[3]


def load_script(name: str) -> ModuleType:
    """A docker/scripts/<name>.py module, loaded by path (it runs inside images, not as a package)."""
    key = f"torch_fl_docker_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, REPO / "docker" / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    spec.loader.exec_module(module)
    return module


def nox_sessions() -> dict[str, str]:
    """``nox -l`` of the repository's noxfile: session name -> its listed line."""
    import subprocess

    import nox  # noqa: F401  (the nox tests session installs it; a missing nox must fail, not skip)

    res = subprocess.run(
        [sys.executable, "-m", "nox", "-l", "-f", str(REPO / "noxfile.py")],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
    )
    assert res.returncode == 0, res.stderr
    return {line.split()[1]: line for line in res.stdout.splitlines() if line[:2] in ("- ", "* ")}
