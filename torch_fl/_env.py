"""The FLAGOS_* environment variables, read once at start-up.

Pure Python (no torch import) so it can be unit tested without the core. Every bad
value is an error rather than a silent default: a misspelt variable that is ignored makes
an A/B comparison measure the same route twice without anyone noticing.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TypeVar

from . import _chain
from ._errors import ConfigError
from ._hints import close_matches
from ._names import ROUTE_NAME_RE

__all__ = [
    "ACCELERATORS",
    "EMU_DEVICES_DEFAULT",
    "EMU_DEVICES_MAX",
    "KNOWN_VARIABLES",
    "LOG_CATEGORIES",
    "OP_PREFIX",
    "Override",
    "Settings",
    "decode_op",
    "encode_op",
    "op_variable",
    "read_settings",
    "read_settings_collecting",
]

ACCELERATORS = ("cpu", "cuda", "dcu")
LOG_CATEGORIES = ("dispatch", "fallback", "config", "replay")
LOG_ALL = "all"
EMU_DEVICES_DEFAULT = 2
EMU_DEVICES_MAX = 16

ACCELERATOR_VAR = "FLAGOS_ACCELERATOR"
BACKEND_CONFIG_VAR = "FLAGOS_BACKEND_CONFIG"
CONF_VAR = "FLAGOS_CONF"
LOG_VAR = "FLAGOS_LOG"
EMU_DEVICES_VAR = "FLAGOS_EMU_DEVICES"
EMU_TRAP_VAR = "FLAGOS_EMU_TRAP"
EMU_MEMORY_VAR = "FLAGOS_EMU_MEMORY"
REPLAY_VAR = "FLAGOS_FLAGGEMS_REPLAY"
VERIFY_VAR = "FLAGOS_FLAGGEMS_VERIFY"
REPLAY_CACHE_VAR = "FLAGOS_REPLAY_CACHE_SIZE"
REPLAY_CACHE_DEFAULT = 4096
OP_PREFIX = "FLAGOS_OP_"
KNOWN_VARIABLES = (
    ACCELERATOR_VAR,
    BACKEND_CONFIG_VAR,
    CONF_VAR,
    LOG_VAR,
    EMU_DEVICES_VAR,
    EMU_TRAP_VAR,
    EMU_MEMORY_VAR,
    REPLAY_VAR,
    VERIFY_VAR,
    REPLAY_CACHE_VAR,
)

# Variables from older builds that no longer do anything: say what replaced them.
RETIRED_VARIABLES = {
    "FLAGOS_USE_FLAGGEMS": "it no longer selects anything; route operators with FLAGOS_OP_<op>=flaggems "
    "(dots doubled, e.g. FLAGOS_OP_add__Tensor=flaggems) or with 'default = flaggems, native' in a conf "
    "named by FLAGOS_BACKEND_CONFIG",
}

ENCODING_RULE = (
    "the variable is FLAGOS_OP_ followed by the aten name with its dot doubled: "
    "add.Tensor -> FLAGOS_OP_add__Tensor, relu -> FLAGOS_OP_relu"
)
T = TypeVar("T")


@dataclass(frozen=True)
class Override:
    var: str  # "FLAGOS_OP_add__Tensor"
    encoded: str  # "add__Tensor"; decode with decode_op once the operator set is known
    routes: tuple[str, ...]
    gates: _chain.Gates = ()  # (route, the dtypes it serves) for the routes written with a dtype list


@dataclass(frozen=True)
class Settings:
    accelerator: str | None
    backend_config: str | None
    overrides: tuple[Override, ...]
    log: frozenset[str]
    emu_devices: int
    emu_trap: bool = False  # protect emulated device memory from host reads (a debug mode, runtime/host_access.h)
    replay: bool = True  # provider calls (FlagGems) replayed from C++ once recorded (torch_fl/replay)
    replay_verify: bool = False  # every replayed call also runs the provider and must match it bit for bit
    replay_capacity: int = REPLAY_CACHE_DEFAULT
    conf_name: str | None = None  # FLAGOS_CONF: a shipped conf by name (configs/backends_<vendor>_<name>.conf)
    emu_memory: int | None = None  # bytes of each emulated device (FLAGOS_EMU_MEMORY); None: the host's memory


def read_settings(environ: Mapping[str, str]) -> Settings:
    """Parse the FLAGOS_* variables of ``environ``; every problem found is reported at once."""
    settings, problems = read_settings_collecting(environ)
    if problems:
        raise ConfigError(problems)
    return settings


def read_settings_collecting(environ: Mapping[str, str]) -> tuple[Settings, list[str]]:
    """Parse like ``read_settings`` but return the problems beside the settings, where a bad
    variable counts as unset, so that start-up can go on to check the conf and report everything."""
    problems = _misspelt_variables(environ)
    accelerator = _attempt(problems, _accelerator, environ.get(ACCELERATOR_VAR))
    backend_config = _attempt(problems, _backend_config, environ.get(BACKEND_CONFIG_VAR))
    conf_name = _attempt(problems, _conf_name, environ.get(CONF_VAR))
    if backend_config and conf_name:
        problems.append(
            f"{CONF_VAR}={conf_name!r} and {BACKEND_CONFIG_VAR}={backend_config!r} both choose the conf; "
            "unset one of the two"
        )
    log = _attempt(problems, _log_categories, environ.get(LOG_VAR))
    emu_devices = _attempt(problems, _emu_devices, environ.get(EMU_DEVICES_VAR))
    emu_trap = _attempt(problems, _emu_trap, environ.get(EMU_TRAP_VAR))
    emu_memory = _attempt(problems, _emu_memory, environ.get(EMU_MEMORY_VAR))
    replay = _attempt(problems, _switch, REPLAY_VAR, environ.get(REPLAY_VAR), True, _REPLAY_HELP)
    verify = _attempt(problems, _switch, VERIFY_VAR, environ.get(VERIFY_VAR), False, _VERIFY_HELP)
    capacity = _attempt(problems, _replay_capacity, environ.get(REPLAY_CACHE_VAR))
    overrides = []
    for var in sorted(name for name in environ if name.startswith(OP_PREFIX)):
        override = _attempt(problems, _override, var, environ[var])
        if override is not None:
            overrides.append(override)
    settings = Settings(
        accelerator=accelerator,
        backend_config=backend_config,
        conf_name=conf_name,
        overrides=tuple(overrides),
        log=log if log is not None else frozenset(),
        emu_devices=emu_devices if emu_devices is not None else EMU_DEVICES_DEFAULT,
        emu_trap=bool(emu_trap),
        emu_memory=emu_memory,
        replay=True if replay is None else replay,
        replay_verify=bool(verify),
        replay_capacity=capacity or REPLAY_CACHE_DEFAULT,
    )
    return settings, problems


def encode_op(op: str) -> str:
    """``add.Tensor`` -> ``add__Tensor`` (the part after FLAGOS_OP_)."""
    return op.replace(".", "__")


def op_variable(op: str) -> str:
    """``add.Tensor`` -> ``FLAGOS_OP_add__Tensor``, the variable that overrides the route of ``op``."""
    return OP_PREFIX + encode_op(op)


def decode_op(encoded: str, known_ops: Collection[str]) -> str:
    """Find the operator that FLAGOS_OP_<encoded> names.

    Op names contain ``_`` and ``__`` themselves (``add_.Tensor`` -> ``add___Tensor``), so
    each ``__`` is tried as the doubled dot and only candidates that are real ops count.
    """
    var = OP_PREFIX + encoded
    found = sorted(op for op in _decode_candidates(encoded) if op in known_ops)
    if len(found) == 1:
        return found[0]
    if found:
        raise ConfigError(
            f"{var} is ambiguous: it can name {', '.join(found)}; set the operator in a conf file "
            f"named by {BACKEND_CONFIG_VAR} instead, where the dot is written as a dot"
        )
    raise ConfigError(f"{var} names no operator; {_nearest_ops(encoded, known_ops)}; {ENCODING_RULE}")


# --- one function per variable ---------------------------------------------------------


def _attempt(problems: list[str], parse: Callable[..., T], *args: str | None) -> T | None:
    # Keep going after a bad variable so that one run reports all of them.
    try:
        return parse(*args)
    except ConfigError as exc:
        problems.extend(exc.problems)
        return None


def _accelerator(value: str | None) -> str | None:
    if value is None or not value.strip():
        return None
    choice = value.strip().lower()
    if choice not in ACCELERATORS:
        raise ConfigError(
            f"{ACCELERATOR_VAR}={value!r} is not an accelerator; choose one of "
            f"{', '.join(ACCELERATORS)}, or unset it to use the best one available"
        )
    return choice


def _backend_config(value: str | None) -> str | None:
    if value is None or not value.strip():
        return None
    if not os.path.isfile(value):
        what = "is a directory" if os.path.isdir(value) else "does not exist"
        raise ConfigError(
            f"{BACKEND_CONFIG_VAR}={value!r} {what}; set it to the path of a route conf file "
            "(e.g. a copy of backends_<vendor>.conf), or unset it to use the shipped one"
        )
    return value


def _conf_name(value: str | None) -> str | None:
    if value is None or not value.strip():
        return None
    name = value.strip()
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise ConfigError(
            f"{CONF_VAR}={value!r} is not a conf name; name a shipped conf (`python -m torch_fl info` lists them, "
            f"e.g. {CONF_VAR}=flaggems), or give a file with {BACKEND_CONFIG_VAR}=PATH"
        )
    return name


def _log_categories(value: str | None) -> frozenset[str]:
    words = [word.strip().lower() for word in (value or "").split(",") if word.strip()]
    if LOG_ALL in words:
        return frozenset(LOG_CATEGORIES)
    unknown = [word for word in words if word not in LOG_CATEGORIES]
    if unknown:
        raise ConfigError(
            f"{LOG_VAR}={value!r} has unknown categor{'y' if len(unknown) == 1 else 'ies'} "
            f"{', '.join(unknown)}; use a comma separated list of "
            f"{', '.join(LOG_CATEGORIES)} (or {LOG_ALL})"
        )
    return frozenset(words)


def _count(var: str, value: str | None, default: int, low: int, high: int | None, choices: str) -> int:
    # An integer variable: unset or blank gives the default; anything else must be an integer in [low, high].
    if value is None or not value.strip():
        return default
    try:
        count = int(value.strip())
    except ValueError:
        raise ConfigError(f"{var}={value!r} is not an integer; use {choices}") from None
    if count < low or (high is not None and count > high):
        raise ConfigError(f"{var}={value!r} is out of range; use {choices}")
    return count


def _emu_devices(value: str | None) -> int:
    choices = f"an integer from 1 to {EMU_DEVICES_MAX} (default {EMU_DEVICES_DEFAULT})"
    return _count(EMU_DEVICES_VAR, value, EMU_DEVICES_DEFAULT, 1, EMU_DEVICES_MAX, choices)


def _emu_trap(value: str | None) -> bool:
    if value is None or value.strip() in ("", "0"):
        return False
    if value.strip() == "1":
        return True
    raise ConfigError(
        f"{EMU_TRAP_VAR}={value!r} is not 0 or 1; set 1 to make host reads of emulated flagos memory fault "
        "(a debug mode of FLAGOS_ACCELERATOR=cpu), or unset it"
    )


_SIZE_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def _emu_memory(value: str | None) -> int | None:
    # A size in bytes, with an optional binary unit: 17179869184, 16G, 16GiB, 512m.
    if value is None or not value.strip():
        return None
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?", value.strip().lower())
    size = int(float(match[1]) * _SIZE_UNITS[match[2]]) if match else 0
    if size <= 0:
        raise ConfigError(
            f"{EMU_MEMORY_VAR}={value!r} is not a memory size; give the bytes of each emulated device as a number "
            "with an optional unit (16GiB, 512MiB, 17179869184), or unset it to use the host's memory"
        )
    return size


_REPLAY_HELP = "0 runs every provider call in Python, 1 (default) replays recorded calls from C++"
_VERIFY_HELP = "1 runs every replayed call through the provider too and fails on any difference (slow; a check)"


def _switch(var: str, value: str | None, default: bool, meaning: str) -> bool:
    if value is None or not value.strip():
        return default
    if value.strip() in ("0", "1"):
        return value.strip() == "1"
    raise ConfigError(f"{var}={value!r} is not 0 or 1; {meaning}")


def _replay_capacity(value: str | None) -> int:
    choices = f"a positive integer, the number of keys the replay cache keeps (default {REPLAY_CACHE_DEFAULT})"
    return _count(REPLAY_CACHE_VAR, value, REPLAY_CACHE_DEFAULT, 1, None, choices)


def _override(var: str, value: str) -> Override | None:
    encoded = var[len(OP_PREFIX) :]
    if not value.strip():
        return None  # empty means unset, as for every other FLAGOS_ variable
    if not encoded:
        raise ConfigError(f"{var}={value!r} names no operator; {ENCODING_RULE}")
    try:
        items = [_chain.item(part) for part in _chain.split(value)]
    except ValueError as exc:
        raise ConfigError(f"{var}={value!r}: {exc}") from None
    routes = [name for name, _ in items]
    bad = [part for part in routes if not ROUTE_NAME_RE.fullmatch(part)]
    if bad:
        shown = ", ".join(repr(part) for part in bad)
        raise ConfigError(
            f"{var}={value!r} has bad route name {shown}; give a route or a chain of routes, "
            "lowercase and comma separated, e.g. 'flaggems, native' (a provider may name its dtypes: "
            f"{_chain.EXAMPLE})"
        )
    if len(set(routes)) != len(routes):
        raise ConfigError(f"{var}={value!r} repeats a route; list each route of the chain once")
    gates = tuple((name, dtypes) for name, dtypes in items if dtypes is not None)
    try:
        _chain.gates_followed(tuple(routes), gates)
    except ValueError as exc:
        raise ConfigError(f"{var}={value!r}: {exc}") from None
    return Override(var=var, encoded=encoded, routes=tuple(routes), gates=gates)


# --- typo detection ----------------------------------------------------------------------


def _misspelt_variables(environ: Mapping[str, str]) -> list[str]:
    problems = []
    for name in sorted(environ):
        if not name.upper().startswith("FLAGOS") or name in KNOWN_VARIABLES or name.startswith(OP_PREFIX):
            continue
        if name in RETIRED_VARIABLES:
            problems.append(f"{name}={environ[name]!r} is set but {RETIRED_VARIABLES[name]}")
            continue
        suggestion = _suggest_name(name)
        if suggestion is not None:
            problems.append(
                f"{name} is not a flagos variable; did you mean {suggestion}? "
                f"Known: {', '.join(KNOWN_VARIABLES)} and {OP_PREFIX}<op>"
            )
    return problems


def _suggest_name(name: str) -> str | None:
    """The variable ``name`` was probably meant to be, or None when it is not close to any."""
    upper = name.upper()
    if upper in KNOWN_VARIABLES:
        return upper
    if upper.startswith(OP_PREFIX):
        return OP_PREFIX + name[len(OP_PREFIX) :]
    close = difflib.get_close_matches(upper, KNOWN_VARIABLES, n=1, cutoff=0.8)
    if close:
        return close[0]
    return _suggest_op_prefix(name)


def _suggest_op_prefix(name: str) -> str | None:
    # A mistyped FLAGOS_OP_ prefix: FLAGOS_OPS_add__Tensor, FLAGOS_OPadd__Tensor.
    match = re.fullmatch(r"FLAGOS_?([A-Za-z0-9]+)_(.+)", name)
    if match and difflib.SequenceMatcher(None, match[1].upper(), "OP").ratio() >= 0.8:
        return OP_PREFIX + match[2]
    match = re.fullmatch(r"FLAGOS_OP([a-z].*)", name)  # op names start lowercase or with "_"
    return OP_PREFIX + match[1] if match else None


# --- op name decoding ---------------------------------------------------------------------


def _decode_candidates(encoded: str) -> set[str]:
    candidates = {encoded}
    start = encoded.find("__")
    while start != -1:
        candidates.add(encoded[:start] + "." + encoded[start + 2 :])
        start = encoded.find("__", start + 1)  # overlapping: "____" has three positions
    return candidates


def _nearest_ops(encoded: str, known_ops: Collection[str]) -> str:
    # Compare in the encoded form, the one the user typed, and show both spellings.
    by_encoding: dict[str, str] = {}
    for op in sorted(known_ops):
        by_encoding.setdefault(encode_op(op), op)
    near = close_matches(encoded, by_encoding, n=5, cutoff=0.6)
    if not near:
        return "no operator has a similar name"
    return "nearest: " + ", ".join(f"{by_encoding[key]} ({OP_PREFIX}{key})" for key in near)
