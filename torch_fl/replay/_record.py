"""The recorder: what one provider call does on the device, as a plan the C++ replay can run (csrc/replay/plan.h).

While a call records, a TorchDispatchMode sees every aten op the provider runs on the vendor tensors and the
launch hooks (``_triton`` for Triton, ``launch`` for providers that launch module functions themselves) see every
kernel launch. The call itself runs unchanged; the recording only decides whether it can be replayed. Refusals are
decided by what the call did, never by a list of operators: anything the plan cannot reproduce exactly refuses the
key (torch_fl.replay says what).
"""

from __future__ import annotations

import re
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .. import _core

_local = threading.local()

# aten ops that allocate, by overload packet; the _FILLED ones also fill, with the value their arguments give.
_ALLOCATING = {"empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided"}
_FILLED = {
    "zeros": lambda a, k: 0,
    "zeros_like": lambda a, k: 0,
    "new_zeros": lambda a, k: 0,
    "ones": lambda a, k: 1,
    "ones_like": lambda a, k: 1,
    "new_ones": lambda a, k: 1,
    "full": lambda a, k: a[1] if len(a) > 1 else k["fill_value"],
    "full_like": lambda a, k: a[1] if len(a) > 1 else k["fill_value"],
    "new_full": lambda a, k: a[2] if len(a) > 2 else k["fill_value"],
}

# Parameter kinds of the wire format (csrc/ops/replay.cpp reads it; torch_fl/_core.py flattens it).
_ARG, _ALLOC, _BYTES = 0, 1, 2
_STEP_ALLOC, _STEP_FILL, _STEP_LAUNCH, _STEP_COPY = 0, 1, 2, 3

# aten ops that copy their first argument into a result they allocate (copy_, which writes its first argument, is
# apart). contiguous and to reach the recorder whole on some torch lines: a copy where their result has memory of
# its own, the argument itself otherwise.
_COPYING = {"clone", "_to_copy", "contiguous", "to"}

# How launch() packs scalar parameters of a Triton type: floats in their own width, as Triton >= 3.5 passes them
# (bf16 is a float32 cut to its upper half, pack_scalar says so); integers, signed or not, as their two's
# complement bits in their width, a byte at the least (i1, u1).
_FLOAT_FORMATS = {"fp16": "<e", "fp32": "<f", "fp64": "<d"}
_INT_TYPE = re.compile(r"[iu](?P<bits>1|8|16|32|64)")


class Refused(Exception):
    """A call that cannot be replayed; the message says why (it shows in torch_fl.replay.stats())."""


def pack_scalar(ty: str, value: object) -> int:
    """The little-endian bits of a scalar kernel parameter of Triton type ``ty``."""
    if ty == "bf16":
        (bits,) = struct.unpack("<I", struct.pack("<f", float(value)))
        return bits >> 16
    if ty in _FLOAT_FORMATS:
        return int.from_bytes(struct.pack(_FLOAT_FORMATS[ty], float(value)), "little")
    integer = _INT_TYPE.fullmatch(ty)
    if integer is None:
        raise Refused(f"a kernel parameter of type {ty!r} the replay does not pack")
    return int(value) & ((1 << max(8, int(integer["bits"]))) - 1)


def _slots(args: Sequence[object], kwargs: dict[str, object]) -> list[torch.Tensor | None]:
    # The argument slots as csrc/replay/key.cpp numbers them: tensors, and every element of a tensor list.
    out: list[torch.Tensor | None] = []
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            out.append(value)
        elif isinstance(value, (list, tuple)) and any(isinstance(e, torch.Tensor) for e in value):
            out.extend(e if isinstance(e, torch.Tensor) else None for e in value)
    return out


def _span(t: torch.Tensor) -> tuple[int, int]:
    s = t.untyped_storage()
    return s.data_ptr(), s.data_ptr() + s.nbytes()


@dataclass
class _Launch:
    function: int
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int
    params: list[tuple[int, int, int, int]]


