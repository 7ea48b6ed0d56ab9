"""A bad route configuration stops ``import torch_fl`` with one message naming where to fix it."""

from __future__ import annotations

import pytest

IMPORT = "import torch, torch_fl; print('imported')"

BAD_CONFS = {
    "unknown_op": ("add.Tensor = cpu\nad.Tensor = native      #@bad\n", ["ad.Tensor", "add.Tensor"]),
    "bad_route": ("add.Tensor = cpu\nmul.Tensor = gpu        #@bad\n", ["gpu", "valid routes", "native"]),
    "malformed": ("add.Tensor = cpu\nmul.Tensor native       #@bad\n", ["mul.Tensor native"]),
    "bad_include": ("include missing.conf    #@bad\nadd.Tensor = cpu\n", ["missing.conf"]),
}


@pytest.mark.parametrize("name", sorted(BAD_CONFS))
def test_bad_conf_fails_import_with_file_and_line(run_argv, write_conf, name):
    text, words = BAD_CONFS[name]
    path, tags = write_conf(f"{name}.conf", text)
    child = run_argv(["-c", IMPORT], {"FLAGOS_BACKEND_CONFIG": str(path)}, expect_ok=False)
    assert "imported" not in child.stdout
    assert tags["bad"] in child.stderr, child.describe()
    for word in words:
        assert word in child.stderr, child.describe()


def test_every_problem_reported_at_once(run_argv, write_conf):
    path, tags = write_conf(
        "many.conf",
        """
        ad.Tensor = native        #@op
        mul.Tensor = gpu          #@route
        empty.memory_format = cpu #@pinned
        transpose.int = cpu       #@view
        """,
    )
    env = {"FLAGOS_BACKEND_CONFIG": str(path), "FLAGOS_OP_sub__Tensor": "nonsense", "FLAGOS_OP_no_such_op": "cpu"}
    child = run_argv(["-c", IMPORT], env, expect_ok=False)
    for where in (*tags.values(), "FLAGOS_OP_sub__Tensor", "FLAGOS_OP_no_such_op"):
        assert where in child.stderr, (where, child.describe())


@pytest.mark.parametrize(
    "var, words",
    [
        ("FLAGOS_OP_empty__memory_format", ["empty.memory_format", "native"]),  # bookkeeping kernel
        ("FLAGOS_OP_view", ["view", "native"]),
        ("FLAGOS_OP_transpose__int", ["transpose.int", "view"]),  # returns a view
    ],
)
def test_refused_cpu_route_fails_import(run_argv, var, words):
    child = run_argv(["-c", IMPORT], {var: "cpu"}, expect_ok=False)
    assert var in child.stderr, child.describe()
    for word in words:
        assert word in child.stderr


def test_any_aten_op_can_be_overridden(run_child):
    """FLAGOS_OP_ works for ops no conf mentions, including ops with underscores in their names."""
    child = run_child(
        """
        import torch, torch_fl
        x = torch.linspace(-2, 2, 9)
        fx = x.to("flagos")
        cases = {
            "hypot": lambda t: torch.hypot(t, t + 1),
            "logaddexp": lambda t: torch.logaddexp(t, t * 2),
            "_log_softmax": lambda t: torch.log_softmax(t, 0),
            "cumsum": lambda t: t.cumsum(0),
        }
        for label, fn in cases.items():
            mark(label)
            out = fn(fx)
            mark(label + ":after")
            report(label, [str(out.device), out.cpu().tolist(), fn(x).tolist()])
        """,
        {
            "FLAGOS_LOG": "dispatch",
            "FLAGOS_OP_hypot": "cpu",
            "FLAGOS_OP_logaddexp": "cpu",
            "FLAGOS_OP__log_softmax": "cpu",
            "FLAGOS_OP_cumsum": "cpu",
        },
    )
    assert child.routes_of("hypot", "hypot") == ["cpu"]
    assert child.routes_of("logaddexp", "logaddexp") == ["cpu"]
    assert child.routes_of("_log_softmax", "_log_softmax") == ["cpu"]
    assert child.routes_of("cumsum", "cumsum") == ["cpu"]
    for label in ("hypot", "logaddexp", "_log_softmax", "cumsum"):
        device, got, want = child.data[label]
        assert device == "flagos:0" and got == want, label


def test_typo_bad_route_and_garbage_are_reported_together(run_argv, write_conf):
    path, tags = write_conf(
        "three.conf",
        """
        default = native
        ad.Tensor = native       #@typo
        mul.Tensor = nativ       #@route
        this line is garbage     #@garbage
        """,
    )
    child = run_argv(["-c", IMPORT], {"FLAGOS_BACKEND_CONFIG": str(path)}, expect_ok=False)
    assert "3 problems in the flagos route configuration" in child.stderr, child.describe()
    assert f"{tags['typo']}: unknown operator 'ad.Tensor'; nearest: add.Tensor" in child.stderr
    assert f"{tags['route']}: unknown route 'nativ'" in child.stderr
    assert f"{tags['garbage']}: no '='" in child.stderr


def test_env_errors_do_not_hide_conf_errors(run_argv, write_conf):
    path, tags = write_conf("one.conf", "default = native\nmul.Tensor = gpu   #@route\n")
    env = {"FLAGOS_BACKEND_CONFIG": str(path), "FLAGOS_LOG": "dispatchh", "FLAGOS_EMU_DEVICES": "99"}
    child = run_argv(["-c", IMPORT], env, expect_ok=False)
    assert "3 problems in the flagos route configuration" in child.stderr, child.describe()
    for where in ("FLAGOS_LOG='dispatchh'", "FLAGOS_EMU_DEVICES='99'", f"{tags['route']}: unknown route 'gpu'"):
        assert where in child.stderr, (where, child.describe())


def test_no_cpu_kernel_advice_works(run_child):
    # torch has no CPU kernel for the fused LSTM cell; the cpu route runs its decomposition on the host
    child = run_child(
        """
        import torch, torch_fl
        torch.manual_seed(0)
        lstm, x = torch.nn.LSTM(4, 3), torch.randn(5, 2, 4)
        want = lstm(x)[0]
        mark("lstm")
        got = lstm.to("flagos")(x.to("flagos"))[0]
        mark("lstm:after")
        report("lstm", [str(got.device), torch.allclose(got.cpu(), want, atol=1e-6)])
        """,
        {"FLAGOS_OP__thnn_fused_lstm_cell": "cpu", "FLAGOS_LOG": "dispatch"},
    )
    assert "cpu" in child.routes_of("_thnn_fused_lstm_cell", "lstm"), child.describe()
    assert child.data["lstm"] == ["flagos:0", True]
