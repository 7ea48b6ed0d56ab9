"""A flagos convolution's fake result has the memory format of its real one (torch_fl/compile/_torch_compat/
conv_layout.py): on the emulation the hook is called directly; on a GPU vendor a compiled convolution network,
whose weights Inductor makes channels_last, trains as eager does."""

from __future__ import annotations

import types

import pytest
import torch

import torch_fl
from torch_fl.compile._torch_compat import conv_layout

ON_GPU = torch_fl.accelerator() in ("cuda", "dcu")
BACKENDS = torch._C._ConvBackend


def _tensor(device: str) -> types.SimpleNamespace:
    return types.SimpleNamespace(device=torch.device(device))


def test_this_torch_line_has_what_the_hook_needs() -> None:
    assert conv_layout.problems() == []


def test_an_overrideable_flagos_convolution_is_answered_as_the_vendor_library_would(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = []

    def torch_own(input: object, weight: object, backend: object) -> str:
        calls.append(backend)
        return f"format of {backend}"

    hook = conv_layout.hooked(torch_own, "cuda")
    flagos, cuda, weight = _tensor("flagos:0"), _tensor("cuda:0"), _tensor("flagos:0")
    vendor = BACKENDS.Miopen if torch.version.hip else BACKENDS.Cudnn
    assert hook(flagos, weight, BACKENDS.Overrideable) == f"format of {vendor}"
    assert hook(cuda, weight, BACKENDS.Cudnn) == f"format of {BACKENDS.Cudnn}"  # every other call is torch's
    assert hook(flagos, weight, BACKENDS.Slow2d) == f"format of {BACKENDS.Slow2d}"
    assert conv_layout.hooked(torch_own, "dcu")(flagos, weight, BACKENDS.Overrideable) == f"format of {BACKENDS.Miopen}"
    monkeypatch.setattr(torch.backends.cudnn, "enabled", False)  # the vendor then takes a native kernel
    assert hook(flagos, weight, BACKENDS.Overrideable) == f"format of {BACKENDS.Overrideable}"


@pytest.mark.skipif(ON_GPU, reason="the emulation's own convolution")
def test_the_emulation_keeps_torchs_answer() -> None:
    torch_fl.compile.register()
    assert not getattr(getattr(torch._C, conv_layout.NAME), "__flagos__", False)


@pytest.mark.skipif(not ON_GPU, reason="needs flagos on a GPU vendor (cuda_node.sh compile)")
def test_a_compiled_convolution_network_trains_as_eager_on_a_gpu(fresh_dynamo: None) -> None:
    """Inductor turns the weights channels_last; cuDNN then returns channels_last outputs, which the compiled graph's
    stride checks must expect (ResNet-50's compiled step failed them before the hook)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False),
        torch.nn.BatchNorm2d(64),
        torch.nn.ReLU(),
        torch.nn.Conv2d(64, 64, 3, padding=1, bias=False),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(64, 100),
    ).to("flagos")
    x = torch.randn(32, 3, 128, 128, device="flagos")

    def loss_of(inputs: torch.Tensor) -> torch.Tensor:
        with torch.autocast("flagos", dtype=torch.bfloat16):
            return model(inputs).float().square().mean()

    eager = loss_of(x)
    compiled = torch.compile(loss_of)(x)
    compiled.backward()
    torch.testing.assert_close(compiled, eager, rtol=2e-2, atol=2e-2)
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
