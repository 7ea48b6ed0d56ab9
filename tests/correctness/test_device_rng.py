"""The flagos generators: seeding, generator objects, RNG state and draws on several devices."""

from __future__ import annotations

import pytest
import torch

import torch_fl

DEVICE = "flagos"


def _draw(**kwargs) -> list[list[float]]:
    uniform = torch.rand(5, device=DEVICE, **kwargs).cpu().tolist()
    return [uniform, torch.randn(3, device=DEVICE, **kwargs).cpu().tolist()]


def test_manual_seed_reproduces():
    torch.flagos.manual_seed(1234)
    first = _draw()
    torch.flagos.manual_seed(1234)
    assert _draw() == first
    torch.flagos.manual_seed(4321)
    assert _draw() != first
    assert torch.flagos.initial_seed() == 4321


def test_torch_manual_seed_seeds_flagos():
    torch.manual_seed(77)
    first = _draw()
    torch.manual_seed(77)
    assert _draw() == first


def test_generator_object():
    g = torch.Generator(device=DEVICE)
    assert g.device.type == "flagos"
    g.manual_seed(5)
    first = _draw(generator=g)
    g.manual_seed(5)
    assert _draw(generator=g) == first
    assert g.initial_seed() == 5
    # a private generator does not move the default one
    torch.flagos.manual_seed(9)
    expected = _draw()
    torch.flagos.manual_seed(9)
    _draw(generator=g)
    assert _draw() == expected


def test_rng_state_round_trip():
    torch.flagos.manual_seed(3)
    state = torch.flagos.get_rng_state()
    first = _draw()
    torch.flagos.set_rng_state(state)
    assert _draw() == first


def test_dropout_reproducible():
    x = torch.ones(200, device=DEVICE)
    torch.flagos.manual_seed(11)
    a = torch.nn.functional.dropout(x, 0.5).cpu()
    torch.flagos.manual_seed(11)
    b = torch.nn.functional.dropout(x, 0.5).cpu()
    assert torch.equal(a, b)
    assert set(a.unique().tolist()) == {0.0, 2.0}


def test_seeding_reproduces_draws_on_each_device(two_devices):
    torch.flagos.manual_seed_all(21)
    on0 = torch.rand(4, device="flagos:0").cpu()
    on1 = torch.rand(4, device="flagos:1").cpu()
    torch.flagos.manual_seed_all(21)
    assert torch.equal(torch.rand(4, device="flagos:0").cpu(), on0)
    assert torch.equal(torch.rand(4, device="flagos:1").cpu(), on1)
    assert not torch.equal(on0, on1)  # one stream: the second draw continues it


@pytest.mark.skipif(torch_fl.accelerator() != "cpu", reason="emulation only: GPUs have a generator per device")
def test_emulated_devices_draw_from_the_cpu_default_generator():
    # CPU kernels without a generator argument (dropout) use the CPU default
    # generator, so emulation makes it the flagos generator of every device.
    torch.flagos.manual_seed(5)
    on_flagos = torch.rand(4, device="flagos").cpu()
    torch.flagos.manual_seed(5)
    assert torch.equal(torch.rand(4), on_flagos)
