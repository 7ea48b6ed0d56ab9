"""``python -m torch_fl info`` and ``python -m torch_fl route OP``, as text and as --json."""

from __future__ import annotations

import json

import pytest
import torch

CONF = """
    add.Tensor = cpu       #@add
    mul.Tensor = cpu       #@mul
    sub.Tensor = native    #@sub
    div.Tensor = flaggems, cpu  #@div
"""
OVERRIDE = {"FLAGOS_OP_atan2": "cpu"}
# explicit routes: add, mul, div (after flaggems), atan2 -> cpu; sub -> native
COUNTS = {"cpu": 4, "native": 1}


@pytest.fixture(scope="module")
def env(tmp_path_factory, conf_writer):
    path, tags = conf_writer(tmp_path_factory.mktemp("cli"), "cli.conf", CONF)
    return {"FLAGOS_BACKEND_CONFIG": str(path), **OVERRIDE}, path, tags


def test_info_text(run_module, env):
    environ, path, _ = env
    child = run_module(["info"], environ)
    out = child.stdout
    assert str(path) in out
    assert torch.__version__ in out
    assert "FLAGOS_OP_atan2" in out
    accel_line = next(line for line in out.splitlines() if line.split()[0] == "accelerator")
    assert accel_line.split()[-1] == "cpu"
    counts_line = next(line for line in out.splitlines() if "cpu=" in line and "native=" in line)
    assert f"cpu={COUNTS['cpu']}" in counts_line and f"native={COUNTS['native']}" in counts_line


def test_info_json(run_module, env):
    environ, path, _ = env
    info = json.loads(run_module(["info", "--json"], environ).stdout)
    assert info["accelerator"] == "cpu"
    assert "cpu" in info["built_accelerators"]
    assert info["torch"] == torch.__version__
    assert info["conf"] == str(path)
    assert info["overrides"] == {"FLAGOS_OP_atan2": "cpu"}
    assert info["explicit_routes"] == COUNTS
    assert info["default_route"] == "native"
    assert info["replay"] == {"enabled": True, "verify": False, "capacity": 4096}
    assert info["device_count"] == 2  # FLAGOS_EMU_DEVICES default
    assert isinstance(info["torch_fl"], str) and info["torch_fl"]


def test_route_text(run_module, env):
    environ, _, tags = env
    out = run_module(["route", "add.Tensor"], environ).stdout
    first = out.splitlines()[0]
    assert "add.Tensor" in first and "cpu" in first and tags["add"] in first


# the remaining forms run in one child through the same entry point python -m uses
MAIN_CALLS = r"""
import contextlib, io, json
import torch_fl.__main__ as cli
for label, argv in ARGVS.items():
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(argv)
    report(label, [rc, out.getvalue(), err.getvalue()])
"""

ARGVS = {
    "conf_op": ["route", "add.Tensor", "--json"],
    "chain_op": ["route", "div.Tensor", "--json"],
    "env_op": ["route", "atan2", "--json"],
    "default_op": ["route", "hypot", "--json"],
    "env_text": ["route", "atan2"],
    "unknown": ["route", "not_an.op"],
    "no_overload": ["route", "add"],
    "typo": ["route", "hypto"],
    "routes": ["routes", "--json"],
}


@pytest.fixture(scope="module")
def main_calls(module_child, env):
    environ, _, tags = env
    child = module_child(f"ARGVS = {ARGVS!r}\n" + MAIN_CALLS, environ)
    return child.data, tags


def test_route_json_conf_origin(main_calls):
    data, tags = main_calls
    rc, out, _ = data["conf_op"]
    route = json.loads(out)
    assert rc == 0
    assert (route["op"], route["route"], route["origin"]) == ("add.Tensor", "cpu", tags["add"])
    assert route["reaches_router"] is True


def test_route_json_chain(main_calls):
    data, tags = main_calls
    route = json.loads(data["chain_op"][1])
    assert (route["route"], route["origin"], route["chain"]) == ("cpu", tags["div"], ["flaggems", "cpu"])
    assert [s[0] for s in route["skipped"]] == ["flaggems"]


def test_route_env_origin(main_calls):
    data, _ = main_calls
    route = json.loads(data["env_op"][1])
    assert (route["op"], route["route"], route["origin"]) == ("atan2", "cpu", "env FLAGOS_OP_atan2")
    rc, text, _ = data["env_text"]
    assert rc == 0 and "atan2" in text and "env FLAGOS_OP_atan2" in text


def test_route_default_origin(main_calls):
    data, _ = main_calls
    route = json.loads(data["default_op"][1])
    assert route["op"] == "hypot" and route["route"] == "native"
    assert route["origin"] == "built-in default"  # the conf has no default line


def test_route_unknown_op_fails(main_calls):
    data, _ = main_calls
    rc, out, err = data["unknown"]
    assert rc != 0 and out == ""
    assert "not_an.op" in err


def test_route_unknown_op_suggests_names(main_calls):
    data, _ = main_calls
    rc, _, err = data["no_overload"]
    assert rc == 2 and "add needs an overload: " in err and "add.Tensor" in err and "add.Scalar" in err, err
    rc, _, err = data["typo"]
    assert rc == 2 and "nearest: hypot" in err, err


def test_routes_json(main_calls):
    data, tags = main_calls
    rc, out, _ = data["routes"]
    table = json.loads(out)
    assert rc == 0
    assert table["add.Tensor"]["origin"] == tags["add"]
    assert table["sub.Tensor"]["route"] == "native" and table["sub.Tensor"]["origin"] == tags["sub"]
    assert table["atan2"]["origin"] == "env FLAGOS_OP_atan2"
    assert "default" in table
