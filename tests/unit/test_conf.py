"""torch_fl/routing/conf.py: syntax, includes and error messages of the route conf format."""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

import pytest
import torch_fl_conf as conf  # registered by conftest (loaded by path)
from torch_fl_errors import ConfigError


def parse(text: str, path: str = "routes.conf") -> conf.Conf:
    return conf.parse_conf_text(text, path)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def routes(parsed: conf.Conf) -> dict[str, tuple[str, ...]]:
    return {op: entry.routes for op, entry in parsed.entries.items()}


# --- accepted syntax -----------------------------------------------------------------------


def test_entries_chains_and_origins() -> None:
    parsed = parse("add.Tensor = native\nrelu = flaggems, native\n")
    assert routes(parsed) == {"add.Tensor": ("native",), "relu": ("flaggems", "native")}
    assert parsed.entries["relu"].origin == conf.Origin("routes.conf", 2)
    assert str(parsed.entries["relu"].origin) == "routes.conf:2"
    assert parsed.default is None


def test_comments_blank_lines_and_free_whitespace() -> None:
    text = "# full line comment\n\n   \n\t add.Tensor\t=\tcuda   # trailing comment\nrelu=flaggems,native#x\n"
    parsed = parse(text)
    assert routes(parsed) == {"add.Tensor": ("cuda",), "relu": ("flaggems", "native")}
    assert parsed.entries["add.Tensor"].origin.line == 4


@pytest.mark.parametrize("op", ["add.Tensor", "relu", "add_.Tensor", "__and__.Tensor", "_to_copy", "sum.dim_IntList"])
def test_aten_name_shapes(op: str) -> None:
    assert routes(parse(f"{op} = native")) == {op: ("native",)}


def test_default_line() -> None:
    parsed = parse("add.Tensor = native\ndefault = flaggems ,  native\n")
    assert parsed.default == conf.ConfEntry("default", ("flaggems", "native"), conf.Origin("routes.conf", 2))
    assert "default" not in parsed.entries


def test_crlf_and_bom_are_tolerated(tmp_path: Path) -> None:
    path = tmp_path / "win.conf"
    path.write_bytes(b"\xef\xbb\xbfadd.Tensor = native\r\n# c\r\nrelu = cpu\r\n")
    assert routes(conf.parse_conf(path)) == {"add.Tensor": ("native",), "relu": ("cpu",)}


def test_op_named_include_is_an_assignment() -> None:
    # `include = x` has an '=' right after the keyword: it is an (unknown) operator, not an include.
    assert routes(parse("include = native")) == {"include": ("native",)}


def test_entries_keep_first_insertion_order() -> None:
    parsed = parse("b = native\na = native\nc = native\n")
    assert list(parsed.entries) == ["b", "a", "c"]


# --- errors: each names path:line, the offending token, and a way out ------------------------


