"""DLPack on a GPU node: a flagos tensor's capsule is CUDA memory (kDLCUDA = 2; kDLROCM = 10 on DCU), read straight
from the capsule's DLTensor, and a plain cuda tensor made from it in the same process is the same memory, as is the
CuPy array CuPy makes from it (the acceptance's other-library consumer).

    FLAGOS_ACCELERATOR=cuda python build_tools/node/dlpack_check.py     (build_tools/node/cuda_node.sh interop runs it)
Prints one line per check and `dlpack check: ok`; exits 1 at the first failed check.
"""

from __future__ import annotations

import ctypes
import sys

import torch

import torch_fl


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLTensor(ctypes.Structure):  # the head of DLManagedTensor (dlpack.h): what a consumer reads first
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32)]


def capsule_head(capsule: object) -> DLTensor:
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return DLTensor.from_address(get(capsule, b"dltensor"))


def check(what: str, ok: bool) -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {what}")
    if not ok:
        sys.exit(1)


def main() -> None:
    accel = torch_fl.accelerator()
    check(f"accelerator is a GPU vendor ({accel})", accel in ("cuda", "dcu"))
    want = 10 if torch.version.hip else 2
    torch.flagos.set_device(torch.flagos.device_count() - 1)  # a device other than 0 where there are two
    x = torch.arange(1 << 20, dtype=torch.float32, device="flagos").reshape(1024, 1024)
    index = x.device.index
    check(
        f"__dlpack_device__ {tuple(map(int, x.__dlpack_device__()))} == ({want}, {index})",
        tuple(map(int, x.__dlpack_device__())) == (want, index),
    )
    capsule = x.__dlpack__()  # held: its destructor frees the DLTensor read below
    head = capsule_head(capsule)
    check(
        f"capsule device ({head.device.device_type}, {head.device.device_id}), data {head.data:#x}",
        (head.device.device_type, head.device.device_id, head.data) == (want, index, x.data_ptr()),
    )
    y = torch.from_dlpack(x)
    check(
        f"torch.from_dlpack -> {y.device}, same pointer",
        y.device == torch.device("cuda", index) and y.data_ptr() == x.data_ptr(),
    )
    y[0, 0] = -1.0  # one memory: a write through the cuda tensor shows on flagos
    torch.cuda.synchronize(index)
    check("a write through the cuda tensor shows on flagos", x[0, 0].item() == -1.0)
    back = torch.flagos.from_dlpack(y)
    check(
        f"torch.flagos.from_dlpack -> {back.device}, same pointer",
        back.device == x.device and back.data_ptr() == x.data_ptr(),
    )
    check("values equal", torch.equal(back.cpu(), y.cpu()))
    cupy_reads(x)
    print("dlpack check: ok")


def cupy_reads(x: torch.Tensor) -> None:
    """Another library as the consumer: CuPy takes the capsule through the protocol, with its own stream handshake."""
    try:
        import cupy
    except ImportError as exc:
        check(f"CuPy reads the capsule: CuPy cannot be imported ({exc}); carry a cupy-cuda wheel in .whl/", False)
    with cupy.cuda.Device(x.device.index):
        c = cupy.from_dlpack(x)
        check(
            f"cupy.from_dlpack -> device {c.device.id}, shape {c.shape}, same pointer",
            c.device.id == x.device.index and c.shape == tuple(x.shape) and c.data.ptr == x.data_ptr(),
        )
        check("CuPy reads the values", bool((cupy.asnumpy(c) == x.cpu().numpy()).all()))
        c[1, 1] = 7.0  # one memory: a write through CuPy shows on flagos
        cupy.cuda.Device(x.device.index).synchronize()
    check("a write through CuPy shows on flagos", x[1, 1].item() == 7.0)


if __name__ == "__main__":
    main()
