"""LSTM and GRU on flagos (torch sends their cells to accelerators as fused ops that only CUDA
implements; the router decomposes them elsewhere) against the same modules on CPU, with gradients."""

from __future__ import annotations

import copy

import pytest
import torch

MODULES = {
    "lstm": lambda: torch.nn.LSTM(6, 5, num_layers=2),
    "lstm_no_bias": lambda: torch.nn.LSTM(6, 5, bias=False),
    "gru": lambda: torch.nn.GRU(6, 5, num_layers=2),
    "gru_no_bias": lambda: torch.nn.GRU(6, 5, bias=False),
    "lstm_cell": lambda: torch.nn.LSTMCell(6, 5),
    "gru_cell": lambda: torch.nn.GRUCell(6, 5),
}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_recurrent_module_forward_and_backward(assert_same, name):
    torch.manual_seed(0)
    module = MODULES[name]()
    x = torch.randn(4, 3, 6) if "cell" not in name else torch.randn(3, 6)
    flagos_module = copy.deepcopy(module).to("flagos")

    def loss(m, inp):
        out = m(inp)
        out = out[0] if isinstance(out, tuple) else out
        return (out.sin() * out).sum()

    want = loss(module, x)
    want.backward()
    got = loss(flagos_module, x.to("flagos"))
    got.backward()
    assert_same(got, want, exact=False)
    for (pname, p), q in zip(module.named_parameters(), flagos_module.parameters(), strict=True):
        assert_same(q.grad, p.grad, exact=False, path=f"{name}.{pname}.grad", scale=10)