@pytest.mark.parametrize(
    ("text", "line", "token"),
    [
        ("add.Tensor native", 1, "'add.Tensor native'"),
        ("# c\n= native", 2, "empty operator name"),
        ("add.Tensor =", 1, "empty route"),
        ("add.Tensor =   # nothing", 1, "empty route"),
        ("relu = native\nadd.Tensor = Native", 2, "'Native'"),
        ("add.Tensor = flag-gems", 1, "'flag-gems'"),
        ("add.Tensor = flaggems native", 1, "'flaggems native'"),
        ("add.Tensor = native,", 1, "trailing comma"),
        ("add.Tensor = flaggems,,native", 1, "empty route between commas"),
        ("add.Tensor = , native", 1, "empty route between commas"),
        ("add Tensor = native", 1, "'add Tensor'"),
        ("add.Tensor.x = native", 1, "'add.Tensor.x'"),
        ("add.Tensor = native, native", 1, "'native' appears twice"),
        ("add.Tensor = native = cpu", 1, "'native = cpu'"),
        ("\n\ninclude", 3, "'include' needs a file name"),
    ],
)
def test_malformed_lines(text: str, line: int, token: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(text)
    message = str(caught.value)
    assert message.startswith(f"routes.conf:{line}: ")
    assert token in message
    assert "; " in message  # the way out follows the problem
    assert (caught.value.path, caught.value.line) == ("routes.conf", line)


def test_control_characters_are_shown_escaped() -> None:
    with pytest.raises(ConfigError, match=r"\\x1b"):
        parse("add.Tensor = \x1b[31m")


def test_duplicate_in_one_file_names_both_lines() -> None:
    with pytest.raises(ConfigError) as caught:
        parse("add.Tensor = native\nrelu = native\n\nadd.Tensor = cpu\n")
    message = str(caught.value)
    assert message.startswith("routes.conf:4: 'add.Tensor' is already set at routes.conf:1")


def test_duplicate_default_in_one_file() -> None:
    with pytest.raises(ConfigError, match=r"^routes.conf:2: 'default' is already set at routes.conf:1"):
        parse("default = native\ndefault = cpu\n")


def test_config_error_is_a_value_error() -> None:
    assert issubclass(ConfigError, ValueError)


# --- files and includes ------------------------------------------------------------------


def test_include_is_relative_to_the_including_file(tmp_path: Path) -> None:
    write(tmp_path / "vendor" / "common.conf", "relu = native\n")
    top = write(tmp_path / "vendor" / "top.conf", "include common.conf\nadd.Tensor = cpu\n")
    nested = write(tmp_path / "user.conf", "include vendor/top.conf\n")
    parsed = conf.parse_conf(nested)
    assert routes(parsed) == {"relu": ("native",), "add.Tensor": ("cpu",)}
    assert parsed.entries["relu"].origin == conf.Origin(str(tmp_path / "vendor" / "common.conf"), 1)
    assert parsed.files == (str(nested), str(top), str(tmp_path / "vendor" / "common.conf"))


def test_later_lines_override_included_ones(tmp_path: Path) -> None:
    write(tmp_path / "base.conf", "default = flaggems, native\nadd.Tensor = flaggems\nrelu = flaggems\n")
    top = write(tmp_path / "top.conf", "relu = native\ninclude base.conf\nadd.Tensor = native\ndefault = native\n")
    parsed = conf.parse_conf(top)
    # add.Tensor: the line after the include wins; relu: the include comes after the top's line.
    assert routes(parsed) == {"relu": ("flaggems",), "add.Tensor": ("native",)}
    assert parsed.entries["add.Tensor"].origin == conf.Origin(str(top), 3)
    assert parsed.default is not None and parsed.default.origin == conf.Origin(str(top), 4)


def test_same_op_in_two_sibling_includes_last_wins(tmp_path: Path) -> None:
    write(tmp_path / "a.conf", "relu = cpu\n")
    write(tmp_path / "b.conf", "relu = native\n")
    top = write(tmp_path / "top.conf", "include a.conf\ninclude b.conf\n")
    assert routes(conf.parse_conf(top)) == {"relu": ("native",)}


def test_diamond_include_lists_each_file_once(tmp_path: Path) -> None:
    write(tmp_path / "leaf.conf", "relu = native\n")
    write(tmp_path / "a.conf", "include leaf.conf\n")
    write(tmp_path / "b.conf", "include leaf.conf\n")
    top = write(tmp_path / "top.conf", "include a.conf\ninclude b.conf\n")
    files = conf.parse_conf(top).files
    assert [Path(f).name for f in files] == ["top.conf", "a.conf", "leaf.conf", "b.conf"]


def test_include_cycle_shows_the_chain(tmp_path: Path) -> None:
    a = write(tmp_path / "a.conf", "include sub/b.conf\n")
    write(tmp_path / "sub" / "b.conf", "relu = native\ninclude ../a.conf\n")
    with pytest.raises(ConfigError) as caught:
        conf.parse_conf(a)
    message = str(caught.value)
    b = os.path.join(str(tmp_path), "sub", "b.conf")
    assert message.startswith(f"{b}:2: include cycle: {a} -> {b} -> {a}")


def test_self_include_is_a_cycle(tmp_path: Path) -> None:
    a = write(tmp_path / "a.conf", "include ./a.conf\n")
    with pytest.raises(ConfigError, match=r":1: include cycle: "):
        conf.parse_conf(a)


def test_missing_include_points_at_the_include_line(tmp_path: Path) -> None:
    top = write(tmp_path / "top.conf", "relu = native\ninclude nowhere.conf\n")
    with pytest.raises(ConfigError) as caught:
        conf.parse_conf(top)
    message = str(caught.value)
    assert message.startswith(f"{top}:2: cannot read '{tmp_path / 'nowhere.conf'}': no such file")
    assert "relative to the including file" in message


def test_include_of_a_directory_or_fifo_is_refused(tmp_path: Path) -> None:
    (tmp_path / "dir.conf").mkdir()
    os.mkfifo(tmp_path / "pipe.conf")
    top = write(tmp_path / "top.conf", "include dir.conf\n")
    with pytest.raises(ConfigError, match=r"top.conf:1: cannot read .*dir.conf"):
        conf.parse_conf(top)
    write(top, "include pipe.conf\n")
    result: list[BaseException] = []
    worker = threading.Thread(target=lambda: result.append(pytest.raises(ConfigError, conf.parse_conf, top).value))
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive(), "reading a FIFO blocked"
    assert "not a regular file" in str(result[0])


def test_missing_top_level_file_is_line_zero(tmp_path: Path) -> None:
    missing = tmp_path / "none.conf"
    with pytest.raises(ConfigError) as caught:
        conf.parse_conf(missing)
    assert str(caught.value).startswith(f"{missing}:0: cannot read")


def test_errors_inside_included_files_name_that_file(tmp_path: Path) -> None:
    inner = write(tmp_path / "inner.conf", "\nrelu native\n")
    top = write(tmp_path / "top.conf", "include inner.conf\n")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(inner))}:2: no '='"):
        conf.parse_conf(top)


