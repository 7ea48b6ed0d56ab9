"""Compile the torch-fl wheel inside a builder image (run by the Dockerfile's `build` stage).

usage: python build_wheel.py SRC_DIR DIST_DIR

Environment: BUILD_ENV="K=V K2=V2" (the matrix row's build_env) applies to the build; VARIANT becomes
TORCH_FL_VARIANT, the wheel's local version label; SKBUILD_CACHE, when set, is a persistent (BuildKit cache-mounted)
directory holding one scikit-build-core build directory per toolchain key, so rebuilds are incremental.
WHEEL_PY_API=cp3X (the oldest CPython the matrix row serves) becomes scikit-build-core's wheel.py-api: the wheel is
tagged cp3X-abi3, one wheel for every CPython from 3.X on, since the core library holds no CPython ABI. Unset, the
project's own setting applies; either way a wheel that is not abi3 (scikit-build-core keeps this interpreter's tag
when it is older than 3.X) is refused here.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from packaging.utils import parse_wheel_filename


def parse_build_env(value: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in value.split():
        key, sep, val = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"build_wheel: BUILD_ENV entry {item!r} is not KEY=VALUE")
        out[key] = val
    return out


def toolchain_key(env: dict[str, str]) -> str:
    """A short hash of what an object depends on besides the sources: torch's installed files (its RECORD lists
    each header's hash), the Python, the compiler and the build environment. Rows share the cache mount, and a
    torch header's mtime is when its cached layer was made: ninja alone could link another torch's objects."""
    digest = hashlib.sha256()
    try:
        digest.update((importlib.metadata.distribution("torch").read_text("RECORD") or "").encode())
    except importlib.metadata.PackageNotFoundError:
        raise SystemExit("build_wheel: torch is not installed in this builder image") from None
    cxx = env.get("CXX", "c++")
    compiler = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=False).stdout
    for part in (sys.version, compiler, *(env.get(k, "") for k in ("BUILD_ENV", "TORCH_FL_VARIANT", "WHEEL_PY_API"))):
        digest.update(b"\0" + part.encode())
    return digest.hexdigest()[:16]


MANIFEST = "torch-fl-sources.json"  # in the build directory: the sources the last build there started on


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def settle_mtimes(src: Path, build_dir: Path) -> tuple[int, int]:
    """Give each file under ``src`` its mtime of the last build in ``build_dir`` when its content is the same, else
    the current time; then record the sources this build starts on. Returns (kept, renewed). A fresh clone then
    recompiles only what changed (ninja compares mtimes, never contents).

    The manifest is written before compiling, so a build that fails or is stopped midway leaves one that matches
    the objects it may have written: a file reverted to an older content afterwards differs from the manifest and
    recompiles."""
    manifest = build_dir / MANIFEST
    try:
        last = json.loads(manifest.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        last = {}
    now = time.time_ns()
    kept = renewed = 0
    record: dict[str, list] = {}
    for path in sorted(p for p in src.rglob("*") if p.is_file() and not p.is_symlink()):
        rel, digest = path.relative_to(src).as_posix(), _sha256(path)
        entry = last.get(rel)
        if entry and entry[0] == digest:
            mtime, kept = int(entry[1]), kept + 1
        else:
            mtime, renewed = now, renewed + 1
        os.utime(path, ns=(mtime, mtime))
        record[rel] = [digest, mtime]
    build_dir.mkdir(parents=True, exist_ok=True)
    tmp = manifest.with_name(manifest.name + ".tmp")
    tmp.write_text(json.dumps(record, sort_keys=True))
    os.replace(tmp, manifest)
    return kept, renewed


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    src, dist = Path(argv[0]), Path(argv[1])
    if dist.exists():
        shutil.rmtree(dist)
    dist.mkdir(parents=True)
    extra = parse_build_env(os.environ.get("BUILD_ENV", ""))
    if os.environ.get("VARIANT"):
        extra.setdefault("TORCH_FL_VARIANT", os.environ["VARIANT"])
    env = {**os.environ, **extra}
    py_api = os.environ.get("WHEEL_PY_API", "")
    if py_api and not PY_API_RE.fullmatch(py_api):
        print(f"build_wheel: WHEEL_PY_API={py_api!r} is not a CPython tag such as cp310", file=sys.stderr)
        return 2
    if env.get("SKBUILD_CACHE"):
        env["SKBUILD_BUILD_DIR"] = str(Path(env["SKBUILD_CACHE"]) / toolchain_key(env))
        print(f"build_wheel: build directory {env['SKBUILD_BUILD_DIR']}", flush=True)
        kept, renewed = settle_mtimes(src, Path(env["SKBUILD_BUILD_DIR"]))
        print(f"build_wheel: {kept} sources as the last build here had them, {renewed} new or changed", flush=True)
    for key in sorted(extra):
        print(f"build_wheel: {key}={env[key]}", flush=True)
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-v", "-w", str(dist)]
    if py_api:
        cmd.append(f"--config-settings=wheel.py-api={py_api}")
    cmd.append(str(src))
    print("build_wheel: " + " ".join(cmd), flush=True)
    start = time.monotonic()
    rc = subprocess.call(cmd, env=env)
    if rc != 0:
        print(f"build_wheel: pip wheel failed (exit {rc})", file=sys.stderr)
        return rc
    wheels = sorted(dist.glob("*.whl"))
    if len(wheels) != 1:
        print(f"build_wheel: expected one wheel in {dist}, found {[w.name for w in wheels]}", file=sys.stderr)
        return 1
    if problem := abi3_problem(wheels[0].name, py_api):
        print(f"build_wheel: {problem}", file=sys.stderr)
        return 1
    print(f"build_wheel: built {wheels[0].name} in {time.monotonic() - start:.0f}s", flush=True)
    return 0


PY_API_RE = re.compile(r"cp3\d+")


def abi3_problem(filename: str, py_api: str) -> str | None:
    """What keeps the wheel ``filename`` from serving every CPython from ``py_api`` on (any abi3 tag when
    ``py_api`` is empty); None when it does."""
    _name, _version, _build, tags = parse_wheel_filename(filename)
    found = sorted({f"{t.interpreter}-{t.abi}" for t in tags})
    if all(t.abi == "abi3" and (not py_api or t.interpreter == py_api) for t in tags):
        return None
    want = f"{py_api}-abi3" if py_api else "cp3X-abi3"
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    return (
        f"{filename} is tagged {', '.join(found)}, not {want}: scikit-build-core keeps the building Python's own "
        f"tag where wheel.py-api names no CPython or one newer than this {here}; set WHEEL_PY_API (or "
        "[tool.scikit-build] wheel.py-api) to the row's oldest Python and build with one at least that new"
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
