"""Samples made from an operator's schema, for the dtypes that neither OpInfo nor a recorded workload reached.

Each candidate fills the schema's required arguments with plausible values: tensors of the dtype at a small
shape (a matrix first, then a vector, then a 0-dim tensor), index tensors in range, masks of bool, sizes equal to
the shape, dims of 0, small positive counts; arguments with a default keep it, except ``dtype`` and ``device``,
which a factory needs to make its result in the dtype on the device. The worker keeps the first candidate that
native accepts; when native refuses them all, or an argument has a type no value can be made for, the reason is
what the report says instead of a verdict. Values come from a generator seeded by the operator and dtype, so a
generated sample's index reproduces it (``--sample N``).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

import torch

from .calls import Sample, sample_dtype

SHAPES: tuple[tuple[int, ...], ...] = ((4, 8), (8,), ())
SOURCE = "generated"
INDEX_NAMES = ("index", "indices")
SIZE_NAMES = ("size", "shape", "output_size", "input_sizes", "sizes")
WINDOW_NAMES = ("kernel_size", "stride", "dilation", "padding", "output_padding")


class NoSample(Exception):
    """No value can be made for an argument of the schema; the message says which."""


class _Maker:
    def __init__(self, op: str, dtype: torch.dtype, shape: tuple[int, ...]) -> None:
        self.dtype, self.shape = dtype, shape
        self.gen = torch.Generator().manual_seed(zlib.crc32(f"{op}/{dtype}".encode()))

    def tensor(self, name: str) -> torch.Tensor:
        shape = self.shape
        if name in INDEX_NAMES:
            high = max(1, min(shape, default=1))
            return torch.randint(0, high, shape, generator=self.gen)
        if name in ("mask", "condition"):
            return torch.rand(shape, generator=self.gen) > 0.5
        if self.dtype == torch.bool:
            return torch.rand(shape, generator=self.gen) > 0.5
        if self.dtype.is_floating_point or self.dtype.is_complex:
            return torch.randn(shape, generator=self.gen).to(self.dtype)
        low = 0 if self.dtype == torch.uint8 else -4
        return torch.randint(low, 5, shape, generator=self.gen).to(self.dtype)

    def index_list(self) -> list[torch.Tensor]:
        high = self.shape[0] if self.shape else 1
        return [torch.randint(0, high, (2,), generator=self.gen)]

    def scalar(self) -> Any:
        if self.dtype == torch.bool:
            return True
        return 0.5 if self.dtype.is_floating_point or self.dtype.is_complex else 2

    def value(self, arg: Any) -> Any:
        """A value for a required argument, by its type and name."""
        name, kind = arg.name, str(arg.type)
        if name == "dtype":
            return self.dtype
        if name == "device":
            return torch.device(torch._C._get_privateuse1_backend_name())  # flagos, once torch_fl is imported
        if name == "train":
            return True
        if kind == "Tensor":
            return self.tensor(name)
        if kind == "List[Tensor]":
            return [self.tensor(name), self.tensor(name)]
        if kind == "List[Optional[Tensor]]":
            return self.index_list()
        if kind.startswith("Optional["):
            return None
        if kind == "number":
            return self.scalar()
        if kind == "int":
            return {"dim": 0, "diagonal": 0, "step": 1, "size": 2}.get(name, 1)
        if kind in ("List[int]", "SymInt[]", "List[SymInt]"):
            if name in SIZE_NAMES:
                return list(self.shape)
            if name in WINDOW_NAMES:
                return [1, 1]
            return [0]
        if kind == "float":
            return 0.5
        if kind == "bool":
            return False
        raise NoSample(f"its argument {name!r} is a {kind}, for which no sample can be made")


def _build(func: Any, op: str, dtype: torch.dtype, shape: tuple[int, ...]) -> tuple[tuple, dict]:
    maker = _Maker(op, dtype, shape)
    args: list[Any] = []
    defaults: list[Any] = []  # defaulted positionals, passed only where a required one follows them
    kwargs: dict[str, Any] = {}
    for arg in func._schema.arguments:
        wanted = arg.name in ("dtype", "device")
        if arg.has_default_value() and not wanted:
            if not arg.kwarg_only:
                defaults.append(arg.default_value)
            continue
        value = maker.value(arg)
        if arg.kwarg_only or (arg.has_default_value() and wanted):
            kwargs[arg.name] = value
        else:
            args += [*defaults, value]
            defaults = []
    return tuple(args), kwargs


def candidates(func: Any, op: str, dtype: str) -> Iterator[Sample]:
    """Samples of ``op`` in ``dtype``, one per shape of ``SHAPES``; raises NoSample for an argument that cannot
    be made."""
    for shape in SHAPES:
        args, kwargs = _build(func, op, getattr(torch, dtype), shape)
        # counted under the dtype the router's gate reads, which an index or mask argument may make another one
        yield Sample(op=op, args=args, kwargs=kwargs, source=SOURCE, dtype=sample_dtype(args, kwargs))