def test_non_utf8_byte_reports_its_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.conf"
    path.write_bytes(b"relu = native\n# caf\xe9\n")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}:2: byte 0xe9 is not UTF-8"):
        conf.parse_conf(path)


def test_parse_conf_text_resolves_includes_against_base_dir(tmp_path: Path) -> None:
    write(tmp_path / "base.conf", "relu = cpu\n")
    parsed = conf.parse_conf_text("include base.conf\n", base_dir=tmp_path)
    assert routes(parsed) == {"relu": ("cpu",)}
    assert parsed.files == (str(tmp_path / "base.conf"),)
    with pytest.raises(ConfigError, match=r"^<string>:1: cannot read"):
        conf.parse_conf_text("include base.conf\n", base_dir=tmp_path / "elsewhere")


def test_collecting_parse_keeps_good_lines_and_every_problem(tmp_path: Path) -> None:
    text = "add.Tensor = native\ngarbage here\nrelu = ,\ninclude nowhere.conf\nabs = cpu\n"
    path = write(tmp_path / "mixed.conf", text)
    parsed, problems = conf.parse_conf_collecting(path)
    assert routes(parsed) == {"add.Tensor": ("native",), "abs": ("cpu",)}
    assert [(p.path, p.line) for p in problems] == [(str(path), 2), (str(path), 3), (str(path), 4)]
    with pytest.raises(ConfigError) as caught:  # the raising form reports the first
        conf.parse_conf(path)
    assert caught.value.line == 2


def test_collecting_parse_of_a_missing_file_is_one_problem(tmp_path: Path) -> None:
    parsed, problems = conf.parse_conf_collecting(tmp_path / "absent.conf")
    assert parsed.entries == {} and [p.line for p in problems] == [0]


def test_qualified_names_the_provider_version_of_the_routes() -> None:
    parsed = parse("qualified flaggems 5.0.2\ndefault = native\nexp = flaggems, native\n")
    assert parsed.qualified == {"flaggems": "5.0.2"}
    assert parsed.entries["exp"].routes == ("flaggems", "native")
    assert parse("default = native\n").qualified == {}


@pytest.mark.parametrize("line", ["qualified", "qualified flaggems", "qualified Flag 1 2"])
def test_a_malformed_qualified_line_says_how_to_write_it(line: str) -> None:
    with pytest.raises(ConfigError, match="write 'qualified PROVIDER VERSION'"):
        parse(line + "\n")
