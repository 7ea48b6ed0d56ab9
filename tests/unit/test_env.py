"""torch_fl/_env.py: FLAGOS_* variables, their errors, and FLAGOS_OP_ name decoding."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch_fl_env as env  # registered by conftest (loaded by path)
from torch_fl_errors import ConfigError


def read(**variables: str) -> env.Settings:
    return env.read_settings(variables)


def error_of(**variables: str) -> str:
    with pytest.raises(ConfigError) as caught:
        env.read_settings(variables)
    return str(caught.value)


def test_defaults_with_nothing_set() -> None:
    settings = env.read_settings({"PATH": "/usr/bin", "HOME": "/root"})
    assert settings == env.Settings(accelerator=None, backend_config=None, overrides=(), log=frozenset(), emu_devices=2)


# --- FLAGOS_ACCELERATOR --------------------------------------------------------------------


@pytest.mark.parametrize("value", ["cpu", "cuda", "dcu", " CUDA "])
def test_accelerator_choices(value: str) -> None:
    assert read(FLAGOS_ACCELERATOR=value).accelerator == value.strip().lower()


def test_accelerator_empty_means_best_available() -> None:
    assert read(FLAGOS_ACCELERATOR="").accelerator is None


def test_accelerator_error_names_variable_value_and_choices() -> None:
    message = error_of(FLAGOS_ACCELERATOR="rocm")
    assert "FLAGOS_ACCELERATOR='rocm'" in message
    assert "cpu, cuda, dcu" in message


# --- FLAGOS_BACKEND_CONFIG -----------------------------------------------------------------


def test_backend_config_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "my.conf"
    path.write_text("default = native\n")
    assert read(FLAGOS_BACKEND_CONFIG=str(path)).backend_config == str(path)


def test_backend_config_missing_file(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.conf")
    message = error_of(FLAGOS_BACKEND_CONFIG=missing)
    assert f"FLAGOS_BACKEND_CONFIG={missing!r} does not exist" in message
    assert "path of a route conf file" in message


def test_backend_config_directory(tmp_path: Path) -> None:
    assert "is a directory" in error_of(FLAGOS_BACKEND_CONFIG=str(tmp_path))


# --- FLAGOS_LOG ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", frozenset()),
        ("dispatch", {"dispatch"}),
        ("dispatch, fallback", {"dispatch", "fallback"}),
        ("config,,", {"config"}),
        ("all", {"dispatch", "fallback", "config", "replay"}),
    ],
)
def test_log_categories(value: str, expected: set[str]) -> None:
    assert read(FLAGOS_LOG=value).log == frozenset(expected)


def test_log_unknown_category() -> None:
    message = error_of(FLAGOS_LOG="dispatch,trace")
    assert "FLAGOS_LOG='dispatch,trace'" in message
    assert "trace" in message
    assert "dispatch, fallback, config" in message


# --- the replay settings ---------------------------------------------------------------------


def test_replay_defaults() -> None:
    s = read()
    assert (s.replay, s.replay_verify, s.replay_capacity) == (True, False, 4096)


def test_replay_switches_and_capacity() -> None:
    s = read(FLAGOS_FLAGGEMS_REPLAY="0", FLAGOS_FLAGGEMS_VERIFY="1", FLAGOS_REPLAY_CACHE_SIZE=" 16 ")
    assert (s.replay, s.replay_verify, s.replay_capacity) == (False, True, 16)


@pytest.mark.parametrize(
    ("var", "value", "says"),
    [
        ("FLAGOS_FLAGGEMS_REPLAY", "off", "is not 0 or 1"),
        ("FLAGOS_FLAGGEMS_VERIFY", "true", "is not 0 or 1"),
        ("FLAGOS_REPLAY_CACHE_SIZE", "many", "is not an integer"),
        ("FLAGOS_REPLAY_CACHE_SIZE", "0", "is out of range"),
    ],
)
def test_bad_replay_settings_name_the_variable(var: str, value: str, says: str) -> None:
    message = error_of(**{var: value})
    assert f"{var}={value!r} {says}" in message


# --- FLAGOS_EMU_DEVICES ----------------------------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [("1", 1), ("16", 16), (" 4 ", 4), ("", 2)])
def test_emu_devices_in_range(value: str, expected: int) -> None:
    assert read(FLAGOS_EMU_DEVICES=value).emu_devices == expected


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("0", "out of range"),
        ("17", "out of range"),
        ("-1", "out of range"),
        ("two", "not an integer"),
        ("2.5", "not an integer"),
    ],
)
def test_emu_devices_rejected(value: str, problem: str) -> None:
    message = error_of(FLAGOS_EMU_DEVICES=value)
    assert f"FLAGOS_EMU_DEVICES={value!r} is {problem}" in message
    assert "from 1 to 16" in message


# --- FLAGOS_OP_* -----------------------------------------------------------------------------


def test_overrides_sorted_by_variable_with_chains() -> None:
    settings = read(FLAGOS_OP_relu="native", FLAGOS_OP_add__Tensor=" flaggems ,native ")
    assert settings.overrides == (
        env.Override("FLAGOS_OP_add__Tensor", "add__Tensor", ("flaggems", "native")),
        env.Override("FLAGOS_OP_relu", "relu", ("native",)),
    )


def test_empty_override_is_unset() -> None:
    assert read(FLAGOS_OP_relu="  ").overrides == ()


@pytest.mark.parametrize("value", ["FlagGems", "flaggems,", "flaggems native", "native;cpu"])
def test_override_bad_route(value: str) -> None:
    message = error_of(FLAGOS_OP_add__Tensor=value)
    assert f"FLAGOS_OP_add__Tensor={value!r} has bad route name" in message
    assert "'flaggems, native'" in message


def test_override_repeated_route() -> None:
    assert "repeats a route" in error_of(FLAGOS_OP_relu="native, native")


def test_override_without_op_name() -> None:
    message = error_of(FLAGOS_OP_="native")
    assert "FLAGOS_OP_='native' names no operator" in message
    assert "FLAGOS_OP_add__Tensor" in message  # the encoding rule


# --- misspelt and retired variables ----------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "suggestion"),
    [
        ("FLAGOS_ACCELERATR", "FLAGOS_ACCELERATOR"),
        ("FLAGOS_ACCELERATORS", "FLAGOS_ACCELERATOR"),
        ("flagos_accelerator", "FLAGOS_ACCELERATOR"),
        ("FLAGOS_BACKEND_CONF", "FLAGOS_BACKEND_CONFIG"),
        ("FLAGOS_LOGS", "FLAGOS_LOG"),
        ("FLAGOS_EMU_DEVICE", "FLAGOS_EMU_DEVICES"),
        ("FLAGOS_OPS_add__Tensor", "FLAGOS_OP_add__Tensor"),
        ("FLAGOS_OPadd__Tensor", "FLAGOS_OP_add__Tensor"),
        ("flagos_op_relu", "FLAGOS_OP_relu"),
    ],
)
def test_typo_suggests_the_right_name(name: str, suggestion: str) -> None:
    message = error_of(**{name: "x"})
    assert f"{name} is not a flagos variable; did you mean {suggestion}?" in message


@pytest.mark.parametrize("name", ["FLAGOS_HOME", "FLAGOS_DEBUG", "FLAGOS_BUILD_TYPE", "FLAGOSX"])
def test_unrelated_flagos_variables_are_left_alone(name: str) -> None:
    assert read(**{name: "1"}).overrides == ()


def test_retired_use_flaggems_says_what_replaced_it() -> None:
    message = error_of(FLAGOS_USE_FLAGGEMS="1")
    assert "FLAGOS_USE_FLAGGEMS='1' is set but it no longer selects anything" in message
    assert "FLAGOS_OP_add__Tensor=flaggems" in message


def test_all_problems_are_reported_together() -> None:
    message = error_of(FLAGOS_ACCELERATOR="tpu", FLAGOS_EMU_DEVICES="99", FLAGOS_LOGS="dispatch")
    heading, *lines = message.splitlines()
    assert heading == "3 problems in the flagos route configuration:"
    assert len(lines) == 3
    assert any("FLAGOS_ACCELERATOR" in line for line in lines)
    assert any("FLAGOS_EMU_DEVICES" in line for line in lines)
    assert any("did you mean FLAGOS_LOG?" in line for line in lines)


# --- decode_op --------------------------------------------------------------------------------

KNOWN = {
    "add.Tensor",
    "add_.Tensor",
    "add.Scalar",
    "relu",
    "__and__.Tensor",
    "__and__.Scalar",
    "_to_copy",
    "sum.dim_IntList",
    "abs_",
}


@pytest.mark.parametrize(
    ("encoded", "op"),
    [
        ("add__Tensor", "add.Tensor"),
        ("add___Tensor", "add_.Tensor"),
        ("__and____Tensor", "__and__.Tensor"),
        ("relu", "relu"),
        ("_to_copy", "_to_copy"),
        ("sum__dim_IntList", "sum.dim_IntList"),
        ("abs_", "abs_"),
    ],
)
def test_decode_op(encoded: str, op: str) -> None:
    assert env.decode_op(encoded, KNOWN) == op


def test_op_variable_is_the_prefix_and_the_encoded_name() -> None:
    assert env.op_variable("add.Tensor") == "FLAGOS_OP_add__Tensor"
    assert env.op_variable("add_.Tensor") == env.OP_PREFIX + env.encode_op("add_.Tensor") == "FLAGOS_OP_add___Tensor"
    assert env.decode_op(env.op_variable("add_.Tensor")[len(env.OP_PREFIX) :], KNOWN) == "add_.Tensor"


def test_decode_op_ambiguous_lists_every_reading() -> None:
    with pytest.raises(ConfigError) as caught:
        env.decode_op("add___Tensor", KNOWN | {"add._Tensor"})
    message = str(caught.value)
    assert message.startswith("FLAGOS_OP_add___Tensor is ambiguous: it can name add._Tensor, add_.Tensor")
    assert "FLAGOS_BACKEND_CONFIG" in message


def test_decode_op_unknown_lists_nearest_names_and_the_rule() -> None:
    with pytest.raises(ConfigError) as caught:
        env.decode_op("ad__Tensor", KNOWN)
    message = str(caught.value)
    assert message.startswith("FLAGOS_OP_ad__Tensor names no operator; nearest: add.Tensor (FLAGOS_OP_add__Tensor)")
    assert "add.Tensor -> FLAGOS_OP_add__Tensor" in message


def test_decode_op_nearest_is_capped_at_five() -> None:
    known = {f"op{i}.Tensor" for i in range(20)}
    with pytest.raises(ConfigError) as caught:
        env.decode_op("op__Tensor", known)
    nearest = str(caught.value).split("nearest: ")[1].split("; ")[0]
    assert nearest.count("FLAGOS_OP_") == 5


def test_decode_op_hint_ignores_case() -> None:
    with pytest.raises(ConfigError) as caught:
        env.decode_op("RELU", KNOWN)
    assert "names no operator; nearest: relu (FLAGOS_OP_relu)" in str(caught.value)
    with pytest.raises(ConfigError) as caught:
        env.decode_op("ADD__TENSOR", KNOWN)
    assert "nearest: add.Tensor (FLAGOS_OP_add__Tensor)" in str(caught.value)


def test_decode_op_no_similar_name() -> None:
    with pytest.raises(ConfigError, match="no operator has a similar name"):
        env.decode_op("zzzzzzzzzzzz", KNOWN)


def test_every_torch_op_round_trips() -> None:
    torch = pytest.importorskip("torch")
    known = set()
    for schema in torch._C._jit_get_all_schemas():
        if schema.name.startswith("aten::"):
            name = schema.name[len("aten::") :]
            known.add(f"{name}.{schema.overload_name}" if schema.overload_name else name)
    assert len(known) > 1000
    failures = {op for op in known if env.decode_op(env.encode_op(op), known) != op}
    assert not failures


def test_collecting_read_counts_bad_values_as_unset() -> None:
    settings, problems = env.read_settings_collecting(
        {"FLAGOS_LOG": "nope", "FLAGOS_EMU_DEVICES": "x", "FLAGOS_OP_relu": "cpu", "FLAGOS_EMU_TRAP": "2"}
    )
    assert settings.log == frozenset() and settings.emu_devices == env.EMU_DEVICES_DEFAULT
    assert settings.emu_trap is False
    assert [o.var for o in settings.overrides] == ["FLAGOS_OP_relu"]
    assert len(problems) == 3 and any("FLAGOS_EMU_TRAP='2' is not 0 or 1" in p for p in problems)


@pytest.mark.parametrize(("value", "on"), [("1", True), ("0", False), ("", False)])
def test_emu_trap(value: str, on: bool) -> None:
    assert env.read_settings({"FLAGOS_EMU_TRAP": value}).emu_trap is on


# --- FLAGOS_CONF ---------------------------------------------------------------------------


def test_a_shipped_conf_is_chosen_by_name() -> None:
    assert read(FLAGOS_CONF="flaggems").conf_name == "flaggems"
    assert read(FLAGOS_CONF=" flaggems_tuned ").conf_name == "flaggems_tuned"
    assert read(FLAGOS_CONF="").conf_name is None


def test_a_conf_name_is_not_a_path() -> None:
    message = error_of(FLAGOS_CONF="./my.conf")
    assert "FLAGOS_CONF='./my.conf' is not a conf name" in message and "FLAGOS_BACKEND_CONFIG=PATH" in message


def test_a_conf_name_and_a_conf_file_cannot_both_be_given(tmp_path: Path) -> None:
    path = tmp_path / "x.conf"
    path.write_text("default = native\n")
    message = error_of(FLAGOS_CONF="flaggems", FLAGOS_BACKEND_CONFIG=str(path))
    assert "both choose the conf; unset one of the two" in message
