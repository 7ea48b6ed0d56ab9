"""Parameters keep their identity across device and dtype moves, as they do on CPU and CUDA.

nn.Module._apply (behind .to(), .cpu(), .half(), ...) keeps a Parameter object and swaps its data only when
``torch._has_compatible_shallow_copy_type(old, new)`` is true; flagos answers it through its own kernel
(csrc/aten/shallow_copy.cpp). If it said no, weights tied across modules would come out as separate
parameters and train apart, and an optimizer made before the move would hold parameters the model no longer
uses.
"""

from __future__ import annotations

import copy

import pytest
import torch

import torch_fl  # noqa: F401  (registers the flagos device)


def tied_model(seed: int = 0) -> torch.nn.ModuleDict:
    """An embedding and an output projection sharing one weight, as tied language models do."""
    torch.manual_seed(seed)
    e = torch.nn.Embedding(5, 3)
    h = torch.nn.Linear(3, 5, bias=False)
    h.weight = e.weight
    return torch.nn.ModuleDict(dict(e=e, h=h))


def assert_tied(m: torch.nn.ModuleDict, device: str, dtype: torch.dtype = torch.float32) -> None:
    assert m["e"].weight is m["h"].weight, "the tied weight became two parameters"
    assert isinstance(m["e"].weight, torch.nn.Parameter)
    assert m["e"].weight.device == torch.device(device), f"weight on {m['e'].weight.device}, expected {device}"
    assert m["e"].weight.dtype == dtype
    assert len(list(m.parameters())) == 1
    assert len(dict(m.named_parameters())) == 1


def test_issue_snippet():
    e = torch.nn.Embedding(5, 3)
    h = torch.nn.Linear(3, 5, bias=False)
    h.weight = e.weight
    m = torch.nn.ModuleDict(dict(e=e, h=h)).to("flagos")
    assert m["e"].weight is m["h"].weight
    assert torch._has_compatible_shallow_copy_type(torch.zeros(1), torch.zeros(1, device="flagos"))


@pytest.mark.parametrize("order", ["cpu_flagos", "flagos_cpu", "flagos_flagos"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64])
def test_dense_tensors_are_compatible(order, dtype):
    a, b = (torch.zeros(2, dtype=dtype, device="cpu" if d == "cpu" else "flagos") for d in order.split("_"))
    assert torch._has_compatible_shallow_copy_type(a, b)


def test_sparse_and_flagos_are_not_compatible():
    """Outside dense strided tensors torch's own rule answers: a sparse COO tensor is no dense tensor."""
    sparse = torch.zeros(2, 2).to_sparse()
    assert not torch._has_compatible_shallow_copy_type(sparse, torch.zeros(2, 2, device="flagos"))
    assert not torch._has_compatible_shallow_copy_type(torch.zeros(2, 2, device="flagos"), sparse)
    # and torch's rule itself is untouched for calls without a flagos tensor
    assert torch._has_compatible_shallow_copy_type(sparse, torch.zeros(2, 2).to_sparse())
    assert not torch._has_compatible_shallow_copy_type(sparse, torch.zeros(2, 2))


def test_set_data_moves_a_parameter_in_place():
    p = torch.nn.Parameter(torch.arange(4.0))
    p.data = torch.full((4,), 7.0, device="flagos")
    assert p.device.type == "flagos" and isinstance(p, torch.nn.Parameter) and p.requires_grad
    torch.testing.assert_close(p.cpu(), torch.full((4,), 7.0), rtol=0, atol=0)
    (p * 2).sum().backward()
    assert p.grad is not None and p.grad.device == p.device
    torch.testing.assert_close(p.grad.cpu(), torch.full((4,), 2.0), rtol=0, atol=0)


def test_to_flagos_keeps_the_parameter_objects():
    m = tied_model()
    before = {name: id(p) for name, p in m.named_parameters()}
    want = m["e"].weight.detach().clone()
    m.to("flagos")
    assert_tied(m, "flagos:0")
    assert {name: id(p) for name, p in m.named_parameters()} == before
    torch.testing.assert_close(m["e"].weight.detach().cpu(), want, rtol=0, atol=0)


def test_cpu_round_trip_keeps_sharing():
    m = tied_model().to("flagos").cpu()
    assert_tied(m, "cpu")
    torch.testing.assert_close(m["e"].weight.detach(), tied_model()["e"].weight.detach(), rtol=0, atol=0)


