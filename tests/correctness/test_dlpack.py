"""DLPack: a flagos tensor is exported as the vendor's memory (kDLCPU under the emulation, kDLCUDA on CUDA, kDLROCM
on DCU), zero-copy, and torch.flagos.from_dlpack brings such memory back onto flagos, zero-copy."""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch.utils.dlpack import DLDeviceType

import torch_fl

EMULATED = torch_fl.accelerator() == "cpu"
VENDOR = "cpu" if EMULATED else "cuda"
LAST = torch.flagos.device_count() - 1  # another device than the current one where there are two


def vendor_type() -> DLDeviceType:
    if EMULATED:
        return DLDeviceType.kDLCPU
    return DLDeviceType.kDLROCM if torch.version.hip else DLDeviceType.kDLCUDA


@contextlib.contextmanager
def host_reads(*tensors: torch.Tensor):
    """Keep flagos blocks readable for a host consumer (numpy) under FLAGOS_EMU_TRAP, as a GPU would not be."""
    access = torch_fl._core.HostAccess([t.untyped_storage().data_ptr() for t in tensors])
    try:
        yield
    finally:
        access.close()


def test_dlpack_device_is_the_vendors() -> None:
    x = torch.arange(6.0, device="flagos")
    assert x.__dlpack_device__() == (vendor_type(), 0 if EMULATED else x.device.index)


def test_torch_consumer_gets_the_same_memory() -> None:
    x = torch.arange(12.0, device="flagos").reshape(3, 4)[:, 1:]
    y = torch.from_dlpack(x)
    assert y.device.type == VENDOR
    assert y.data_ptr() == x.data_ptr() and y.stride() == x.stride()
    with host_reads(x):  # under the emulation y is a host tensor over device memory
        y.mul_(2)  # one memory: the write shows through the flagos tensor
    assert torch.equal(x.cpu(), torch.arange(12.0).reshape(3, 4)[:, 1:] * 2)


def test_round_trip_onto_flagos_is_zero_copy() -> None:
    x = torch.arange(5, dtype=torch.int32, device=f"flagos:{LAST}")
    back = torch.flagos.from_dlpack(x)
    assert back.device == x.device and back.data_ptr() == x.data_ptr() and back.dtype == torch.int32
    del x  # the imported tensor keeps the memory alive
    assert back.cpu().tolist() == [0, 1, 2, 3, 4]


def test_export_refuses_what_would_lose_meaning() -> None:
    with pytest.raises(BufferError, match="require gradient"):
        torch.ones(2, device="flagos", requires_grad=True).__dlpack__()
    with pytest.raises(BufferError, match="conjugate"):
        torch.ones(2, dtype=torch.complex64, device="flagos").conj().__dlpack__()


@pytest.mark.skipif(not EMULATED, reason="numpy reads host memory: the emulation's vendor memory only")
def test_numpy_reads_and_writes_flagos_memory() -> None:
    np = pytest.importorskip("numpy")
    x = torch.arange(6.0, device="flagos").reshape(2, 3)
    with host_reads(x):
        a = np.from_dlpack(x)
        assert a.ctypes.data == x.data_ptr() and a.tolist() == [[0, 1, 2], [3, 4, 5]]
        a[1, 2] = -1.0
    assert x[1, 2].item() == -1.0


@pytest.mark.skipif(not EMULATED, reason="host memory becomes flagos memory under the emulation only")
def test_numpy_memory_becomes_flagos_memory() -> None:
    np = pytest.importorskip("numpy")
    a = np.arange(4.0)
    y = torch.flagos.from_dlpack(a, device=LAST)
    assert y.device == torch.device("flagos", LAST) and y.data_ptr() == a.ctypes.data
    y.add_(1)
    assert a.tolist() == [1.0, 2.0, 3.0, 4.0]


def test_import_names_a_flagos_device() -> None:
    x = torch.arange(3.0, device="flagos")
    with pytest.raises(ValueError, match="must be a flagos device"):
        torch.flagos.from_dlpack(x, device="cpu")
    with pytest.raises(ValueError, match="does not exist" if EMULATED else "not flagos"):
        torch.flagos.from_dlpack(x, device=torch.flagos.device_count() if EMULATED else x.device.index + 1)


@pytest.mark.skipif(EMULATED, reason="under the emulation host memory is the vendor's memory")
def test_host_memory_is_refused_on_gpus_with_the_copy_to_make() -> None:
    with pytest.raises(ValueError, match=r"\.to\('flagos'\)"):
        torch.flagos.from_dlpack(torch.ones(3))
