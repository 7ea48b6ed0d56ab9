"""Property tests for the conf parser.

1. Robustness: on any text -- valid lines, junk, and valid lines with one character broken --
   the parser returns a Conf or raises ConfigError whose message starts with "path:line: ";
   never another exception. 2,500 examples of 4 texts each: 10,000 texts.
2. Round trip: any well-formed conf, however it is spaced and commented, parses to exactly
   the entries it was written from.
"""

from __future__ import annotations

import itertools
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch_fl_conf as conf  # registered by conftest
import torch_fl_names
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch_fl_errors import ConfigError

PATH = "fuzz.conf"
TEXTS_PER_EXAMPLE = 4
FUZZ = settings(
    max_examples=2_500,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
ROUND_TRIP = settings(max_examples=500, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

OP_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)?")
ROUTE_RE = torch_fl_names.ROUTE_NAME_RE
ERROR_RE = re.compile(r"(?P<path>[^\n]*?):(?P<line>\d+): \S")

# Files the generated include lines point at (relative to the fuzz base directory).
INCLUDED = {
    "good.conf": "relu = native\ndefault = flaggems, native\n",
    "broken.conf": "# fine\nrelu native\n",
    "loop.conf": "abs = cpu\ninclude loop.conf\n",
    "nested/inner.conf": "include ../good.conf\nabs = cpu\n",
    "latin1.conf": "relu = native # caf\udce9\n",
}


@pytest.fixture(scope="module")
def base_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="flagos-conf-fuzz-") as name:
        root = Path(name)
        for relative, text in INCLUDED.items():
            (root / relative).parent.mkdir(parents=True, exist_ok=True)
            (root / relative).write_bytes(text.encode("utf-8", "surrogateescape"))
        (root / "adir.conf").mkdir()
        yield root


# --- strategies ------------------------------------------------------------------------------

# Names are built from character alphabets: st.from_regex is several times slower per draw.
LOWER = "abcdefghijklmnopqrstuvwxyz"
IDENT_TAIL = LOWER + LOWER.upper() + "0123456789_"
ws = st.sampled_from(["", " ", "  ", "\t", " \t "])
ops = st.sampled_from(
    ["add.Tensor", "add_.Tensor", "__and__.Tensor", "relu", "_to_copy", "sum.dim_IntList", "default", "include"]
) | st.builds(
    lambda head, tail, overload: head + tail + (f".{overload}" if overload else ""),
    st.sampled_from(LOWER + "AZ_"),
    st.text(IDENT_TAIL, max_size=6),
    st.text(IDENT_TAIL, max_size=5),
)
routes = st.sampled_from(["native", "cpu", "cuda", "flaggems"]) | st.builds(
    str.__add__, st.sampled_from(LOWER), st.text(LOWER + "0123456789_", max_size=6)
)
chains = st.lists(routes, min_size=1, max_size=3, unique=True)
comments = st.sampled_from(["", "# why", "#", "#=,#", " # include x.conf"])
include_targets = st.sampled_from([*INCLUDED, "missing.conf", "adir.conf", "../nope.conf", "", "  good.conf  "])


# One draw for all the spacing of a line keeps generation cheap: draws dominate the run time.
spacings = st.sampled_from(list(itertools.product(["", " ", "\t"], ["", " ", "\t "], [",", ", ", " ,"])))


@st.composite
def assignment(draw: st.DrawFn) -> str:
    outer, inner, sep = draw(spacings)
    return f"{outer}{draw(ops)}{inner}={inner}{sep.join(draw(chains))}{outer}{draw(comments)}"


@st.composite
def include_line(draw: st.DrawFn) -> str:
    outer, inner, _ = draw(spacings)
    return f"{outer}include{inner or ' '}{draw(include_targets)}{draw(comments)}"


@st.composite
def broken(draw: st.DrawFn, line: st.SearchStrategy[str]) -> str:
    # A valid line with one character deleted, replaced or inserted: the near misses people type.
    text = draw(line)
    at = draw(st.integers(0, len(text)))
    noise = draw(st.sampled_from(list(",=#._ -Aa0\t\r\x00\x0c\u00e9\u2028\\\"'")) | st.characters())
    how = draw(st.sampled_from(["delete", "replace", "insert"]))
    if how == "insert" or not text:
        return text[:at] + noise + text[at:]
    at = min(at, len(text) - 1)
    return text[:at] + (noise if how == "replace" else "") + text[at + 1 :]


lines = st.one_of(
    assignment(),
    include_line(),
    comments,
    ws,
    broken(assignment()),
    broken(include_line()),
    st.text(max_size=20),
    st.text(alphabet=st.sampled_from(list("abc_.=, #\t")), max_size=20),
)
texts = st.tuples(st.lists(lines, max_size=6), st.sampled_from(["\n", "\r\n"])).map(lambda t: t[1].join(t[0]))


# --- properties --------------------------------------------------------------------------------


def check_one(text: str, base: Path) -> None:
    try:
        parsed = conf.parse_conf_text(text, PATH, base_dir=base)
    except ConfigError as exc:
        message = str(exc)
        match = ERROR_RE.match(message)
        assert match, message
        assert "\n" not in message, message
        assert message.startswith(f"{exc.path}:{exc.line}: ")
        if match["path"] == PATH:
            assert 1 <= int(match["line"]) <= text.count("\n") + 1, message
        else:  # an error inside an included file, or at the include line of one
            assert Path(match["path"]).resolve().is_relative_to(base.resolve()), message
        return
    assert isinstance(parsed, conf.Conf)
    for op, entry in parsed.entries.items():
        assert entry.op == op != "default"
        assert OP_RE.fullmatch(op)
        assert entry.routes and all(ROUTE_RE.fullmatch(route) for route in entry.routes)
        assert len(set(entry.routes)) == len(entry.routes)
        assert entry.origin.line >= 1


@FUZZ
@given(batch=st.lists(texts, min_size=TEXTS_PER_EXAMPLE, max_size=TEXTS_PER_EXAMPLE))
def test_parser_raises_only_located_conf_errors(batch: list[str], base_dir: Path) -> None:
    for text in batch:
        check_one(text, base_dir)


@ROUND_TRIP
@given(
    table=st.dictionaries(ops.filter(lambda op: op not in ("default", "include")), chains, max_size=8),
    default=st.none() | chains,
    decorations=st.lists(st.tuples(ws, ws, ws, comments, st.booleans()), min_size=10, max_size=10),
)
def test_well_formed_confs_round_trip(
    table: dict[str, list[str]], default: list[str] | None, decorations: list[tuple[str, str, str, str, bool]]
) -> None:
    items = list(table.items()) + ([("default", default)] if default else [])
    out, lines_of = [], {}
    for (op, chain), (a, b, c, comment, blank_before) in zip(items, decorations * 2, strict=False):
        if blank_before:
            out.append(f"{a}{comment}")
        out.append(f"{a}{op}{b}={c}{(b + ',' + c).join(chain)}{a}{comment}")
        lines_of[op] = len(out)
    parsed = conf.parse_conf_text("\n".join(out) + "\n", PATH)
    assert {op: list(entry.routes) for op, entry in parsed.entries.items()} == {
        k: v for k, v in items if k != "default"
    }
    assert {op: entry.origin.line for op, entry in parsed.entries.items()} == {
        op: line for op, line in lines_of.items() if op != "default"
    }
    if default:
        assert parsed.default is not None
        assert (list(parsed.default.routes), parsed.default.origin.line) == (default, lines_of["default"])
    else:
        assert parsed.default is None
