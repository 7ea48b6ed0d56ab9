"""Parser for flagos route conf files (``backends_<vendor>.conf``).

Pure Python on purpose: it runs before torch is imported and in unit tests that have no
built core. It checks syntax and includes only; whether an operator or a route exists
is decided later by ``table.resolve``, which knows the operator set and the providers.

Format, one statement per line::

    # comment (also allowed after a statement)
    include common.conf             # path relative to the including file
    default = flaggems, native      # chain used by every op without its own line
    add.Tensor = native             # op.overload = route[, next-route ...]
    mul.Tensor = flaggems[float32, bfloat16], native
                                    # a provider for these dtypes only, the next route for the others
    qualified flaggems 5.0.2        # the provider version a qualification (torch_fl.qualify) passed the
                                    # routes for: another installed version warns at start-up

Later statements override earlier ones coming from included files; the same operator twice
in one file is an error, because one of the two lines is dead and nobody can tell which.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field

from .. import _chain
from .._errors import ConfigError
from .._names import ROUTE_NAME_PATTERN, ROUTE_NAME_RE

__all__ = ["Conf", "ConfEntry", "Origin", "parse_conf", "parse_conf_collecting", "parse_conf_text"]

DEFAULT_KEY = "default"
MAX_CONF_BYTES = 4 * 1024 * 1024
SYNTAX_HINT = (
    "expected 'op.overload = route[, next-route ...]' (a provider route may name its dtypes: "
    "'flaggems[float32, bfloat16], native'), 'default = route[, ...]' or 'include FILE'"
)

# aten names: `add`, `add_`, `__and__`, `_to_copy`; overloads: `Tensor`, `dim_IntList`, `Scalar_out`.
_OP_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)?")
_INCLUDE_RE = re.compile(r"include(?:\s+(?P<arg>.*))?")
_QUALIFIED_RE = re.compile(r"qualified(?:\s+(?P<arg>.*))?")


@dataclass(frozen=True)
class Origin:
    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class ConfEntry:
    op: str
    routes: tuple[str, ...]
    origin: Origin
    gates: _chain.Gates = ()  # (route, the dtypes it serves) for the routes written with a dtype list


@dataclass(frozen=True)
class Conf:
    default: ConfEntry | None
    entries: dict[str, ConfEntry] = field(default_factory=dict)
    files: tuple[str, ...] = ()
    qualified: dict[str, str] = field(default_factory=dict)  # provider -> version its routes were qualified for


def parse_conf(path: str | os.PathLike[str]) -> Conf:
    """Parse the conf at ``path`` and everything it includes; raises the first problem found."""
    conf, problems = parse_conf_collecting(path)
    if problems:
        raise problems[0]
    return conf


def parse_conf_collecting(path: str | os.PathLike[str]) -> tuple[Conf, list[ConfigError]]:
    """Parse like ``parse_conf``, but keep going past bad lines: the statements that parse, and
    every problem, so that start-up can report them together with the other configuration errors."""
    state = _State()
    try:
        _load_file(os.fspath(path), state, stack=(), include_site=None)
    except ConfigError as exc:  # the file as a whole could not be read
        state.problems.append(exc)
    return state.finish(), state.problems


def parse_conf_text(text: str, path: str = "<string>", *, base_dir: str | os.PathLike[str] | None = None) -> Conf:
    """Parse conf ``text`` as if it had been read from ``path``.

    Includes resolve against ``base_dir`` when given, else against the directory of ``path``.
    """
    state = _State()
    base = os.fspath(base_dir) if base_dir is not None else os.path.dirname(path)
    _parse_lines(text, path, base, state, stack=(path,))
    if state.problems:
        raise state.problems[0]
    return state.finish()


# --- internals -------------------------------------------------------------------------


@dataclass
class _State:
    """Accumulates entries across files; later assignments replace earlier ones."""

    default: ConfEntry | None = None
    entries: dict[str, ConfEntry] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    problems: list[ConfigError] = field(default_factory=list)
    qualified: dict[str, str] = field(default_factory=dict)

    def set(self, entry: ConfEntry) -> None:
        if entry.op == DEFAULT_KEY:
            self.default = entry
        else:
            self.entries[entry.op] = entry

    def finish(self) -> Conf:
        return Conf(
            default=self.default, entries=dict(self.entries), files=tuple(self.files), qualified=dict(self.qualified)
        )


def _q(text: str) -> str:
    # Quote user text; repr() when it holds control characters that would garble a terminal.
    return f"'{text}'" if text.isprintable() else repr(text)


def _identity(path: str) -> str:
    # realpath so that `a.conf` and `./x/../a.conf` are recognised as the same file in a cycle.
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return os.path.abspath(path)


def _load_file(path: str, state: _State, stack: tuple[str, ...], include_site: Origin | None) -> None:
    text = _read_text(path, include_site)
    if path not in state.files:
        state.files.append(path)
    _parse_lines(text, path, os.path.dirname(path), state, stack + (path,))


def _read_text(path: str, include_site: Origin | None) -> str:
    # Errors about an included file point at the include line: that is the line to fix.
    where_path, where_line = (include_site.path, include_site.line) if include_site else (path, 0)
    try:
        data = _read_regular_file(path)
    except FileNotFoundError:
        hint = "include paths are relative to the including file" if include_site else "check the path"
        raise ConfigError.at(where_path, where_line, f"cannot read {_q(path)}: no such file; {hint}") from None
    except (OSError, ValueError) as exc:  # ValueError: NUL byte in the path
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError.at(
            where_path, where_line, f"cannot read {_q(path)}: {reason}; name a readable .conf file"
        ) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError.at(path, line, f"byte 0x{data[exc.start]:02x} is not UTF-8; save the file as UTF-8") from None


def _read_regular_file(path: str) -> bytes:
    # Refuse FIFOs and devices: `include /dev/stdin` must not hang start-up, nor
    # `include /dev/zero` fill memory.
    with open(path, "rb", opener=_open_nonblocking) as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise ValueError("not a regular file")
        data = handle.read(MAX_CONF_BYTES + 1)
    if len(data) > MAX_CONF_BYTES:
        raise ValueError(f"larger than {MAX_CONF_BYTES} bytes, not a route conf")
    return data


def _open_nonblocking(path: str, flags: int) -> int:
    # O_NONBLOCK: opening a FIFO that has no writer returns at once instead of blocking.
    return os.open(path, flags | getattr(os, "O_NONBLOCK", 0))


def _parse_lines(text: str, path: str, base_dir: str, state: _State, stack: tuple[str, ...]) -> None:
    seen: dict[str, int] = {}  # op -> line, for duplicates inside this one file
    # Split on "\n" only: str.splitlines also breaks on \x0c, \x1c, \u2028 ... and would put
    # line numbers out of step with what an editor shows.
    for number, raw in enumerate(text.split("\n"), start=1):
        try:
            _parse_statement(raw, number, path, base_dir, state, stack, seen)
        except ConfigError as exc:  # one bad line does not hide the next one
            state.problems.append(exc)


def _parse_statement(
    raw: str, number: int, path: str, base_dir: str, state: _State, stack: tuple[str, ...], seen: dict[str, int]
) -> None:
    statement = raw.split("#", 1)[0].strip()
    if not statement:
        return
    include = _INCLUDE_RE.fullmatch(statement)
    if include and not (include["arg"] or "").startswith("="):
        _include(include["arg"], Origin(path, number), base_dir, state, stack)
        return
    qualified = _QUALIFIED_RE.fullmatch(statement)
    if qualified and not (qualified["arg"] or "").startswith("="):
        words = (qualified["arg"] or "").split()
        if len(words) != 2 or not ROUTE_NAME_RE.fullmatch(words[0]):
            raise ConfigError.at(
                path, number, f"{_q(statement)}: write 'qualified PROVIDER VERSION', e.g. 'qualified flaggems 5.0.2'"
            )
        state.qualified[words[0]] = words[1]
        return
    entry = _parse_assignment(statement, Origin(path, number))
    if entry.op in seen:
        raise ConfigError.at(
            path,
            number,
            f"{_q(entry.op)} is already set at {path}:{seen[entry.op]} in this file; "
            "delete one of the two lines (only an including file may override a line)",
        )
    seen[entry.op] = number
    state.set(entry)


def _include(arg: str | None, site: Origin, base_dir: str, state: _State, stack: tuple[str, ...]) -> None:
    target = (arg or "").strip()
    if not target:
        raise ConfigError.at(site.path, site.line, "'include' needs a file name; write 'include other.conf'")
    path = os.path.normpath(os.path.join(base_dir, target))
    if _identity(path) in {_identity(seen) for seen in stack}:
        chain = " -> ".join([*stack, path])
        raise ConfigError.at(site.path, site.line, f"include cycle: {chain}; remove one of these include lines")
    _load_file(path, state, stack, include_site=site)


def _parse_assignment(statement: str, origin: Origin) -> ConfEntry:
    where = (origin.path, origin.line)
    if "=" not in statement:
        raise ConfigError.at(*where, f"no '=' in {_q(statement)}; {SYNTAX_HINT}")
    left, right = statement.split("=", 1)
    op = left.strip()
    if not op:
        raise ConfigError.at(*where, f"empty operator name before '=' in {_q(statement)}; {SYNTAX_HINT}")
    if not _OP_RE.fullmatch(op):
        raise ConfigError.at(
            *where, f"bad operator name {_q(op)}; write the aten name as name.overload, e.g. 'add.Tensor' or 'relu'"
        )
    routes, gates = _parse_chain(right, statement, where)
    return ConfEntry(op=op, routes=routes, origin=origin, gates=gates)


def _parse_chain(text: str, statement: str, where: tuple[str, int]) -> tuple[tuple[str, ...], _chain.Gates]:
    if not text.strip():
        raise ConfigError.at(*where, f"empty route after '=' in {_q(statement)}; name a route, e.g. 'native'")
    try:
        parts = _chain.split(text)
    except ValueError as exc:
        raise ConfigError.at(*where, f"{_q(statement)}: {exc}") from None
    if not parts[-1] and len(parts) > 1:
        raise ConfigError.at(*where, f"trailing comma in {_q(statement)}; remove it or add the next route after it")
    routes: list[str] = []
    gates: list[tuple[str, tuple[str, ...]]] = []
    for raw in parts:
        if not raw:
            raise ConfigError.at(*where, f"empty route between commas in {_q(statement)}; remove the extra comma")
        try:
            part, dtypes = _chain.item(raw)
        except ValueError as exc:
            raise ConfigError.at(*where, f"{_q(statement)}: {exc}") from None
        if not ROUTE_NAME_RE.fullmatch(part):
            raise ConfigError.at(
                *where,
                f"bad route name {_q(part)}; route names are lowercase identifiers "
                f"({ROUTE_NAME_PATTERN}) separated by commas, e.g. 'flaggems, native'",
            )
        if part in routes:
            raise ConfigError.at(*where, f"route {_q(part)} appears twice in {_q(statement)}; list each route once")
        routes.append(part)
        if dtypes is not None:
            gates.append((part, dtypes))
    try:
        _chain.gates_followed(tuple(routes), tuple(gates))
    except ValueError as exc:
        raise ConfigError.at(*where, f"{_q(statement)}: {exc}") from None
    return tuple(routes), tuple(gates)
