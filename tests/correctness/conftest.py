"""Shared fixtures of the correctness suite: the flagos device compared with torch's CPU kernels.

Every check computes the same thing on CPU tensors and on flagos tensors made from them, and
compares: exact for integers, booleans and float32 where the operation is deterministic and
correctly rounded, tolerances otherwise. The tests say "flagos" and nothing vendor-specific, so
they run unchanged on the emulation (FLAGOS_ACCELERATOR=cpu) and on a GPU (=cuda).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch

import torch_fl  # noqa: F401  (registers the flagos device)

# (rtol, atol) when a result is compared with tolerance
TOLERANCE = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-5, 1e-5),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (1.6e-2, 1.6e-2),
    torch.complex128: (1e-7, 1e-7),
    torch.complex64: (1e-5, 1e-5),
}
# exact when the caller says the op is deterministic
EXACT_DTYPES = (torch.float32, torch.float64, torch.complex64, torch.complex128)


def _assert_same(
    got: object,
    want: object,
    *,
    exact: bool = True,
    device: str | None = None,
    path: str = "result",
    scale: float = 1.0,
) -> None:
    """``got`` (computed on flagos) equals ``want`` (the same computation on CPU).

    Tensors: ``got`` lives on flagos (on ``device`` when given), has want's dtype and shape, and
    its values match: bit for bit for integers/bools and, when ``exact``, float32/float64; within
    TOLERANCE (times ``scale``) otherwise. Sequences compare item by item, scalars by value.
    """
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor), f"{path}: expected a tensor, got {type(got).__name__}"
        assert got.device.type == "flagos", f"{path}: result on {got.device}, expected a flagos device"
        if device is not None:
            assert got.device == torch.device(device), f"{path}: result on {got.device}, expected {device}"
        assert got.dtype == want.dtype, f"{path}: dtype {got.dtype}, expected {want.dtype}"
        assert got.shape == want.shape, f"{path}: shape {tuple(got.shape)}, expected {tuple(want.shape)}"
        host = got.cpu()
        if want.dtype in TOLERANCE and not (exact and want.dtype in EXACT_DTYPES):
            rtol, atol = TOLERANCE[want.dtype]
            torch.testing.assert_close(
                host, want, rtol=rtol * scale, atol=atol * scale, equal_nan=True, msg=lambda m: f"{path}: {m}"
            )
        else:
            torch.testing.assert_close(host, want, rtol=0, atol=0, equal_nan=True, msg=lambda m: f"{path}: {m}")
    elif isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)), f"{path}: expected a sequence, got {type(got).__name__}"
        assert len(got) == len(want), f"{path}: {len(got)} items, expected {len(want)}"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _assert_same(g, w, exact=exact, device=device, path=f"{path}[{i}]", scale=scale)
    elif isinstance(want, float):
        assert isinstance(got, float), f"{path}: expected a float, got {got!r}"
        assert (
            got == want
            or (math.isnan(got) and math.isnan(want))
            or (not exact and math.isclose(got, want, rel_tol=1e-5 * scale, abs_tol=1e-6 * scale))
        ), f"{path}: {got!r} != {want!r}"
    else:
        assert got == want, f"{path}: {got!r} != {want!r}"


@pytest.fixture(scope="session")
def assert_same() -> Callable[..., None]:
    return _assert_same


def _device_count() -> int:
    return torch.flagos.device_count()


@pytest.fixture(scope="session")
def two_devices() -> None:
    """Skip unless there are two flagos devices (the emulation has FLAGOS_EMU_DEVICES, default 2)."""
    if _device_count() < 2:
        pytest.skip(f"needs two flagos devices, this process has {_device_count()}")


@pytest.fixture(autouse=True)
def _restore_current_device():
    """Tests that call torch.flagos.set_device leave the process as they found it."""
    before = torch.flagos.current_device()
    yield
    torch.flagos.set_device(before)
