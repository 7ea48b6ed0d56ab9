"""Samples made from an operator's schema, for the dtypes that neither OpInfo nor a recorded workload reached.

Each candidate fills the schema's required arguments with plausible values: tensors of the dtype at a small
shape (a matrix first, then a vector, then a 0-dim tensor), index tensors in range, masks of bool, sizes equal to
the shape, dims of 0, small positive counts; arguments with a default keep it, except ``dtype`` and ``device``,
which a factory needs to make its result in the dtype on the device. The worker keeps the first candidate that
native accepts; when native refuses them all, or an argument has a type no value can be made for, the reason is
what the report says instead of a verdict. Values come from a generator seeded by the operator and dtype, so a
generated sample's index reproduces it (``--sample N``).

Where those plain candidates all fail, laid-out ones follow: a square matrix, then a batch of channels at the
operator's spatial rank (``2d`` in its name, or a fixed-length window or size list; else 2), with lists of
the schema's fixed length (output sizes the spatial shape, unit windows, no padding except a pad operator's), a
depthwise convolution's weight, broadcastable ``values``, a tensor or a number for an optional ``min``, class
indices for an NLL loss's ``target`` (a 0-dim ``grad_output`` where ``reduction`` is mean), group norm's statistics
and weight, and glu's gradient at half its input's first dim.
An ``out=`` or in-place overload first borrows its functional twin's stored samples (``borrowed``).

A floating dtype whose samples mostly fall in some input class (a float16 model records its broadcasts, and one
plain product) also gets plain samples cast from another floating dtype's (``recast``), so that a failure in that
class leaves it "pass except" the class, as it leaves the other dtypes, instead of failing it for want of samples.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from .calls import Sample, input_classes, sample_dtype
from .verdict import MIN_SERVED

SHAPES: tuple[tuple[int, ...], ...] = ((4, 8), (8,), ())
SQUARE = (8, 8)
SOURCE = "generated"
_OPTIONAL_TENSOR = torch._C.OptionalType(torch._C.TensorType.get())
_OPTIONAL_NUMBER = torch._C.OptionalType(torch._C.NumberType.get())
STRINGS = {"reduce": "add"}  # a required str argument's plausible value, by name
INDEX_NAMES = ("index", "indices")
SIZE_NAMES = ("size", "shape", "output_size", "input_sizes", "sizes")
WINDOW_NAMES = ("kernel_size", "stride", "dilation", "padding", "output_padding")


class NoSample(Exception):
    """No value can be made for an argument of the schema; the message says which."""


class _Maker:
    def __init__(self, op: str, dtype: torch.dtype, shape: tuple[int, ...], laid_out: bool = False) -> None:
        self.op, self.dtype, self.shape, self.laid_out = op, dtype, shape, laid_out
        self.gen = torch.Generator().manual_seed(zlib.crc32(f"{op}/{dtype}".encode()))
        self.mean_loss = False  # a loss backward with reduction "mean": its grad_output is 0-dim

    def tensor(self, name: str) -> torch.Tensor:
        shape = self.shape
        if self.laid_out:
            if name == "weight" and len(shape) > 2:  # a depthwise convolution's: one unit filter per channel
                shape = (shape[1], 1, *[1] * (len(shape) - 2))
            elif name == "values":  # indexed by a list of index tensors on the first dim: broadcastable
                shape = shape[1:]
            elif name == "total_weight" or (name == "grad_output" and self.mean_loss):
                shape = ()
            elif name == "target" and "nll_loss" in self.op:  # class indices, one per sample and position
                classes = shape[1] if len(shape) > 1 else 1
                return torch.randint(0, classes, (shape[0], *shape[2:]), generator=self.gen)
            elif name in ("mean", "rstd") and "group_norm" in self.op:  # per sample and group (one group)
                shape = (shape[0], 1)
            elif name == "per_channel":
                shape = shape[1:2]
            elif name == "grad_output" and self.op.startswith("glu_backward"):  # glu halves its dim (0)
                shape = (shape[0] // 2, *shape[1:])
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
        if arg.type == _OPTIONAL_TENSOR and self.laid_out and name == "min":
            return self.tensor(name)
        if arg.type == _OPTIONAL_NUMBER and self.laid_out and name == "min":
            return self.scalar()
        if arg.type == _OPTIONAL_TENSOR and self.laid_out and name == "weight" and "group_norm" in self.op:
            return self.tensor("per_channel")  # its backward needs the affine weight for every output of its mask
        if kind.startswith("Optional["):
            return None
        if kind == "number":
            return self.scalar()
        if kind == "int":
            if self.laid_out and name in ("N", "C", "HxW") and len(self.shape) > 2:  # group norm's sizes
                return {"N": self.shape[0], "C": self.shape[1], "HxW": math.prod(self.shape[2:])}[name]
            return {"dim": 0, "diagonal": 0, "step": 1, "size": 2}.get(name, 1)
        if kind in ("List[int]", "SymInt[]", "List[SymInt]"):
            if self.laid_out and arg.N:
                return self.fixed(name, arg.N)
            if name in SIZE_NAMES:
                return list(self.shape)
            if name in WINDOW_NAMES:
                return [1, 1]
            return [0]
        if kind == "float":
            return 0.5
        if kind == "bool":
            return False
        if kind == "List[bool]":
            return [True] * (arg.N or 1)  # every output of a backward's output_mask
        if kind == "str" and name in STRINGS:
            return STRINGS[name]
        raise NoSample(f"its argument {name!r} is a {kind}, for which no sample can be made")

    def fixed(self, name: str, n: int) -> list[int]:
        """A list argument of the schema's fixed length ``n``, on the laid-out shape."""
        spatial = list(self.shape[2:])
        if name in ("input_size", "input_sizes", "size") and n == len(self.shape):
            return list(self.shape)
        if name in SIZE_NAMES and n == len(spatial):
            return spatial
        if name == "padding" and "pad" in self.op.split(".")[0]:
            return [1] * n  # a pad operator's padding, smaller than every spatial size
        return [0 if name in ("padding", "output_padding") else 1] * n


