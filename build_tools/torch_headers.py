"""The headers and hipify of another torch line, unpacked from its wheel (never installed, never imported): the
HIP compile check (tests/unit/test_hipify_dcu.py) compiles the DCU runtime against the DCU default image's torch
line, which is not the torch the host tests run on."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

KEEP = ("torch/include/", "torch/utils/hipify/", "torch/version.py")


def unpack(dest: Path, requirement: str, log: Callable[[str], object] = print) -> Path:
    """``dest`` holding ``torch/`` of ``requirement``'s Linux wheel; unchanged when it already holds that one."""
    stamp = dest / "requirement.txt"
    if stamp.is_file() and stamp.read_text(encoding="utf-8").strip() == requirement:
        return dest
    with tempfile.TemporaryDirectory(prefix="torch-fl-headers-") as tmp:
        # any Linux x86_64 wheel of that torch holds the same headers: the platform and Python only pick one
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet"]
        cmd += ["--platform", "manylinux_2_28_x86_64", "--python-version", "3.11", "-d", tmp, requirement]
        log(f"torch headers: {' '.join(cmd[3:])}")
        res = subprocess.run(cmd, capture_output=True, text=True, check=False)
        wheels = sorted(Path(tmp).glob("torch-*.whl"))
        if res.returncode != 0 or len(wheels) != 1:
            raise RuntimeError(f"cannot download {requirement} for its headers:\n{res.stderr.strip()}")
        staging = dest.with_name(dest.name + ".tmp")
        shutil.rmtree(staging, ignore_errors=True)
        with zipfile.ZipFile(wheels[0]) as zf:
            members = [m for m in zf.namelist() if m.startswith(KEEP)]
            zf.extractall(staging, members)
    (staging / "requirement.txt").write_text(requirement + "\n", encoding="utf-8")
    shutil.rmtree(dest, ignore_errors=True)
    staging.rename(dest)
    log(f"torch headers: {requirement} unpacked into {dest} ({len(members)} files)")
    return dest
