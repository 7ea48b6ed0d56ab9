"""The legacy typed-storage classes of the flagos device: ``torch.flagos.FloatStorage`` and its kin.

``Tensor.storage_type()`` answers with the class of that name in the device's module (``torch.FloatStorage`` for
the CPU, ``torch.cuda.FloatStorage`` for CUDA) and with None when the module has none, so flagos tensors need them
in ``torch.flagos`` to answer as CPU and CUDA tensors do. torch tells the classes' device by the last part of
their module's name, which is ``flagos`` for ``torch_fl.flagos``. As on CUDA, the constructors that build storage
in host memory (``from_buffer`` and the shared-file ones) are refused: their memory could not be flagos memory.
"""

from __future__ import annotations

from types import ModuleType

import torch
from torch._utils import classproperty
from torch.storage import _LegacyStorage, _warn_typed_storage_removal

WAY_OUT = "build it on the host, then move it with .to('flagos')"


class _FlagosLegacyStorage(_LegacyStorage):
    @classmethod
    def from_buffer(cls, *args, **kwargs):  # noqa: ANN002, ANN003, ANN206 - TypedStorage's signature
        _warn_typed_storage_removal()
        raise RuntimeError(f"from_buffer: a flagos storage cannot wrap a host buffer; {WAY_OUT}")

    @classmethod
    def _new_with_weak_ptr(cls, *args, **kwargs):  # noqa: ANN002, ANN003, ANN206
        raise RuntimeError("_new_with_weak_ptr: not available for flagos storage")

    @classmethod
    def _new_shared_filename(cls, *args, **kwargs):  # noqa: ANN002, ANN003, ANN206
        raise RuntimeError(f"_new_shared_filename: a flagos storage cannot live in a shared file; {WAY_OUT}")


def _storage_class(module: str, name: str, dtype: torch.dtype) -> type:
    def deprecated_dtype(cls: type) -> torch.dtype:
        _warn_typed_storage_removal()
        return dtype

    namespace = {
        "__module__": module,
        "__qualname__": name,
        "dtype": classproperty(deprecated_dtype),
        "_dtype": classproperty(lambda cls: dtype),
    }
    return type(_FlagosLegacyStorage)(name, (_FlagosLegacyStorage,), namespace)


def install(device_module: ModuleType) -> None:
    """Give ``device_module`` (``torch.flagos``) a storage class per dtype that CUDA has one for (the quantized
    dtypes have none there either)."""
    for dtype, name in torch.storage._dtype_to_storage_type_map().items():
        if name.startswith("Q") or hasattr(device_module, name):
            continue
        setattr(device_module, name, _storage_class(device_module.__name__, name, dtype))
