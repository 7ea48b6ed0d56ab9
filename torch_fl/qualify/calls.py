"""Recorded operator calls: the samples a qualification runs.

A sample is one ATen call as a workload made it: the overload, its arguments with every tensor as it was before
the call (values, shape, strides, storage offset, and which arguments share a storage), and where it came from.
Samples are recorded with a TorchDispatchMode, so they are the calls that reach the router, after torch's
composite decompositions. They are kept on the host, one ``torch.save`` file per operator under a samples
directory (``<dir>/<op>.pt``), which a qualification worker loads when it reaches the operator.

Calls with the same signature (overload, dtypes, shapes, strides, non-tensor arguments) are kept once per source:
a model's 8 layers make the same calls 8 times.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from .._atomic import write_atomic
from .._chain import INPUT_CLASSES

SAMPLE_SUFFIX = ".pt"


def op_name(func: Any) -> str:
    """``aten.add.Tensor`` -> ``add.Tensor``; ``aten.relu.default`` -> ``relu`` (the conf's spelling)."""
    schema = func._schema
    name = schema.name.partition("::")[2]
    return f"{name}.{schema.overload_name}" if schema.overload_name else name


def resolve_op(name: str) -> Any:
    """The OpOverload of a conf name (``add.Tensor``, ``relu``)."""
    base, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten, base), overload or "default")


