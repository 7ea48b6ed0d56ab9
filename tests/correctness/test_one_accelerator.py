"""PyTorch's one-accelerator rule after `import torch_fl`: a backward over another accelerator's tensors gets
torch_fl's own error (what happened, what to do) instead of the autograd engine's internal assert; every other
backward runs exactly as before, through torch's own engine."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch.autograd.variable import Variable

import torch_fl
from torch_fl import _one_accelerator


def test_every_python_backward_goes_through_the_guard() -> None:
    assert isinstance(Variable._execution_engine, _one_accelerator._GuardedEngine)
    x = torch.randn(3, requires_grad=True)
    (x * 2).sum().backward()  # CPU autograd: unchanged
    assert torch.equal(x.grad, torch.full((3,), 2.0))
    f = torch.randn(3, device="flagos", requires_grad=True)
    (g,) = torch.autograd.grad((f * f).sum(), f)
    assert torch.equal(g.cpu(), 2 * f.detach().cpu())
    assert _one_accelerator.autograd_used()


def test_engine_callbacks_still_reach_torchs_engine() -> None:
    """DDP, FSDP and checkpointing call queue_callback / is_checkpoint_valid on the engine object."""
    ran = []
    x = torch.randn(2, device="flagos", requires_grad=True)
    x.register_hook(lambda grad: Variable._execution_engine.queue_callback(lambda: ran.append(True)) or grad)
    x.sum().backward()
    assert ran == [True]
    assert Variable._execution_engine.is_checkpoint_valid() is True


@pytest.mark.parametrize("device_type", ["cuda", "xpu"])
def test_a_backward_rooted_on_another_accelerator_is_refused_before_it_starts(device_type: str) -> None:
    calls = []
    engine = _one_accelerator._GuardedEngine(SimpleNamespace(run_backward=lambda *a, **k: calls.append(a)))
    root = SimpleNamespace(device=torch.device(device_type, 0))
    with pytest.raises(torch_fl.OneAcceleratorError) as info:
        engine.run_backward((root,), (None,), False, False, (), False, False)
    assert calls == []
    text = str(info.value)
    assert f"{device_type} tensors cannot run in a process that has imported torch_fl" in text
    assert "model.to('flagos')" in text and "does not import torch_fl" in text


def test_the_engines_internal_assert_becomes_the_same_error() -> None:
    def failing(*args: object, **kwargs: object) -> None:
        raise RuntimeError("opt_ready_stream && opt_parent_stream INTERNAL ASSERT FAILED at engine.cpp:1085")

    engine = _one_accelerator._GuardedEngine(SimpleNamespace(run_backward=failing))
    with pytest.raises(torch_fl.OneAcceleratorError, match="PyTorch allows one accelerator per process") as info:
        engine.run_backward((SimpleNamespace(device=torch.device("cpu")),))
    assert "INTERNAL ASSERT" in str(info.value.__cause__)


def test_other_engine_errors_pass_through_unchanged() -> None:
    x = torch.randn(2, device="flagos")  # does not require grad
    with pytest.raises(RuntimeError, match="does not require grad") as info:
        x.sum().backward()
    assert not isinstance(info.value, torch_fl.OneAcceleratorError)


@pytest.mark.cuda
def test_plain_cuda_backward_after_import_gets_torch_fls_error() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU (torch.cuda.is_available() is False)")
    model = torch.nn.Linear(4, 4).cuda()
    loss = model(torch.randn(2, 4, device="cuda")).sum()  # forward on plain cuda still works
    with pytest.raises(torch_fl.OneAcceleratorError, match="cuda tensors cannot run"):
        loss.backward()