@dataclass
class Recording:
    slots: list[torch.Tensor | None]
    allocs: list[torch.Tensor] = field(default_factory=list)
    steps: list[tuple[int, int, object]] = field(default_factory=list)
    launches: list[_Launch] = field(default_factory=list)
    copies: list[tuple[tuple, tuple]] = field(default_factory=list)  # (destination view, source view)
    refusal: str | None = None

    def refuse(self, why: str) -> None:
        if self.refusal is None:
            self.refusal = why

    # -- what the provider does ----------------------------------------------------------------
    def aten(self, func: torch._ops.OpOverload, args: tuple, kwargs: dict, out: object) -> None:
        packet = func.overloadpacket.__name__
        source = args[0] if args else None
        if self._keyed_host_scalar(source):
            # A host scalar argument, whose value is part of the key (csrc/replay/key.cpp): reading it is
            # reading a constant, and copying it to the device is filling fresh memory with that constant.
            if packet in ("_local_scalar_dense", "item"):
                return None
            if packet in ("_to_copy", "to") and isinstance(out, torch.Tensor) and out.device.type != "cpu":
                self._alloc(out)
                return self._fill(out, source.item())
        if packet in _ALLOCATING or packet in _FILLED:
            if not isinstance(out, torch.Tensor):
                return self.refuse(f"aten::{packet} returned no tensor")
            self._alloc(out)
            if packet in _FILLED:
                self._fill(out, _FILLED[packet](args, kwargs))
        elif packet in _COPYING and isinstance(source, torch.Tensor) and isinstance(out, torch.Tensor):
            if out.untyped_storage().data_ptr() != source.untyped_storage().data_ptr():
                self._alloc(out)
                self._copy(out, source)
        elif packet == "copy_" and isinstance(source, torch.Tensor) and isinstance(args[1], torch.Tensor):
            self._copy(source, args[1])
        elif packet in ("zero_", "fill_") and isinstance(out, torch.Tensor):
            if packet == "fill_" and isinstance(args[1], torch.Tensor):
                return self.refuse("it fills a tensor with a tensor's value (fill_.Tensor)")
            self._fill(out, 0 if packet == "zero_" else args[1])
        elif not self._metadata_only(func, args, out):
            self.refuse(f"it runs aten::{func.name().split('::')[-1]} besides its kernels")

    def _keyed_host_scalar(self, t: object) -> bool:
        return (
            isinstance(t, torch.Tensor)
            and t.device.type == "cpu"
            and t.dim() == 0
            and _vendor_type() != "cpu"
            and any(t is s for s in self.slots)
        )

    def _alloc(self, t: torch.Tensor) -> None:
        if t.device.type != _vendor_type():
            return self.refuse(f"it allocates a tensor on {t.device}")
        self.steps.append((_STEP_ALLOC, len(self.allocs), None))
        self.allocs.append(t)

    def _fill(self, t: torch.Tensor, value: object) -> None:
        for i in range(len(self.allocs) - 1, -1, -1):
            a = self.allocs[i]
            if a is t or (
                a.data_ptr() == t.data_ptr() and a.numel() == t.numel() and a.is_contiguous() and t.is_contiguous()
            ):
                if isinstance(value, torch.Tensor) or not isinstance(value, (bool, int, float)):
                    return self.refuse(f"it fills memory with a value of type {type(value).__name__}")
                self.steps.append((_STEP_FILL, i, value))
                return None
        return self.refuse("it fills memory that it did not just allocate")

    def _copy(self, dst: torch.Tensor, src: torch.Tensor) -> None:
        # A copy replays as torch's own copy between two views, each of an argument or of memory the call
        # allocated: FlagGems makes its inputs contiguous (a reduction over several dimensions permutes them
        # first) and writes in-place results back with copy_. Conjugate and negative bits are not part of a view.
        if self.refusal is not None:
            return
        if any(t.is_conj() or t.is_neg() for t in (dst, src)):
            return self.refuse("it copies a tensor with a conjugate or negative bit")
        target, origin = self._view(dst), self._view(src)
        if target is None or origin is None:
            side = "into" if target is None else "from"
            return self.refuse(f"it copies {side} memory that is neither an argument nor allocated by the call")
        self.steps.append((_STEP_COPY, len(self.copies), None))
        self.copies.append((target, origin))
        return None

    def _view(self, t: torch.Tensor) -> tuple | None:
        """``t`` as a view of an allocation (its storage offset) or of an argument (its offset from the
        argument's own); None where it is neither."""
        base = t.untyped_storage().data_ptr()
        shape = (tuple(t.shape), tuple(t.stride()))
        for i in range(len(self.allocs) - 1, -1, -1):  # newest first, as for pointers
            if self.allocs[i].untyped_storage().data_ptr() == base:
                return (_ALLOC, i, *shape, t.storage_offset())
        for i, arg in enumerate(self.slots):
            if arg is not None and arg.untyped_storage().data_ptr() == base:
                return (_ARG, i, *shape, t.storage_offset() - arg.storage_offset())
        return None

    @staticmethod
    def _metadata_only(func: torch._ops.OpOverload, args: tuple, out: object) -> bool:
        # A view (writes nothing, every result shares the storage of an input), or a question about dtypes
        # (result_type, promote_types: they return a dtype and read no data).
        if func._schema.is_mutable:
            return False
        returns = func._schema.returns
        if returns and all(str(r.real_type) == "ScalarType" for r in returns):
            return True
        results = out if isinstance(out, (list, tuple)) else (out,)
        storages = {a.untyped_storage().data_ptr() for a in args if isinstance(a, torch.Tensor)}
        return bool(results) and all(
            isinstance(r, torch.Tensor) and r.untyped_storage().data_ptr() in storages for r in results
        )

    def launch(self, function: int, grid: Sequence[int], block: Sequence[int], shared: int, params: list) -> None:
        """One kernel launch; ``params`` holds ("ptr", address) and ("bytes", bits) pairs in parameter order."""
        if self.refusal is not None:
            return
        mapped = []
        try:
            for kind, value in params:
                mapped.append(self._pointer(value) if kind == "ptr" else (_BYTES, 0, 0, int(value)))
        except Refused as exc:
            return self.refuse(str(exc))
        self.launches.append(_Launch(int(function), tuple(grid), tuple(block), int(shared), mapped))
        self.steps.append((_STEP_LAUNCH, len(self.launches) - 1, None))
        return None

    def _pointer(self, address: int) -> tuple[int, int, int, int]:
        if address == 0:
            return (_BYTES, 0, 0, 0)
        for i in range(len(self.allocs) - 1, -1, -1):  # newest first: a freed block's address can come back
            lo, hi = _span(self.allocs[i])
            if lo <= address < hi:
                return (_ALLOC, i, address - self.allocs[i].data_ptr(), 0)
        for i, t in enumerate(self.slots):
            if t is not None:
                lo, hi = _span(t)
                if lo <= address < hi:
                    return (_ARG, i, address - t.data_ptr(), 0)
        raise Refused("a kernel uses memory that is neither an argument nor allocated by the call")

    # -- the result ----------------------------------------------------------------------------
    def wire(self, result: object) -> tuple:
        if self.refusal is None:
            try:
                outputs = [self._output(r) for r in self._results(result)]
            except Refused as exc:
                self.refuse(str(exc))
        if self.refusal is not None:
            return ("refused", self.refusal)
        if not self.launches:
            return ("refused", "it launched no kernel the recorder saw")
        allocs = [(a.dtype, tuple(a.shape), tuple(a.stride()), a.storage_offset()) for a in self.allocs]
        launches = [(x.function, x.grid, x.block, x.shared, x.params) for x in self.launches]
        return ("plan", allocs, self.steps, launches, outputs, self.copies)

    @staticmethod
    def _results(result: object) -> list[object]:
        # A tuple is one value per return of the op; a list is one Tensor[] return, which csrc/replay refuses.
        if result is None:
            return []
        return list(result) if isinstance(result, tuple) else [result]

    def _output(self, r: object) -> tuple:
        if not isinstance(r, torch.Tensor):  # a list (Tensor[]), a number, None
            raise Refused(f"a result is a {type(r).__name__}, not a tensor")
        for i, t in enumerate(self.slots):
            if t is r:
                return (0, i, True, (), (), 0)
        base = r.untyped_storage().data_ptr()
        for i in range(len(self.allocs) - 1, -1, -1):
            a = self.allocs[i]
            if a.untyped_storage().data_ptr() == base:
                whole = a is r or (
                    a.shape == r.shape and a.stride() == r.stride() and a.storage_offset() == r.storage_offset()
                )
                return (1, i, whole, tuple(r.shape), tuple(r.stride()), r.storage_offset())
        raise Refused("a result is neither an argument nor memory the call allocated")