def spatial_rank(func: Any, op: str) -> int:
    """The spatial rank an operator's inputs have: ``Nd`` in its name, else its window or size lists' length."""
    if found := re.search(r"(\d)d(?:_|$)", op.split(".")[0]):
        return int(found.group(1))
    lengths = [a.N for a in func._schema.arguments if a.N and a.name in WINDOW_NAMES + ("output_size",)]
    return max(lengths, default=0)


def _build(
    func: Any, op: str, dtype: torch.dtype, shape: tuple[int, ...], laid_out: bool = False
) -> tuple[tuple, dict]:
    maker = _Maker(op, dtype, shape, laid_out)
    maker.mean_loss = laid_out and any(a.name == "reduction" for a in func._schema.arguments)  # reduction 1: mean
    args: list[Any] = []
    defaults: list[Any] = []  # defaulted positionals, passed only where a required one follows them
    kwargs: dict[str, Any] = {}
    for arg in func._schema.arguments:
        # a factory needs its dtype and device; clamp refuses a call with neither bound
        bound = arg.name == "min" and arg.type in (_OPTIONAL_TENSOR, _OPTIONAL_NUMBER)
        wanted = arg.name in ("dtype", "device") or (laid_out and bound)
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
    """Samples of ``op`` in ``dtype``: one per shape of ``SHAPES``, then the laid-out ones; raises NoSample for an
    argument that cannot be made."""
    rank = spatial_rank(func, op) or 2  # without one: images, the commonest batch of channels
    layouts = [*((shape, False) for shape in SHAPES), (SQUARE, True), ((2, 3, *[8] * rank), True)]
    for shape, laid_out in layouts:
        args, kwargs = _build(func, op, getattr(torch, dtype), shape, laid_out)
        # counted under the dtype the router's gate reads, which an index or mask argument may make another one
        yield Sample(op=op, args=args, kwargs=kwargs, source=SOURCE, dtype=sample_dtype(args, kwargs))


