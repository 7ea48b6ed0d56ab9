"""Stage the docker build context and hash what goes into it.

The context of toolchain ``t`` is ``build/docker/<t>/context/`` (git-ignored), holding exactly what the Dockerfile
may see, so ``docker build`` never uploads the repository's build outputs and the cache keys are easy to state; its
layout is drawn in docker/README.md ("What happens"). Sources are taken as a fresh clone would have them, so a
developer's in-tree build products never reach an image. Staging is a sync: unchanged files are left alone
(BuildKit then transfers nothing), stale files are removed.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from . import hostpython, outputs
from .matrix import BuildSpec, Toolchain

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: nox depends on tomli there
    import tomli as tomllib

SKIP_DIRS = {"__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache", ".git", ".nox"}
SKIP_SUFFIXES = (".pyc", ".pyo", ".so", ".o", ".whl")
DIST_SUFFIXES = (".whl", ".tar.gz", ".zip", ".tar.bz2")
# pytest ini options that describe the source tree, not the suites: dropped from the copied configuration.
_SOURCE_TREE_INI_KEYS = {"testpaths", "pythonpath", "rootdir", "cache_dir"}


def _skip(path: Path) -> bool:
    name = path.name
    return name in SKIP_DIRS or name.endswith((*SKIP_SUFFIXES, ".egg-info")) or name.startswith(".nfs")


def source_files(repo: Path, entry: str) -> list[Path]:
    """Files of ``repo/entry`` as a fresh clone would have them: tracked or untracked-but-not-ignored (git), minus
    caches and build outputs. Outside a git checkout, every file under ``entry``."""
    if (repo / ".git").exists():
        ls = ["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", entry]
        res = subprocess.run(ls, capture_output=True, check=False)
        if res.returncode == 0:
            found = sorted({repo / p for p in res.stdout.decode("utf-8", "surrogateescape").split("\0") if p})
            return [f for f in found if f.is_file() and not any(_skip(Path(p)) for p in f.relative_to(repo).parts)]
    return list(walk_files(repo / entry))


def walk_files(root: Path, *, outputs: bool = False) -> Iterator[Path]:
    """Files under ``root`` (or ``root`` itself), sorted, skipping caches and, unless ``outputs``, build outputs.
    A staged folder (dist/, wheelhouse/) is walked with ``outputs``: its wheels are its inputs."""
    if root.is_file():
        yield root
        return
    skip = (lambda p: p.name in SKIP_DIRS or p.suffix in (".pyc", ".pyo")) if outputs else _skip
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not skip(Path(d)))
        for name in sorted(filenames):
            if not skip(Path(name)):
                yield Path(dirpath) / name


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def tree_digest(root: Path, *, content: bool = True) -> str:
    """Hash of the relative paths and contents (or sizes, for large staged wheelhouses) under ``root``."""
    h = hashlib.sha256()
    if not root.exists():
        return h.hexdigest()
    for f in walk_files(root, outputs=True):
        rel = f.relative_to(root).as_posix() if f != root else f.name
        h.update(rel.encode() + b"\0")
        if content:
            h.update(file_sha256(f).encode())
        else:
            st = f.stat()
            h.update(f"{st.st_size}:{int(st.st_mtime)}".encode())
        h.update(b"\n")
    return h.hexdigest()


def combine(*parts: str) -> str:
    return hashlib.sha256(b"".join(p.encode() + b"\n" for p in parts)).hexdigest()


def _same(src: Path, dst: Path) -> bool:
    try:
        a, b = src.stat(), dst.stat()
    except FileNotFoundError:
        return False
    return a.st_size == b.st_size and a.st_mtime_ns == b.st_mtime_ns


def sync(pairs: Iterable[tuple[Path, Path]], dest_root: Path, *, link: bool = False) -> None:
    """Make ``dest_root`` hold exactly the ``(src_file, dst_file)`` pairs (copies keep their metadata, so an
    unchanged file is left alone)."""
    wanted: set[Path] = set()
    for src, dst in pairs:
        if not _same(src, dst):
            outputs.atomic_copy(src, dst, link=link, keep_metadata=True)
        wanted.add(dst)
    if dest_root.exists():
        for f in sorted(dest_root.rglob("*"), reverse=True):
            if f.is_file() or f.is_symlink():
                if f not in wanted:
                    f.unlink()
            elif f.is_dir() and not any(f.iterdir()):
                f.rmdir()
    dest_root.mkdir(parents=True, exist_ok=True)


@dataclass(frozen=True)
class Staged:
    root: Path
    src_digest: str
    scripts_digest: str
    wheelhouse_digest: str
    dockerfile_digest: str
    pythons_digest: str = ""
    sources: str = ""  # sources_digest: what the wheel is compiled from, as the checkout holds it
    wheels: tuple[str, ...] = ()  # the file names under wheelhouse/, sorted (where torch may come from)


def context_dir(repo: Path, name: str) -> Path:
    return repo / "build" / "docker" / name / "context"


def input_files(repo: Path, spec: BuildSpec) -> list[tuple[Path, Path]]:
    """(absolute source, path relative to src/) for every build input; a missing required input is an error."""
    out: list[tuple[Path, Path]] = []
    for entry, required in [*((e, True) for e in spec.inputs), *((e, False) for e in spec.optional_inputs)]:
        path = repo / entry
        if not path.exists():
            if required:
                raise FileNotFoundError(
                    f"build input {entry!r} (configs/toolchains.toml [build].inputs) does not exist in {repo}"
                )
            continue
        out += [(f, f.relative_to(repo)) for f in source_files(repo, entry)]
    return out


def sources_digest(repo: Path, toolchain: Toolchain, spec: BuildSpec) -> str:
    """Hash of what a wheel of ``toolchain`` is compiled from (the row and the build inputs), read in place: the
    host session compares it with the one build-<toolchain> recorded."""
    h = hashlib.sha256(toolchain.fingerprint().encode() + b"\n")
    for f, rel in sorted(input_files(repo, spec), key=lambda pair: pair[1].as_posix()):
        h.update(rel.as_posix().encode() + b"\0" + file_sha256(f).encode() + b"\n")
    return h.hexdigest()


SHARED_LOCK = "shared-lock.txt"


def stage_build(
    repo: Path,
    toolchain: Toolchain,
    spec: BuildSpec,
    wheelhouses: Iterable[Path],
    shared_lock: str = "",
    host_pythons: Mapping[str, Path] | None = None,
) -> Staged:
    """Stage src/, scripts/, vendor/, wheelhouse/, ``shared_lock`` (locks.shared_install) and pythons/X.Y/ (the host
    installations ``host_pythons`` names, hard-linked where the disk allows) for ``toolchain``."""
    root = context_dir(repo, toolchain.name)
    # What each staged directory must hold is read first, then written.
    scripts = repo / "docker" / "scripts"
    dockerfile = repo / toolchain.dockerfile
    vendor_dir = repo / toolchain.vendor_dir
    vendor_files = [f for f in walk_files(vendor_dir) if f != dockerfile] if vendor_dir.is_dir() else []
    wheelhouse = []  # wheelhouse N of PIP_FIND_LINKS -> wheelhouse/N/, its files hard-linked where the disk allows
    for i, d in enumerate(wheelhouses):
        wheelhouse += [
            (f, root / "wheelhouse" / str(i) / f.name)
            for f in sorted(d.iterdir())
            if f.is_file() and f.name.endswith(DIST_SUFFIXES)
        ]
    pythons = [
        (f, root / "pythons" / version / rel)
        for version, prefix in sorted((host_pythons or {}).items())
        for f, rel in hostpython.files(prefix)
    ]
    trees = [
        ([(f, root / "src" / rel) for f, rel in input_files(repo, spec)], "src", False),
        ([(f, root / "scripts" / f.relative_to(scripts)) for f in walk_files(scripts)], "scripts", False),
        ([(f, root / "vendor" / f.relative_to(vendor_dir)) for f in vendor_files], "vendor", False),
        (wheelhouse, "wheelhouse", True),
        (pythons, "pythons", True),
    ]
    for pairs, name, link in trees:
        sync(pairs, root / name, link=link)
    staged = Staged(
        root=root,
        src_digest=tree_digest(root / "src"),
        scripts_digest=combine(tree_digest(root / "scripts"), tree_digest(root / "vendor"), shared_lock),
        wheelhouse_digest=tree_digest(root / "wheelhouse", content=False),
        dockerfile_digest=file_sha256(dockerfile) if dockerfile.is_file() else "missing",
        pythons_digest=combine(*(f"{v}={p}" for v, p in sorted((host_pythons or {}).items()))),
        sources=sources_digest(repo, toolchain, spec),
        wheels=tuple(sorted(dst.name for _, dst in wheelhouse)),
    )
    # the digests take the shared lock's text, never its file: the file is written once they are made
    if not (root / SHARED_LOCK).is_file() or (root / SHARED_LOCK).read_text(encoding="utf-8") != shared_lock:
        outputs.atomic_write_text(root / SHARED_LOCK, shared_lock)
    return staged


def pytest_ini(pyproject: Path) -> str:
    """A pytest.ini for the copied suites from pyproject.toml's ``[tool.pytest.ini_options]``, minus the keys that
    describe the source tree: the copy must import the installed wheel, never the checkout."""
    options: dict[str, object] = {}
    if pyproject.is_file():
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        ini = data.get("tool", {}).get("pytest", {}).get("ini_options", {})
        options = {key: value for key, value in ini.items() if key not in _SOURCE_TREE_INI_KEYS}
    lines = ["# generated from pyproject.toml [tool.pytest.ini_options] by build_tools/context.py", "[pytest]"]
    for key, value in options.items():
        if isinstance(value, list):
            lines.append(f"{key} =")
            lines.extend(f"    {item}" for item in value)
        elif isinstance(value, bool):
            lines.append(f"{key} = {'true' if value else 'false'}")
        else:
            lines.append(f"{key} = {value}")
    return "\n".join(lines) + "\n"


# The programs the test image runs beside the suites: the bench harness (the bench suite and the benchmark) and the
# node programs (qualify records the workloads with one; the bench suite runs another).
TEST_IMAGE_TOOLS = ("build_tools/bench", "build_tools/node")


def stage_tests(repo: Path, name: str, spec: BuildSpec, wheel: Path) -> tuple[str, str]:
    """Stage dist/<wheel> and tree/: tests/ (minus host-only suites) and TEST_IMAGE_TOOLS, in the checkout's layout,
    which the tools rely on to find the suites' helpers; returns (tree digest, dist digest)."""
    root = context_dir(repo, name)
    tree = root / "tree"
    excluded = {repo / "tests" / e for e in spec.test_excludes}
    files = [f for entry in ("tests", *TEST_IMAGE_TOOLS) if (repo / entry).is_dir() for f in source_files(repo, entry)]
    pairs = [(f, tree / f.relative_to(repo)) for f in files if not any(map(f.is_relative_to, excluded))]
    root.mkdir(parents=True, exist_ok=True)
    ini = root / ".pytest.ini.generated"
    ini.write_text(pytest_ini(repo / "pyproject.toml"), encoding="utf-8")
    pairs.append((ini, tree / "tests" / "pytest.ini"))
    sync([(wheel, root / "dist" / wheel.name)], root / "dist", link=True)
    sync(pairs, tree)
    return tree_digest(tree), tree_digest(root / "dist")
