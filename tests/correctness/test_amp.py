"""Automatic mixed precision on flagos: torch.autocast("flagos") casts with torch's own op lists (the ones every
accelerator shares) and torch.amp.GradScaler("flagos") drives training as on any device."""

from __future__ import annotations

import copy

import pytest
import torch

import torch_fl


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)
    )


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_policy_follows_torchs_accelerator_lists(dtype: torch.dtype) -> None:
    a = torch.randn(8, 8, device="flagos")
    with torch.autocast("flagos", dtype=dtype):
        assert torch.is_autocast_enabled("flagos")
        assert torch.get_autocast_dtype("flagos") == dtype
        assert (a @ a).dtype == dtype  # lower_precision_fp
        assert torch.nn.functional.linear(a, a).dtype == dtype
        assert torch.exp(a.to(dtype)).dtype == torch.float32  # fp32
        assert torch.layer_norm(a.to(dtype), (8,)).dtype == torch.float32
        assert torch.softmax(a.to(dtype), dim=-1).dtype == torch.float32  # fp32_set_opt_dtype
        assert torch.addcmul(a, a.to(dtype), a).dtype == torch.float32  # promote
        assert (a + a).dtype == torch.float32  # on no list: unchanged
    assert not torch.is_autocast_enabled("flagos")
    assert (a @ a).dtype == torch.float32


def test_bf16_autocast_matches_cpu_autocast(assert_same) -> None:
    """Forward and gradients of a model whose ops have the same policy on both devices equal CPU autocast."""
    torch.manual_seed(1)
    x, target = torch.randn(8, 16), torch.randn(8, 4)
    cpu_model = _mlp()
    flagos_model = copy.deepcopy(cpu_model).to("flagos")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = cpu_model(x)
        want_loss = torch.nn.functional.mse_loss(want.float(), target)
    want_loss.backward()
    with torch.autocast("flagos", dtype=torch.bfloat16):
        got = flagos_model(x.to("flagos"))
        got_loss = torch.nn.functional.mse_loss(got.float(), target.to("flagos"))
    got_loss.backward()
    assert got.dtype == want.dtype == torch.bfloat16
    assert_same(got, want)
    assert_same(got_loss, want_loss)
    for (name, p_cpu), p_flagos in zip(cpu_model.named_parameters(), flagos_model.parameters(), strict=True):
        assert_same(p_flagos.grad, p_cpu.grad, path=f"{name}.grad")


def test_grad_scaler_trains_like_the_cpu_scaler(assert_same) -> None:
    """Three fp16 autocast steps with GradScaler: the same scales and skipped steps as on CPU, and the same
    parameters: bit for bit under emulation (the CPU's own kernels); on a GPU, fp16 kernels round differently and
    Adam's first steps are about lr * sign(grad), so an element may differ by up to a step per step."""
    torch.manual_seed(2)
    batches = [(torch.randn(8, 16), torch.randn(8, 4)) for _ in range(3)]

    def train(device: str) -> tuple[torch.nn.Module, list[float]]:
        model = _mlp().to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        scaler = torch.amp.GradScaler(device, init_scale=2.0**16, growth_interval=1)
        scales = []
        for x, y in batches:
            opt.zero_grad()
            with torch.autocast(device, dtype=torch.float16):
                loss = torch.nn.functional.mse_loss(model(x.to(device)).float(), y.to(device))
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
        return model, scales

    cpu_model, cpu_scales = train("cpu")
    flagos_model, flagos_scales = train("flagos")
    assert flagos_scales == cpu_scales
    emulated = torch_fl.accelerator() == "cpu"
    for (name, p_cpu), p_flagos in zip(cpu_model.named_parameters(), flagos_model.parameters(), strict=True):
        if emulated:
            assert_same(p_flagos.detach(), p_cpu.detach(), path=name)
        else:
            torch.testing.assert_close(p_flagos.detach().cpu(), p_cpu.detach(), rtol=0, atol=2 * 3 * 1e-2)


def test_grad_scaler_skips_a_step_with_inf_gradients() -> None:
    model = torch.nn.Linear(4, 1).to("flagos")
    before = model.weight.detach().cpu().clone()
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    scaler = torch.amp.GradScaler("flagos", init_scale=4.0)
    loss = model(torch.full((2, 4), float("inf"), device="flagos")).sum()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 2.0  # backed off
    assert torch.equal(model.weight.detach().cpu(), before)  # the step was skipped


def test_autocast_rejects_unsupported_dtypes() -> None:
    with pytest.warns(UserWarning, match="flagos"):
        with torch.autocast("flagos", dtype=torch.float64):
            pass