def twin(op: str) -> str | None:
    """The functional operator whose samples fit ``op``: ``addmm`` for ``addmm.out``, ``clamp.Tensor`` for
    ``clamp_.Tensor``; None for a functional operator."""
    name, _, overload = op.partition(".")
    if overload == "out":
        return name
    if name.endswith("_") and not name.startswith("_"):
        return name[:-1] + (f".{overload}" if overload else "")
    return None


def borrowed(
    func: Any, op: str, dtype: str, samples: Callable[[str], list[Sample]], run: Callable[[Any, Sample], Any]
) -> Iterator[Sample]:
    """``op``'s twin's stored samples of ``dtype`` made into calls of ``op``: an in-place overload takes them as
    they are; an ``out=`` one gets its out tensors at the shapes and dtypes of the twin's results on native
    (``run`` gives them, or None where native refuses the twin's sample)."""
    from .calls import resolve_op

    twin_op = twin(op)
    if twin_op is None:
        return
    outs = [a.name for a in func._schema.arguments if a.kwarg_only and a.alias_info and a.alias_info.is_write]
    twin_func = resolve_op(twin_op) if outs else None
    for sample in samples(twin_op):
        if sample.dtype != dtype:
            continue
        kwargs = dict(sample.kwargs)
        if outs:
            results = run(twin_func, sample)
            if results is None or len(results) != len(outs):
                continue
            kwargs.update({name: torch.empty(r.shape, dtype=r.dtype) for name, r in zip(outs, results, strict=True)})
        yield Sample(op=op, args=sample.args, kwargs=kwargs, source=f"{SOURCE} from {twin_op}", dtype=dtype)


def recast(samples: list[Sample], dtype: str) -> Iterator[Sample]:
    """Samples of the floating ``dtype`` made from other floating dtypes' samples that fall in no input class:
    each tensor of the sample's own dtype cast to ``dtype``, one per call shape that ``dtype`` has no sample of yet,
    in the stored order."""
    target = getattr(torch, dtype, None)
    if not isinstance(target, torch.dtype) or not target.is_floating_point:
        return
    seen = {s.describe() for s in samples if s.dtype == dtype}
    for sample in samples:
        source = getattr(torch, sample.dtype, None)
        if sample.dtype == dtype or not isinstance(source, torch.dtype) or not source.is_floating_point:
            continue
        if input_classes(sample.args, sample.kwargs):
            continue

        def cast(x: Any, source: torch.dtype = source) -> Any:
            return x.to(target) if isinstance(x, torch.Tensor) and x.dtype == source else x

        args, kwargs = torch.utils._pytree.tree_map(cast, (sample.args, sample.kwargs))
        made = Sample(sample.op, args, kwargs, f"{sample.source}, cast from {sample.dtype}", dtype)
        if sample_dtype(args, kwargs) != dtype or (shape := made.describe()) in seen:
            continue
        seen.add(shape)
        yield made


def top_up(
    samples: list[Sample], judged: list[Sample], dtypes: Sequence[str], add: Callable[[int, Sample], bool]
) -> None:
    """Tops each floating dtype of ``dtypes`` that has a judged sample up to ``verdict.MIN_SERVED`` samples in no
    input class, appending ``recast`` ones to ``samples`` (``add`` runs native on one and says whether it took it):
    a dtype whose failures all fall in a class is then judged "pass except" it on samples of its own, where too
    few would fail the dtype whole. A dtype with none judged is left alone: native has no kernel for it, or no
    sample could be made, and the report says which."""
    stored = list(samples)
    for dtype in dtypes:
        if not any(s.dtype == dtype for s in judged):
            continue
        plain = sum(1 for s in judged if s.dtype == dtype and not input_classes(s.args, s.kwargs))
        for candidate in recast(stored, dtype) if plain < MIN_SERVED else ():
            samples.append(candidate)
            plain += add(len(samples) - 1, candidate)
            if plain >= MIN_SERVED:
                break
