"""torch_fl/routing/table.py: conf + overrides -> route table, with fake providers."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import pytest
import torch_fl_conf as conf  # registered by conftest (loaded by path)
import torch_fl_env as env
import torch_fl_routing as routing
from torch_fl_errors import ConfigError

KNOWN = frozenset(
    {
        "add.Tensor",
        "add_.Tensor",
        "sub.Tensor",
        "mul.Tensor",
        "relu",
        "abs",
        "_softmax",
        "native_layer_norm",
        "empty.memory_format",
        "copy_",
        "view",
        "as_strided",
        "transpose.int",
    }
)
PINNED = {"empty.memory_format": "allocates flagos memory", "copy_": "moves bytes between devices"}
VIEWS = frozenset({"view", "as_strided", "transpose.int"})


@dataclass
class FakeProvider:
    kernels: set[str]
    reason: str | None = None
    asked: list[str] = field(default_factory=list)

    def unavailable_reason(self) -> str | None:
        self.asked.append("unavailable_reason")
        return self.reason

    def supports(self, op: str) -> bool:
        return op in self.kernels

    def ops(self) -> Iterable[str]:
        return iter(self.kernels)


def gems(*kernels: str, reason: str | None = None) -> FakeProvider:
    return FakeProvider(set(kernels), reason)


def table(text: str = "", overrides: tuple[env.Override, ...] = (), **providers: FakeProvider) -> routing.RouteTable:
    return routing.resolve(
        conf.parse_conf_text(text, "r.conf"),
        overrides,
        known_ops=KNOWN,
        providers=providers,
        pinned_native=PINNED,
        view_ops=VIEWS,
        decode=env.decode_op,
    )


def problems(text: str = "", overrides: tuple[env.Override, ...] = (), **providers: FakeProvider) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        table(text, overrides, **providers)
    found = caught.value.problems
    if len(found) == 1:  # one problem reads as itself
        assert str(caught.value) == found[0]
    else:
        assert str(caught.value).splitlines()[1:] == [f"  {p}" for p in found]
    return list(caught.value.problems)


def override(var: str, *routes: str) -> env.Override:
    return env.Override(var=var, encoded=var[len("FLAGOS_OP_") :], routes=routes)


# --- basics ----------------------------------------------------------------------------------


def test_no_conf_lines_means_builtin_native_default() -> None:
    routes = table()
    assert routes.default == routing.Resolved("default", "native", "built-in default", ("native",), ())
    assert routes.entries == {}
    assert routes.route_for("relu") == routing.Resolved("relu", "native", "built-in default", ("native",), ())


def test_explicit_entry_and_origin() -> None:
    routes = table("# header\nrelu = cpu\n")
    assert routes.route_for("relu") == routing.Resolved("relu", "cpu", "r.conf:2", ("cpu",), ())
    assert routes.route_for("abs").route == "native"


def test_cuda_is_an_alias_of_native() -> None:
    resolved = table("add.Tensor = cuda\n").route_for("add.Tensor")
    assert (resolved.route, resolved.chain) == ("native", ("native",))


def test_resolve_is_pure() -> None:
    parsed = conf.parse_conf_text("relu = flaggems, native\ndefault = flaggems, native\n", "r.conf")
    before = repr(parsed)
    args = {
        "known_ops": KNOWN,
        "providers": {"flaggems": gems("relu", "abs")},
        "pinned_native": PINNED,
        "view_ops": VIEWS,
        "decode": env.decode_op,
    }
    first = routing.resolve(parsed, (), **args)
    assert routing.resolve(parsed, (), **args) == first
    assert repr(parsed) == before


# --- chains with providers -----------------------------------------------------------------------


def test_chain_takes_an_available_provider_with_the_kernel() -> None:
    resolved = table("relu = flaggems, native\n", flaggems=gems("relu")).route_for("relu")
    assert (resolved.route, resolved.skipped) == ("flaggems", ())


def test_chain_skips_an_unavailable_provider() -> None:
    resolved = table("relu = flaggems, native\n", flaggems=gems("relu", reason="no GPU")).route_for("relu")
    assert resolved.route == "native"
    assert resolved.chain == ("flaggems", "native")
    assert resolved.skipped == (("flaggems", "flaggems: not available: no GPU"),)


def test_chain_skips_a_provider_lacking_the_op() -> None:
    resolved = table("relu = flaggems, native\n", flaggems=gems("abs")).route_for("relu")
    assert resolved.route == "native"
    assert resolved.skipped == (("flaggems", "flaggems: has no kernel for relu"),)


def test_chain_of_two_providers() -> None:
    resolved = table("relu = a, b, cpu\n", a=gems(reason="off"), b=gems("relu")).route_for("relu")
    assert resolved.route == "b"
    assert resolved.skipped == (("a", "a: not available: off"),)


def test_chain_without_usable_route_is_a_problem() -> None:
    found = problems("\nrelu = flaggems\n", flaggems=gems("relu", reason="flag_gems not importable"))
    assert found == [
        (
            "r.conf:2: no usable route for relu in 'flaggems' (flaggems: not available: flag_gems not importable); "
            "end the chain with native or cpu so the operator always has a route"
        )
    ]


def test_routes_after_a_builtin_are_dead() -> None:
    (found,) = problems("relu = native, flaggems\n", flaggems=gems("relu"))
    assert found.startswith("r.conf:1: 'native, flaggems' for relu: flaggems after 'native' is never used")


def test_alias_then_native_is_dead() -> None:
    (found,) = problems("relu = cuda, native\n")
    assert "native after 'cuda' is never used" in found


def test_unavailable_reason_asked_once_and_only_when_named() -> None:
    named, unnamed = gems("relu", "abs", reason="off"), gems("relu")
    table("relu = flaggems, native\nabs = flaggems, native\n", flaggems=named, other=unnamed)
    assert named.asked == ["unavailable_reason"]
    assert unnamed.asked == []


# --- the default chain -----------------------------------------------------------------------------


def test_default_chain_with_provider_claims_its_ops() -> None:
    provider = gems("relu", "abs", "add.Tensor", "not_in_this_torch", "empty.memory_format")
    routes = table("add.Tensor = native\n\ndefault = flaggems, native\n", flaggems=provider)
    assert routes.default == routing.Resolved("default", "native", "default (r.conf:3)", ("flaggems", "native"), ())
    # explicit add.Tensor keeps its line; the pinned op and the op torch lacks are not taken.
    assert routes.route_for("relu") == routing.Resolved(
        "relu", "flaggems", "default (r.conf:3)", ("flaggems", "native"), ()
    )
    assert routes.route_for("abs").route == "flaggems"
    assert routes.route_for("add.Tensor").origin == "r.conf:1"
    assert set(routes.entries) == {"add.Tensor", "abs", "relu"}
    assert routes.route_for("empty.memory_format").route == "native"


def test_default_chain_with_unavailable_provider() -> None:
    routes = table("default = flaggems, native\n", flaggems=gems("relu", reason="no GPU"))
    assert routes.entries == {}
    assert routes.default.route == "native"
    assert routes.default.skipped == (("flaggems", "flaggems: not available: no GPU"),)


def test_default_chain_second_provider_records_the_first_as_skipped() -> None:
    routes = table("default = a, b, native\n", a=gems("relu"), b=gems("relu", "abs"))
    assert routes.route_for("relu").route == "a"
    assert routes.route_for("abs").route == "b"
    assert routes.route_for("abs").skipped == (("a", "a: has no kernel for abs"),)


def test_default_chain_must_hold_a_builtin() -> None:
    (found,) = problems("default = flaggems\n", flaggems=gems("relu"))
    assert found == (
        "r.conf:1: default = flaggems: the default chain must end in a builtin route (native or cpu) "
        "so every operator has a route"
    )


def test_cpu_default_keeps_view_ops_native() -> None:
    routes = table("default = cpu\n")
    assert routes.default.route == "cpu"
    assert routes.route_for("relu").route == "cpu"
    assert routes.route_for("view") == routing.Resolved(
        "view", "native", "view op kept native (the cpu route cannot return a view)", ("native",), ()
    )
    # pinned ops never reach the router, so the table does not claim them
    assert "copy_" not in routes.entries
    assert set(routes.entries) == {"view", "as_strided", "transpose.int"}


# --- operator policies -------------------------------------------------------------------------------


def test_pinned_op_cannot_leave_native() -> None:
    (found,) = problems("copy_ = flaggems, native\n", flaggems=gems("copy_"))
    assert found.startswith("r.conf:1: copy_ = flaggems, native: copy_ is device bookkeeping")
    assert "moves bytes between devices" in found
    assert table("copy_ = native\n").route_for("copy_").route == "native"
    assert table("copy_ = cuda\n").route_for("copy_").route == "native"


def test_pinned_op_by_override() -> None:
    (found,) = problems(overrides=(override("FLAGOS_OP_empty__memory_format", "cpu"),))
    assert found.startswith("env FLAGOS_OP_empty__memory_format: empty.memory_format = cpu: ")


@pytest.mark.parametrize("chain", ["cpu", "flaggems, cpu"])
def test_view_op_cannot_use_cpu(chain: str) -> None:
    (found,) = problems(f"view = {chain}\n", flaggems=gems())
    assert found.startswith(f"r.conf:1: view = {chain}: view returns a view of its input")
    assert table("view = native\n").route_for("view").route == "native"


# --- names ---------------------------------------------------------------------------------------------


def test_unknown_op_lists_nearest_names() -> None:
    (found,) = problems("ad.Tensor = native\n")
    assert found.startswith("r.conf:1: unknown operator 'ad.Tensor'; nearest: add.Tensor")
    assert found.endswith("names are aten schema names as in torch.ops.aten.<name>.<overload>")


def test_default_overload_suffix_hint() -> None:
    (found,) = problems("relu.default = native\n")
    assert "the default overload is written without a suffix: 'relu'" in found


def test_unknown_route_lists_the_valid_ones() -> None:
    (found,) = problems("relu = flagems, native\n", flaggems=gems())
    assert found == "r.conf:1: unknown route 'flagems' for relu; valid routes: cpu, cuda, flaggems, native"


def test_unknown_route_in_override_and_default() -> None:
    found = problems("default = gems, native\n", (override("FLAGOS_OP_relu", "nat"),))
    assert found == [
        "env FLAGOS_OP_relu: unknown route 'nat' for relu; valid routes: cpu, cuda, native",
        "r.conf:1: unknown route 'gems' in the default chain; valid routes: cpu, cuda, native",
    ]


def test_all_problems_are_reported_together() -> None:
    text = "ad.Tensor = native\nrelu = nope\ncopy_ = cpu\nview = cpu\ndefault = flaggems\n"
    found = problems(text, (override("FLAGOS_OP_nothing", "native"),), flaggems=gems())
    assert [p.split(":")[1] if p.startswith("r.conf") else "env" for p in found] == ["1", "2", "3", "4", "env", "5"]
    with pytest.raises(ConfigError, match=r"^6 problems in the flagos route configuration:\n  r.conf:1: "):
        table(text, (override("FLAGOS_OP_nothing", "native"),), flaggems=gems())


# --- environment overrides ------------------------------------------------------------------------------


def test_override_beats_conf_entry() -> None:
    routes = table(
        "add_.Tensor = native\n",
        (override("FLAGOS_OP_add___Tensor", "flaggems", "native"),),
        flaggems=gems("add_.Tensor"),
    )
    assert routes.route_for("add_.Tensor") == routing.Resolved(
        "add_.Tensor", "flaggems", "env FLAGOS_OP_add___Tensor", ("flaggems", "native"), ()
    )


def test_override_beats_default_provider() -> None:
    routes = table("default = flaggems, native\n", (override("FLAGOS_OP_relu", "cpu"),), flaggems=gems("relu"))
    assert routes.route_for("relu").route == "cpu"


def test_override_decode_failure_is_a_problem() -> None:
    (found,) = problems(overrides=(override("FLAGOS_OP_rleu", "native"),))
    assert found.startswith("FLAGOS_OP_rleu names no operator; nearest: relu (FLAGOS_OP_relu)")


def test_two_overrides_for_one_op() -> None:
    overrides = (override("FLAGOS_OP_add__Tensor", "native"), override("FLAGOS_OP_add.Tensor", "cpu"))
    (found,) = problems(overrides=overrides)
    assert (
        found
        == "env FLAGOS_OP_add.Tensor: add.Tensor is already set by env FLAGOS_OP_add__Tensor; unset one of the two"
    )


def test_default_decode_loads_env_next_to_routing() -> None:
    parsed = conf.parse_conf_text("", "r.conf")
    routes = routing.resolve(
        parsed,
        (override("FLAGOS_OP_add___Tensor", "cpu"),),
        known_ops=KNOWN,
        providers={},
        pinned_native={},
        view_ops=set(),
    )
    assert routes.route_for("add_.Tensor").route == "cpu"


# --- data-movement ops (transfers) ---------------------------------------------------------

TRANSFERS = frozenset({"_to_copy", "copy_"})


def transfer_table(text: str, overrides: tuple[env.Override, ...] = ()) -> routing.RouteTable:
    return routing.resolve(
        conf.parse_conf_text(text, "r.conf"),
        overrides,
        known_ops=KNOWN | {"_to_copy"},
        providers={},
        pinned_native={},
        view_ops=VIEWS,
        transfer_ops=TRANSFERS,
        decode=env.decode_op,
    )


@pytest.mark.parametrize("text", ["_to_copy = cpu", "copy_ = native\n_to_copy = cpu"])
def test_a_transfer_on_the_cpu_route_is_refused(text: str) -> None:
    with pytest.raises(ConfigError) as caught:
        transfer_table(text)
    (problem,) = caught.value.problems
    assert problem.startswith("r.conf:") and "_to_copy = cpu: _to_copy moves data between devices" in problem
    assert "route _to_copy to native" in problem


def test_a_transfer_override_on_the_cpu_route_is_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        transfer_table("", (env.Override("FLAGOS_OP__to_copy", "_to_copy", ("cpu",)),))
    assert caught.value.problems[0].startswith("env FLAGOS_OP__to_copy: _to_copy = cpu")


def test_a_transfer_may_be_native() -> None:
    assert transfer_table("_to_copy = native").route_for("_to_copy").route == "native"


def test_a_cpu_default_keeps_transfers_and_views_native() -> None:
    routes = transfer_table("default = cpu")
    assert routes.route_for("_to_copy").origin == routing.TRANSFER_KEPT_NATIVE
    assert routes.route_for("copy_").route == "native"
    assert routes.route_for("view").origin == routing.VIEW_KEPT_NATIVE
    assert routes.route_for("add.Tensor").route == "cpu"


def test_nearest_names_list_the_overloads_of_a_bare_name() -> None:
    assert routing.nearest_ops("add", KNOWN) == "add needs an overload: add.Tensor"
    assert routing.nearest_ops("relux", KNOWN).startswith("nearest: relu")


def test_nearest_names_ignore_case() -> None:
    assert routing.nearest_ops("RELU", KNOWN).startswith("nearest: relu")
    assert routing.nearest_ops("Add.tensor", KNOWN).startswith("nearest: add.Tensor")
    assert routing.nearest_ops("ADD", KNOWN) == "ADD needs an overload: add.Tensor"
