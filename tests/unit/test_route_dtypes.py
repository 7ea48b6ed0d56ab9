"""Dtype lists on provider routes (torch_fl/_chain.py): their syntax in a conf line and in FLAGOS_OP_<op>, their
errors, and how the resolver turns them into a route that serves some dtypes and a builtin route for the rest."""

from __future__ import annotations

import pytest
import torch_fl_conf as conf  # registered by conftest (loaded by path)
import torch_fl_env as env
from test_routing import gems, problems, table
from torch_fl_errors import ConfigError


def parse(text: str) -> conf.Conf:
    return conf.parse_conf_text(text, "routes.conf")


def test_a_conf_line_names_the_dtypes_of_a_provider() -> None:
    entry = parse("mul.Tensor = flaggems[float32, bfloat16], native\n").entries["mul.Tensor"]
    assert entry.routes == ("flaggems", "native")
    assert entry.gates == (("flaggems", ("float32", "bfloat16")),)
    assert parse("relu = flaggems,native\n").entries["relu"].gates == ()


def test_an_override_names_them_the_same_way() -> None:
    settings = env.read_settings({"FLAGOS_OP_mul__Tensor": "flaggems[float16],native"})
    (one,) = settings.overrides
    assert one.routes == ("flaggems", "native") and one.gates == (("flaggems", ("float16",)),)


@pytest.mark.parametrize(
    ("chain", "token", "way_out"),
    [
        ("flaggems[float32, native", "not closed", "end it with ']'"),
        ("flaggems]float32], native", "no '['", "flaggems[float32, bfloat16]"),
        ("flaggems[], native", "is empty", "name the dtypes"),
        ("flaggems[fp16], native", "unknown dtype or input requirement 'fp16'", "dtypes are torch's names"),
        ("flaggems[float33], native", "nearest: float32", "torch's names"),
        ("flaggems[float32, float32], native", "appears twice", "list each dtype once"),
        ("native[float32]", "native serves every call", "remove the list"),
        ("flaggems[float32, contigous], native", "nearest: contiguous", "input requirements: contiguous, no_0dim"),
        ("flaggems[no0dim], native", "'no0dim' in the list of 'flaggems'; nearest: no_0dim", "same_shape"),
        ("flaggems[contiguous, contiguous], native", "appears twice", "list each input requirement once"),
        ("cpu[contiguous]", "cpu serves every call", "remove the list"),
        ("flaggems[contiguous]", "is the last route, so the calls it leaves out", "'flaggems[contiguous], native'"),
        ("flaggems[float32]", "is the last route", "'flaggems[float32], native'"),
        ("flaggems[float32] x, native", "text after the dtype list", "end the route at ']'"),
    ],
)
def test_a_bad_dtype_list_names_the_culprit_and_a_way_out(chain: str, token: str, way_out: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(f"# c\nmul.Tensor = {chain}\n")
    message = str(caught.value)
    assert message.startswith("routes.conf:2: ") and token in message and way_out in message
    with pytest.raises(ConfigError) as caught:
        env.read_settings({"FLAGOS_OP_mul__Tensor": chain})
    message = str(caught.value)
    assert f"FLAGOS_OP_mul__Tensor={chain!r}" in message and token in message and way_out in message


def test_the_resolved_route_serves_its_dtypes_and_sends_the_rest_native() -> None:
    t = table("mul.Tensor = flaggems[float32, bfloat16], native\n", flaggems=gems("mul.Tensor"))
    r = t.route_for("mul.Tensor")
    assert (r.route, r.dtypes, r.otherwise) == ("flaggems", ("float32", "bfloat16"), "native")
    assert r.serves() == "flaggems for float32, bfloat16 (native otherwise)"


def test_an_unavailable_gated_provider_leaves_the_next_route_ungated() -> None:
    t = table("mul.Tensor = flaggems[float32], cpu\n", flaggems=gems("mul.Tensor", reason="no GPU"))
    r = t.route_for("mul.Tensor")
    assert (r.route, r.dtypes, r.otherwise) == ("cpu", (), None)


def test_the_dtypes_left_out_may_not_go_to_a_second_provider() -> None:
    found = problems(
        "mul.Tensor = flaggems[float32], other, native\n", flaggems=gems("mul.Tensor"), other=gems("mul.Tensor")
    )
    assert len(found) == 1 and "calls one provider per operator" in found[0]
    assert "'flaggems[float32], native'" in found[0]


def test_a_gated_default_gates_every_operator_the_provider_takes() -> None:
    t = table("default = flaggems[bfloat16], native\n", flaggems=gems("relu", "abs"))
    assert {op: (t.route_for(op).route, t.route_for(op).dtypes) for op in ("relu", "abs", "sub.Tensor")} == {
        "relu": ("flaggems", ("bfloat16",)),
        "abs": ("flaggems", ("bfloat16",)),
        "sub.Tensor": ("native", ()),
    }


def test_an_override_replaces_the_conf_line_and_its_dtypes() -> None:
    overrides = env.read_settings({"FLAGOS_OP_mul__Tensor": "flaggems"}).overrides
    t = table("mul.Tensor = flaggems[float32], native\n", overrides, flaggems=gems("mul.Tensor"))
    assert (t.route_for("mul.Tensor").route, t.route_for("mul.Tensor").dtypes) == ("flaggems", ())


def test_a_list_names_input_requirements_beside_its_dtypes() -> None:
    entry = parse("mul.Tensor = flaggems[same_shape, float32, contiguous, bfloat16], native\n").entries["mul.Tensor"]
    # dtypes as written, then the requirements in one order: the conf a qualification writes reads the same
    assert entry.gates == (("flaggems", ("float32", "bfloat16", "contiguous", "same_shape")),)
    (one,) = env.read_settings(
        {"FLAGOS_OP_mul__Tensor": "flaggems[float32,bfloat16,contiguous,same_shape],native"}
    ).overrides
    assert one.gates == entry.gates
    mixed = parse("mul.Tensor = flaggems[same_dtype, bfloat16, same_shape], native\n").entries["mul.Tensor"]
    assert mixed.gates == (("flaggems", ("bfloat16", "same_shape", "same_dtype")),)


def test_the_resolved_route_keeps_its_requirements_apart_from_its_dtypes() -> None:
    t = table("mul.Tensor = flaggems[float32, contiguous, no_0dim], native\n", flaggems=gems("mul.Tensor"))
    r = t.route_for("mul.Tensor")
    assert (r.dtypes, r.requires, r.otherwise, r.gated()) == (("float32",), ("contiguous", "no_0dim"), "native", True)
    assert r.serves() == "flaggems for float32 with contiguous, no_0dim (native otherwise)"
    only = table("mul.Tensor = flaggems[contiguous], cpu\n", flaggems=gems("mul.Tensor")).route_for("mul.Tensor")
    assert (only.dtypes, only.requires, only.otherwise) == ((), ("contiguous",), "cpu")
    assert only.serves() == "flaggems with contiguous (cpu otherwise)"
    plain = table("mul.Tensor = flaggems, native\n", flaggems=gems("mul.Tensor")).route_for("mul.Tensor")
    assert not plain.gated() and plain.serves() == "flaggems"


def test_the_calls_a_requirement_leaves_out_may_not_go_to_a_second_provider() -> None:
    found = problems(
        "mul.Tensor = flaggems[contiguous], other, native\n", flaggems=gems("mul.Tensor"), other=gems("mul.Tensor")
    )
    assert len(found) == 1 and "the calls flaggems[contiguous] leaves out" in found[0]
    assert "'flaggems[contiguous], native'" in found[0]
