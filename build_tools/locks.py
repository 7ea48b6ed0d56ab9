"""The lock files of the toolchain images; how an image installs one: docker/README.md ("Locks").

``nox -s lock`` (``python -m build_tools.locks``) makes them with uv's resolver, keeping every pin that still fits;
deleting a lock file first re-resolves it to the newest releases. What a lock is made from, by matrix row:

- ``<row>-builder``: the row's torch requirement (none when the image ships torch; pinned without its dependencies
  when ``torch.builder_no_deps``), ``docker/<dir>/requirements-build.txt`` and the row's ``builder_requirements``;
- ``<row>-test``: torch and ``requirements-test.txt``, plus ``requirements-models.txt`` pinned without
  dependencies (torchvision pins torch exactly: its own resolution must never choose a torch);
- ``<row>-install``: torch alone (the bare node of ``nox -s install-<row>``), one per Python it installs on;
- ``<row>-node``: for rows in ``NODES``, the build backend for the Python of a GPU node that builds its own wheel.

``check`` compares a lock with its inputs without the network: an unsatisfied requirement is named with both
versions, any other change of the inputs shows as a changed digest.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from .matrix import DEFAULT_PATH, Matrix, Toolchain
from .matrix import load as load_matrix
from .outputs import atomic_write_text

# torch's own wheels need glibc >= 2.28; resolving for that floor fits every image (bookworm 2.36, Ubuntu 22.04
# 2.35), and each lock lists the hashes of every file of a pinned version, so pip still picks the best file.
PLATFORM = "x86_64-manylinux_2_28"
UV = "uv==0.13.9"  # the resolver `nox -s lock` installs
# Rows whose GPU nodes build the wheel themselves: (the node's Python, the build requirements it takes). The lent
# H200 nodes have Python 3.12 and their own torch, CUDA and CMake; the wheel build needs only the build backend.
NODES = {"cuda": ("3.12", ("scikit-build-core", "packaging"))}
HEADER = "# Locked by `nox -s lock`: edit the requirements it names, never this file."
_PIN_RE = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==(?P<version>[^\s;\\]+)")


class LockError(ValueError):
    """A lock that is missing or no longer agrees with its requirements."""


@dataclass(frozen=True)
class Lock:
    """One lock file and everything it is resolved from."""

    row: str
    stage: str
    python: str
    path: Path  # repo-relative
    resolved: tuple[tuple[str, str], ...]  # (requirement, where it is written), resolved with its dependencies
    pinned: tuple[tuple[str, str], ...]  # the same, pinned without its dependencies
    index_url: str = ""  # the row's torch index, asked only when no find-links wheel satisfies torch

    @property
    def name(self) -> str:
        return f"{self.row}-{self.stage}"

    def digest(self) -> str:
        resolved = sorted(r for r, _ in self.resolved)
        pinned = sorted(r for r, _ in self.pinned)
        text = "\n".join([self.python, PLATFORM, *resolved, "--no-deps", *pinned])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def lock_path(toolchain: Toolchain, stage: str, python: str = "") -> Path:
    """``docker/cpu/locks/cpu214-test-py311.txt``: in the row's docker directory."""
    tag = (python or toolchain.python).replace(".", "")
    return toolchain.vendor_dir / "locks" / f"{toolchain.name}-{stage}-py{tag}.txt"


def lock_args(toolchain: Toolchain) -> dict[str, str]:
    """The build args that name the row's lock files, as the staged context's vendor/ holds them (docker/README.md):
    the builder's and the test stage's, and torch's own install lock where the image does not bring torch."""
    here = toolchain.vendor_dir

    def vendor(stage: str, python: str = "") -> str:
        return lock_path(toolchain, stage, python).relative_to(here).as_posix()

    args = {
        "BUILDER_LOCK": vendor("builder", toolchain.builder_python or toolchain.python),
        "TEST_LOCK": vendor("test"),
    }
    if not toolchain.torch.from_image:
        args["INSTALL_LOCK"] = vendor("install")
    return args