def _vendor_type() -> str:
    return "cpu" if _core.accelerator() == "cpu" else "cuda"


class _Watch(TorchDispatchMode):
    def __init__(self, rec: Recording) -> None:
        super().__init__()
        self.rec = rec

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.rec.aten(func, args, kwargs, out)
        return out


def active() -> Recording | None:
    """The recording of this thread's provider call, if one is being recorded."""
    return getattr(_local, "recording", None)


def record_call(kernel, args: tuple, kwargs: dict) -> tuple[object, tuple]:
    """Run ``kernel(*args, **kwargs)`` while recording it: (its result, the recording's wire form)."""
    rec = Recording(_slots(args, kwargs))
    previous = active()
    _local.recording = rec
    try:
        with _Watch(rec):
            result = kernel(*args, **kwargs)
    finally:
        _local.recording = previous
    return result, rec.wire(result)


def launch(
    function: int,
    grid: Sequence[int],
    block: Sequence[int],
    signature: Sequence[str],
    args: Sequence[object],
    *,
    shared_bytes: int = 0,
    device: int | None = None,
) -> None:
    """Launch a loaded module function on the flagos device's current stream, as a provider that compiled its own
    kernels does; recorded for replay like a Triton launch.

    ``signature`` gives each parameter's type in Triton's spelling: ``"*fp32"`` (any ``*``: a pointer, given as a
    tensor, an address or None) or a scalar type (``i32``, ``i64``, ``fp32``, ...). Under CPU emulation
    ``function`` is the address of a host function ``void(const uint32_t grid[3], void** params)``.
    """
    if len(signature) != len(args):
        raise ValueError(f"launch: {len(signature)} parameter types for {len(args)} arguments")
    params = []
    for ty, value in zip(signature, args, strict=True):
        if ty.startswith("*"):
            address = 0 if value is None else value if isinstance(value, int) else value.data_ptr()
            params.append(("ptr", address))
        else:
            params.append(("bytes", pack_scalar(ty, value)))
    rec = active()
    if rec is not None:
        rec.launch(function, grid, block, shared_bytes, params)
    values = [v for _, v in params]
    _core.launch_module(function, tuple(grid), tuple(block), shared_bytes, values, -1 if device is None else device)