def _describe(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return ("T", str(x.dtype).removeprefix("torch."), tuple(x.shape), tuple(x.stride()), x.storage_offset() > 0)
    if isinstance(x, (list, tuple)):
        return tuple(_describe(v) for v in x)
    if isinstance(x, dict):
        return tuple(sorted((k, _describe(v)) for k, v in x.items()))
    return repr(x)


def signature(op: str, args: tuple, kwargs: dict) -> str:
    return repr((op, _describe(args), _describe(kwargs)))


def sample_dtype(args: tuple, kwargs: dict) -> str:
    """The dtype a sample counts for: its first floating-point tensor's, else its first tensor's, else its
    ``dtype`` argument's (a factory's), else "none". The router's dtype gate reads a call's dtype by the same rule
    (csrc/dispatch/dtype_gate.h), so a route serves a dtype exactly when the samples counted for it passed."""
    tensors = [x for x in tree_flatten((args, kwargs))[0] if isinstance(x, torch.Tensor)]
    floating = [t for t in tensors if t.is_floating_point() or t.is_complex()]
    chosen = floating or tensors
    if chosen:
        return str(chosen[0].dtype).removeprefix("torch.")
    dtype = kwargs.get("dtype")
    return str(dtype).removeprefix("torch.") if isinstance(dtype, torch.dtype) else "none"


def input_classes(args: tuple, kwargs: dict) -> tuple[str, ...]:
    """The input classes a sample falls in (torch_fl/_chain.py ``INPUT_CLASSES``), by the router's test of a call
    (csrc/dispatch/dtype_gate.h): ``strided`` where a tensor argument is not contiguous, ``0dim`` where one is
    0-dim, ``broadcast`` where two differ in shape, ``mixed`` where two of one or more dimensions differ in dtype.
    Every tensor counts, in lists too."""
    tensors = [x for x in tree_flatten((args, kwargs))[0] if isinstance(x, torch.Tensor)]
    found = {
        "strided": any(not t.is_contiguous() for t in tensors),
        "0dim": any(t.dim() == 0 for t in tensors),
        "broadcast": len({tuple(t.shape) for t in tensors}) > 1,
        "mixed": len({t.dtype for t in tensors if t.dim()}) > 1,
    }
    return tuple(c for c in INPUT_CLASSES if found[c])


def moved(obj: Any, device: str | torch.device) -> Any:
    """``obj`` with every tensor copied to ``device``, one copy per storage, so views keep sharing memory and every
    tensor keeps its shape, strides and offset. Devices among the arguments (``device=`` of a factory) stay as
    recorded: a factory recorded on flagos makes its tensor on flagos again."""
    target = torch.device(device)
    storages: dict[tuple[str, int, int], Any] = {}

    def convert(x: Any) -> Any:
        if not isinstance(x, torch.Tensor):
            return x
        storage = x.untyped_storage()
        key = (str(x.device), storage.data_ptr(), storage.nbytes())
        if key not in storages:
            raw = torch.empty(0, dtype=torch.uint8, device=x.device).set_(storage)
            storages[key] = raw.to(target).untyped_storage()
        return torch.empty(0, dtype=x.dtype, device=target).set_(
            storages[key], x.storage_offset(), x.size(), x.stride()
        )

    return tree_map(convert, obj)


@dataclass(frozen=True)
class _Format:
    """A torch.memory_format in a samples file (memory formats do not pickle)."""

    name: str


def _to_file(x: Any) -> Any:
    return _Format(str(x).removeprefix("torch.")) if isinstance(x, torch.memory_format) else x


def _from_file(x: Any) -> Any:
    return getattr(torch, x.name) if isinstance(x, _Format) else x


_PLAIN = (
    torch.Tensor,
    int,
    float,
    bool,
    complex,
    str,
    type(None),
    torch.dtype,
    torch.device,
    torch.layout,
    torch.memory_format,
)


@dataclass
class Sample:
    op: str
    args: tuple
    kwargs: dict
    source: str  # "opinfo:add" or the name a recording was given ("model:llama train")
    dtype: str

    def describe(self) -> str:
        """One line: ``add.Tensor(bfloat16[64, 32] strides (64, 2), 1.5)``."""

        def one(x: Any) -> str:
            if isinstance(x, torch.Tensor):
                dtype = str(x.dtype).removeprefix("torch.")
                contiguous = x.is_contiguous() and x.storage_offset() == 0
                layout = "" if contiguous else f" strides {tuple(x.stride())} offset {x.storage_offset()}"
                return f"{dtype}{list(x.shape)}{layout}"
            if isinstance(x, (list, tuple)):
                inner = ", ".join(one(v) for v in x)
                return f"[{inner}]"
            return repr(x)

        parts = [one(a) for a in self.args] + [f"{k}={one(v)}" for k, v in self.kwargs.items()]
        return f"{self.op}({', '.join(parts)})"


@dataclass
class SampleStore:
    """The samples directory: ``<op>.pt`` per operator, each a list of samples as saved dicts."""

    root: Path
    per_signature: int = 1
    _pending: dict[str, list[dict]] = field(default_factory=dict)
    _seen: dict[str, int] = field(default_factory=dict)
    skipped: int = 0

    def path(self, op: str) -> Path:
        return self.root / f"{op}{SAMPLE_SUFFIX}"

    def ops(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name[: -len(SAMPLE_SUFFIX)] for p in self.root.glob(f"*{SAMPLE_SUFFIX}"))

    def load(self, op: str) -> list[Sample]:
        path = self.path(op)
        if not path.is_file():
            return []
        out = []
        for d in torch.load(path, weights_only=False):
            args, kwargs = tree_map(_from_file, (d.pop("args"), d.pop("kwargs")))
            out.append(Sample(op=op, args=args, kwargs=kwargs, **d))
        return out

    def wants(self, op: str, args: tuple, kwargs: dict, source: str) -> str | None:
        """The signature key when this call is worth keeping (not seen ``per_signature`` times for this source)."""
        key = source + "\0" + signature(op, args, kwargs)
        if self._seen.get(key, 0) >= self.per_signature:
            return None
        return key

    def add(self, op: str, key: str, args: tuple, kwargs: dict, source: str) -> None:
        self._seen[key] = self._seen.get(key, 0) + 1
        odd = [x for x in tree_flatten((args, kwargs))[0] if not isinstance(x, _PLAIN)]
        if odd:  # e.g. a SymInt or an opaque object: the sample could not be saved, nor replayed elsewhere
            raise TypeError(f"{op}: an argument of type {type(odd[0]).__name__} cannot be recorded")
        args, kwargs = tree_map(_to_file, moved((args, kwargs), "cpu"))
        self._pending.setdefault(op, []).append(
            {"args": args, "kwargs": kwargs, "source": source, "dtype": sample_dtype(args, kwargs)}
        )

    def flush(self) -> int:
        """Append the pending samples to their operators' files (each file replaced atomically)."""
        self.root.mkdir(parents=True, exist_ok=True)
        written = 0
        for op, new in sorted(self._pending.items()):
            path = self.path(op)
            old = torch.load(path, weights_only=False) if path.is_file() else []
            buffer = io.BytesIO()
            torch.save(old + new, buffer)
            write_atomic(path, buffer.getvalue())
            written += len(new)
        self._pending.clear()
        return written


class _Recorder(TorchDispatchMode):
    def __init__(self, store: SampleStore, source: str, wanted: Callable[[str], bool]) -> None:
        super().__init__()
        self.store, self.source, self.wanted = store, source, wanted

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        if isinstance(func, torch._ops.OpOverload) and func.namespace == "aten":
            name = op_name(func)
            if self.wanted(name):
                key = self.store.wants(name, args, kwargs, self.source)
                if key is not None:
                    with torch._C._DisableTorchDispatch():
                        try:
                            self.store.add(name, key, args, kwargs, self.source)  # before the call: inputs as given
                        except (RuntimeError, TypeError, NotImplementedError):
                            self.store.skipped += 1  # a layout with no storage to copy (sparse, nested)
        return func(*args, **kwargs)


@contextlib.contextmanager
def recording(samples: str | os.PathLike[str], source: str, ops: Collection[str] | None = None) -> Iterator[None]:
    """Record the ATen calls made inside the block as qualification samples under ``samples``.

    ``source`` names the workload in the report ("my-model train"); ``ops`` limits the recording to these
    operators (by default every call is kept once per signature). Wrap a training step or a ``generate``::

        with torch_fl.qualify.recording("samples", "my-model train"):
            loss = model(batch).loss; loss.backward(); opt.step()
    """
    store = SampleStore(Path(samples))
    allowed = set(ops) if ops is not None else None
    with _Recorder(store, source, (lambda op: op in allowed) if allowed is not None else (lambda op: True)):
        yield
    store.flush()