def requirement_lines(path: Path, repo: Path) -> list[tuple[str, str]]:
    """(requirement, "file:line") for each requirement of a requirements file; comments and blanks dropped."""
    rel = path.relative_to(repo) if path.is_absolute() else path
    out = []
    for n, line in enumerate((repo / rel).read_text(encoding="utf-8").splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if text:
            out.append((text, f"{rel}:{n}"))
    return out


def locks_of(toolchain: Toolchain, repo: Path, matrix_path: str, suites: Sequence[str]) -> list[Lock]:
    """The locks of one matrix row (none for a row whose Dockerfile does not exist yet); ``suites`` are the suites
    its test container runs."""
    here = toolchain.vendor_dir
    if not (repo / toolchain.dockerfile).is_file():
        return []
    row = f"{matrix_path} [toolchains.{toolchain.name}]"
    torch = [] if toolchain.torch.from_image else [(toolchain.torch.requirement, row)]

    def reqs(name: str) -> list[tuple[str, str]]:
        return requirement_lines(here / name, repo) if (repo / here / name).is_file() else []

    no_deps, build = toolchain.torch.builder_no_deps, reqs("requirements-build.txt")
    build += [(r, f"{row} builder_requirements") for r in toolchain.builder_requirements]
    models = reqs("requirements-models.txt") if "models" in suites else []
    stages = {
        "builder": ([*([] if no_deps else torch), *build], torch if no_deps else []),
        "test": ([*torch, *reqs("requirements-test.txt")], models),
    }
    if torch:
        stages["install"] = (torch, [])
    index = toolchain.torch.index_url
    # the builder's lock is for its own interpreter; torch's install lock for the test's Python and each Python of
    # the row (a node image of that Python: `install-<row> -- --all-pythons` checks them all)
    pythons = {
        "builder": (toolchain.builder_python or toolchain.python,),
        "test": (toolchain.python,),
        "install": tuple(sorted({toolchain.python, *toolchain.checked_pythons, *toolchain.served_pythons})),
    }
    # a node of another Python than the test's takes torch.node_requirement where the row names one
    node_torch = toolchain.torch.node_requirement
    node = [(node_torch, f"{row} torch.node_requirement")] if node_torch else []

    out = []
    for stage, (res, pin) in stages.items():
        for py in pythons[stage]:
            path = lock_path(toolchain, stage, py)
            if stage == "install" and node and py != toolchain.python:  # PyPI's build: not the row's torch index
                out.append(Lock(toolchain.name, stage, py, path, tuple(node), tuple(pin)))
            else:
                out.append(Lock(toolchain.name, stage, py, path, tuple(res), tuple(pin), index))
    if toolchain.name in NODES:
        python, names = NODES[toolchain.name]
        backend = tuple(r for r in build if canonicalize_name(Requirement(r[0]).name) in names)
        out.append(Lock(toolchain.name, "node", python, lock_path(toolchain, "node", python), backend, ()))
    return out


def all_locks(matrix: Matrix, repo: Path) -> list[Lock]:
    path = Path(matrix.path)
    shown = str(path.relative_to(repo) if path.is_absolute() and path.is_relative_to(repo) else path)
    return [
        lock
        for toolchain in matrix.toolchains.values()
        for lock in locks_of(toolchain, repo, shown, matrix.suites(toolchain))
    ]


def _entries(text: str) -> dict[str, str]:
    """{canonical name: its pin line and hash lines} of a lock's text, in the lock's order."""
    entries: dict[str, str] = {}
    current = ""
    for line in text.splitlines():
        if m := _PIN_RE.match(line):
            current = canonicalize_name(m.group("name"))
            entries[current] = line
        elif current and line.strip().startswith("--hash="):
            entries[current] += "\n" + line
    return entries


def shared_install(matrix: Matrix, toolchain: Toolchain, repo: Path) -> str:
    """The text of the context's shared-lock.txt: the entries, pin and hashes alike, of the install locks of every
    row in ``toolchain``'s ``torch.shared_deps`` group, each of its Pythons included (a node image of any of them
    installs this file first, and a pin resolved for 3.11 may not exist for 3.10); the header alone for a row
    outside a group. The text is the same for every row of a group, so their images share the layer that installs
    it."""
    group = toolchain.torch.shared_deps
    rows = [t for t in matrix.toolchains.values() if group and t.torch.shared_deps == group]
    paths = [
        lock_path(row, "install", py)
        for row in rows
        for py in sorted({row.python, *row.checked_pythons, *row.served_pythons})
    ]
    shared: dict[str, str] = {}
    for i, path in enumerate(paths):
        entries = _entries((repo / path).read_text(encoding="utf-8"))
        shared = entries if i == 0 else {n: e for n, e in shared.items() if entries.get(n) == e}
    what = f"what the install locks of {', '.join(t.name for t in rows)} pin alike" if rows else "nothing"
    lines = [f"# torch.shared_deps = {group!r}: {what} (build_tools/locks.py shared_install)", *shared.values()]
    return "\n".join(lines) + "\n"


def read_pins(text: str) -> dict[str, tuple[str, int]]:
    """{canonical name: (version, number of hashes)} of a lock's text."""
    return {name: (_PIN_RE.match(entry)["version"], entry.count("\n")) for name, entry in _entries(text).items()}


def check(lock: Lock, repo: Path) -> list[str]:
    """Every way ``lock`` disagrees with its inputs, each naming the package and the way out; [] when it fits."""
    fix = "run `nox -s lock` and commit the result"
    file = repo / lock.path
    if not file.is_file():
        return [f"{lock.path} is missing: {fix}"]
    text = file.read_text(encoding="utf-8")
    pins = read_pins(text)
    problems = []
    for requirement, where in (*lock.resolved, *lock.pinned):
        try:
            req = Requirement(requirement)
        except InvalidRequirement as exc:
            problems.append(f"{where}: {requirement!r} is not a requirement ({exc})")
            continue
        if req.marker and not req.marker.evaluate({"python_version": lock.python, "python_full_version": lock.python}):
            continue  # a requirement of another Python (requirements-test.txt pins per Python where they differ)
        got = pins.get(canonicalize_name(req.name))
        if got is None:
            problems.append(f"{lock.path} is stale: {where} asks for {req.name}, which the lock lacks; {fix}")
        elif req.specifier and not req.specifier.contains(got[0], prereleases=True):
            problems.append(f"{lock.path} is stale: {where} asks for {req}, the lock has {req.name} {got[0]}; {fix}")
    unhashed = sorted(name for name, (_, hashes) in pins.items() if hashes == 0)
    if unhashed:
        problems.append(f"{lock.path}: no hash for {', '.join(unhashed)}; {fix}")
    if not problems and f"# inputs: {lock.digest()}" not in text:
        problems.append(
            f"{lock.path} is stale: what it is made from changed (a requirement added, removed or loosened); {fix}"
        )
    return problems


def _indexes(lock: Lock, lines: Sequence[str], find_links: Sequence[str]) -> list[str]:
    """uv's index arguments: the find-links wheelhouses, and the row's torch index unless one of them has torch
    (an air-gapped or proxied host then never waits on it)."""
    from .wheel_names import requirement_version_matches

    args = [a for d in find_links for a in ("--find-links", d)]
    torch = [r for r in lines if canonicalize_name(Requirement(r).name) == "torch"]
    staged = [f.name for d in find_links if Path(d).is_dir() for f in Path(d).iterdir()]
    python_tag = "cp" + lock.python.replace(".", "")
    if lock.index_url and torch and not any(requirement_version_matches(torch[0], w, python_tag) for w in staged):
        args += ["--extra-index-url", lock.index_url]
    return args


def _compile(uv: Sequence[str], lock: Lock, find_links: Sequence[str], *, pinned: bool, previous: str = "") -> str:
    """uv's resolution of ``lock.pinned`` (without dependencies) or ``lock.resolved``; "" when there are none.
    ``previous`` (the lock's current text) is uv's output file, which uv reads as preferences: a pin that still
    fits is kept."""
    lines = [r for r, _ in (lock.pinned if pinned else lock.resolved)]
    if not lines:
        return ""
    with tempfile.TemporaryDirectory(prefix="torch-fl-lock-") as tmp:
        spec = Path(tmp) / f"{lock.name}.in"
        spec.write_text("\n".join(lines) + "\n", encoding="utf-8")
        out = Path(tmp) / f"{lock.name}.txt"
        out.write_text(previous, encoding="utf-8")
        cmd = [
            *uv,
            "pip",
            "compile",
            "--quiet",
            "--generate-hashes",
            "--no-header",
            "--no-annotate",
            "--python-version",
            lock.python,
            "--python-platform",
            PLATFORM,
            *(["--no-deps"] if pinned else []),
            *_indexes(lock, lines, find_links),
            "--output-file",
            str(out),
            str(spec),
        ]
        res = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if res.returncode != 0:
            raise LockError(f"{lock.path}: uv could not resolve {', '.join(lines)}:\n{res.stderr.strip()}")
        return out.read_text(encoding="utf-8")


def render(lock: Lock, resolved: str, pinned: str) -> str:
    parts = [
        HEADER,
        f"# {lock.name}: Python {lock.python}, {PLATFORM}; installed with --require-hashes --no-deps",
        f"# inputs: {lock.digest()}",
        resolved.strip(),
    ]
    if pinned.strip():
        parts += ["# pinned without their dependencies (the requirement says why)", pinned.strip()]
    return "\n".join(parts) + "\n"


def update(locks: Iterable[Lock], repo: Path, uv: Sequence[str], find_links: Sequence[str]) -> list[Path]:
    """Re-resolve ``locks``; each file is replaced only when its content changes. Returns the files written."""
    written = []
    for lock in locks:
        target = repo / lock.path
        previous = target.read_text(encoding="utf-8") if target.is_file() else ""
        resolved = _compile(uv, lock, find_links, pinned=False, previous=previous)
        text = render(lock, resolved, _compile(uv, lock, find_links, pinned=True))
        if previous != text:  # a missing lock reads as "", never a lock's text
            atomic_write_text(target, text)
            written.append(lock.path)
    return written


def main(argv: Sequence[str]) -> int:
    """``python -m build_tools.locks [ROW ...]``: re-resolve the locks of the named rows (all by default)."""
    repo = Path(__file__).resolve().parents[1]
    matrix = load_matrix(repo / DEFAULT_PATH)
    unknown = [a for a in argv if a not in matrix.toolchains]
    if unknown:
        print(f"locks: unknown row(s) {', '.join(unknown)}; rows: {', '.join(matrix.toolchains)}", file=sys.stderr)
        return 2
    locks = [lock for lock in all_locks(matrix, repo) if not argv or lock.row in argv]
    find_links = [d for d in os.environ.get("PIP_FIND_LINKS", "").split() if d]
    try:
        written = update(locks, repo, [sys.executable, "-m", "uv"], find_links)
        if problems := [p for lock in locks for p in check(lock, repo)]:
            raise LockError("\n".join(problems))
    except LockError as exc:
        print(f"locks: {exc}", file=sys.stderr)
        return 1
    for path in written:
        print(f"locks: wrote {path}")
    print(f"locks: {len(locks)} locks, {len(written)} changed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
