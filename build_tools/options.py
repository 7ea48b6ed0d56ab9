"""A session's options, each declared once and read into one typed object (``Options``).

Two sources besides the matrix row the session acts on (configs/toolchains.toml, each key declared once in
matrix.py): the flags after nox's ``--`` (``FLAGS`` below: the one table of them, with what each does and which
sessions take it) and the host's environment (pip's settings, the CA bundle and proxies: env.py reads them).
A flag a session does not take is refused with the valid ones and the nearest, so that a misspelt flag never turns
into a tool argument and a real build; what follows a second ``--`` goes to the session's tool.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from . import env
from .plan import BENCH_MODULE

SEPARATOR = "--"
ROW_ACTIONS = ("build", "test", "bench", "qualify", "install")  # one session per (action, row)


@dataclass(frozen=True)
class Flag:
    name: str
    help: str
    sessions: tuple[str, ...]  # the actions (build, test, ...) whose sessions take it


FLAGS = (
    Flag("--dry-run", "print every command, run nothing", (*ROW_ACTIONS, "base-image", "clean")),
    Flag("--rebuild", "ignore the up-to-date wheel and images", ("build", "test", "bench", "qualify", "base-image")),
    Flag("--bench-full", "run the full benchmark after the suites (default: the short one)", ("test",)),
    Flag("--no-bench", "run no benchmark after the suites", ("test",)),
    Flag("--all", "also remove the local base images and the BuildKit cache", ("clean",)),
    Flag(
        "--all-pythons",
        "check every Python of the row's `pythons`, which its one wheel serves, not only install_pythons",
        ("install",),
    ),
)  # fmt: skip
# The tool each action passes the arguments after a second `--` to.
PASSES_ON = {"test": "pytest", "bench": f"python -m {BENCH_MODULE}", "qualify": "python -m torch_fl qualify"}


def flags_of(action: str) -> tuple[str, ...]:
    return tuple(f.name for f in FLAGS if action in f.sessions)


class UsageError(ValueError):
    """Session arguments that are not understood; the message names the valid ones."""


@dataclass(frozen=True)
class Options:
    """What a flow acts on besides the checkout and the matrix (whose rows matrix.py declares): the session's flags
    and the host's environment."""

    dry_run: bool = False
    rebuild: bool = False
    bench: str = "short"  # short | full | none
    tool_args: tuple[str, ...] = ()  # after the separator: for pytest (test-*), the benchmark (bench-*), qualify
    all_pythons: bool = False  # install checks on every Python the row's wheel serves, not only install_pythons
    environ: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    @cached_property
    def host(self) -> env.HostEnv:
        """pip's settings, the CA bundle and the proxies that pass into builds and runs (env.EnvError when a
        setting names a file that is not there)."""
        return env.from_environ(self.environ)


def read(
    posargs: Sequence[str],
    action: str = "test",
    session: str = "",
    environ: Mapping[str, str] | None = None,
) -> Options:
    """``nox -s test-cpu -- --rebuild -- -k add``: session flags, then ``--``, then the tool's arguments. Anything
    else is a ``UsageError`` naming the valid flags (and the nearest one)."""
    session = session or f"{action}-<toolchain>"
    valid = flags_of(action)
    posargs = list(posargs)
    cut = posargs.index(SEPARATOR) if SEPARATOR in posargs else len(posargs)
    args, rest = posargs[:cut], tuple(posargs[cut + 1 :])
    unknown = [a for a in args if a not in valid]
    if unknown:
        near = difflib.get_close_matches(unknown[0], valid, n=1)
        hint = f"; did you mean {near[0]}?" if near else ""
        tool = PASSES_ON.get(action)
        where = f"; {tool} arguments go after a separator: nox -s {session} -- [flags] -- ARGS" if tool else ""
        raise UsageError(f"{session}: unknown argument {unknown[0]!r}{hint} (flags: {', '.join(valid)}){where}")
    if rest and action not in PASSES_ON:
        raise UsageError(f"{session} passes no arguments on: {' '.join(rest)!r} after {SEPARATOR!r} is not used")
    if "--bench-full" in args and "--no-bench" in args:
        raise UsageError(f"{session}: --bench-full and --no-bench exclude each other")
    return Options(
        dry_run="--dry-run" in args,
        rebuild="--rebuild" in args,
        bench="full" if "--bench-full" in args else "none" if "--no-bench" in args else "short",
        tool_args=rest,
        all_pythons="--all-pythons" in args,
        environ=dict(environ or {}),
    )
