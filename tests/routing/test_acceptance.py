"""The issue's acceptance command, run exactly as a user types it."""

from __future__ import annotations

import re

import torch

ACCEPTANCE = "import torch, torch_fl; x = torch.ones(3, device='flagos'); print(x + x)"
LINE_RE = re.compile(r"\[flagos dispatch\] \S+ -> \S+")


def flagos_repr(cpu_tensor: torch.Tensor, device: str = "flagos:0") -> str:
    """How a float32 tensor with these values prints on ``device``."""
    text = str(cpu_tensor)
    assert text.endswith(")") and "dtype" not in text
    return f"{text[:-1]}, device='{device}')"


def test_acceptance_cpu_override(run_argv):
    child = run_argv(["-c", ACCEPTANCE], {"FLAGOS_OP_add__Tensor": "cpu", "FLAGOS_LOG": "dispatch"})
    add_lines = [line for line in child.stderr.splitlines() if line.startswith("[flagos dispatch] add.Tensor")]
    assert add_lines == ["[flagos dispatch] add.Tensor -> cpu"], child.describe()
    # nothing but well-formed dispatch lines on stderr (printing the tensor makes a few native calls)
    bad = [line for line in child.stderr.splitlines() if not LINE_RE.fullmatch(line)]
    assert bad == [], child.describe()
    assert child.stdout.strip() == flagos_repr(torch.ones(3) + torch.ones(3)), child.describe()


def test_acceptance_without_log_is_silent(run_argv):
    child = run_argv(["-c", ACCEPTANCE], {"FLAGOS_OP_add__Tensor": "cpu"})
    assert child.stderr == "", child.describe()
    assert child.stdout.strip() == flagos_repr(torch.ones(3) + torch.ones(3))


def test_acceptance_nonsense_route_fails_naming_variable_and_routes(run_argv):
    child = run_argv(
        ["-c", ACCEPTANCE], {"FLAGOS_OP_add__Tensor": "nonsense", "FLAGOS_LOG": "dispatch"}, expect_ok=False
    )
    assert "FLAGOS_OP_add__Tensor" in child.stderr, child.describe()
    assert "nonsense" in child.stderr
    routes_line = next((line for line in child.stderr.splitlines() if "valid routes" in line), None)
    assert routes_line is not None, child.describe()
    listed = routes_line.split("valid routes", 1)[1]
    for route in ("native", "cuda", "cpu", "flaggems"):
        assert re.search(rf"\b{route}\b", listed), routes_line
    assert "tensor(" not in child.stdout  # it stopped at import: nothing ran
    assert "[flagos dispatch]" not in child.stderr