def test_second_device_and_between_devices_keep_sharing(two_devices):
    m = tied_model().to("flagos:1")
    assert_tied(m, "flagos:1")
    m.to("flagos:0")
    assert_tied(m, "flagos:0")
    m.to("flagos:1").cpu()
    assert_tied(m, "cpu")
    torch.testing.assert_close(m["e"].weight.detach(), tied_model()["e"].weight.detach(), rtol=0, atol=0)


@pytest.mark.parametrize("cast", ["half", "bfloat16", "double"])
def test_dtype_casts_on_flagos_keep_sharing(cast):
    m = tied_model().to("flagos")
    getattr(m, cast)()
    dtype = {"half": torch.float16, "bfloat16": torch.bfloat16, "double": torch.float64}[cast]
    assert_tied(m, "flagos:0", dtype)
    want = getattr(tied_model(), cast)()["e"].weight.detach()
    torch.testing.assert_close(m["e"].weight.detach().cpu(), want, rtol=0, atol=0)
    m.float()
    assert_tied(m, "flagos:0")


def test_to_flagos_with_dtype_keeps_sharing():
    m = tied_model().to("flagos", torch.float16)
    assert_tied(m, "flagos:0", torch.float16)


def test_gradients_move_with_their_parameters():
    m = tied_model()
    m["h"](m["e"](torch.tensor([1, 2, 3]))).sum().backward()
    grad = m["e"].weight.grad.clone()
    m.to("flagos")
    assert_tied(m, "flagos:0")
    g = m["e"].weight.grad
    assert g is not None and g.device.type == "flagos", "the gradient stayed behind"
    torch.testing.assert_close(g.cpu(), grad, rtol=0, atol=0)


def test_shared_submodule_keeps_one_parameter_set():
    """A module used twice (weight sharing by module reuse) stays one module with one set of parameters."""
    torch.manual_seed(1)
    block = torch.nn.Linear(4, 4)
    m = torch.nn.Sequential(block, torch.nn.ReLU(), block)
    cpu_count = len(list(m.named_parameters()))
    m.to("flagos")
    assert m[0] is m[2] and m[0].weight is m[2].weight
    assert len(list(m.named_parameters())) == cpu_count == 2


def test_load_state_dict_on_flagos_keeps_sharing():
    src = tied_model(seed=3)
    m = tied_model(seed=0).to("flagos")
    param = m["e"].weight
    m.load_state_dict(src.state_dict())
    assert m["e"].weight is param, "load_state_dict replaced the parameter"
    assert_tied(m, "flagos:0")
    torch.testing.assert_close(m["h"].weight.detach().cpu(), src["e"].weight.detach(), rtol=0, atol=0)


def _train(model: torch.nn.ModuleDict, opt: torch.optim.Optimizer, device: str, steps: int) -> list[float]:
    tokens = torch.tensor([[0, 1, 2, 3], [4, 3, 2, 1]], device=device)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        logits = model["h"](model["e"](tokens))
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens.flatten())
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_optimizer_made_before_the_move_trains_the_moved_model():
    """The documented CUDA pattern: the optimizer holds the Parameter objects the model still uses."""
    ref = tied_model()
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=0.1)
    want = _train(ref, ref_opt, "cpu", 3)

    m = tied_model()
    opt = torch.optim.AdamW(m.parameters(), lr=0.1)
    m.to("flagos")
    got = _train(m, opt, "flagos", 3)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(m["e"].weight.detach().cpu(), ref["e"].weight.detach(), rtol=1e-5, atol=1e-6)
    assert opt.param_groups[0]["params"][0] is m["e"].weight


def test_optimizer_load_state_dict_onto_flagos():
    ref = tied_model()
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=0.1)
    _train(ref, ref_opt, "cpu", 2)
    saved_model, saved_opt = copy.deepcopy(ref.state_dict()), copy.deepcopy(ref_opt.state_dict())
    want = _train(ref, ref_opt, "cpu", 2)

    m = tied_model(seed=5).to("flagos")
    m.load_state_dict(saved_model)
    opt = torch.optim.AdamW(m.parameters(), lr=0.1)
    opt.load_state_dict(saved_opt)
    assert_tied(m, "flagos:0")
    state = opt.state[m["e"].weight]
    assert len(opt.state) == 1, "one shared parameter has one optimizer state"
    for key in ("exp_avg", "exp_avg_sq"):
        assert state[key].device == m["e"].weight.device, f"{key} on {state[key].device}"
    got = _train(m, opt, "flagos", 2)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(m["e"].weight.detach().cpu(), ref["e"].weight.detach(), rtol=1e-5, atol=1e-6)


def test_deepcopy_on_flagos_keeps_sharing():
    m = copy.deepcopy(tied_model().to("flagos"))
    assert_tied(m, "flagos:0")
