"""What a capture sees: every ATen call made between ``capture_begin`` and ``capture_end`` on this thread.

One TorchDispatchMode serves both vendors. On every vendor it refuses, at capture time and naming the op, the work
a replay could not repeat: host reads of device data (``.item()``, ``.cpu()``, ops whose output shape depends on
the data), copies between host and device, writes to host tensors that existed before the capture (a replay would
not repeat them: Adam's host step counter is the classic one), and ops whose route is ``cpu``. Work inside one op's
kernel is not seen here; where the vendor refuses it under capture (CUDA's copy of a host tensor), the refusal is
raised as a CaptureError naming the op. Under emulation it also records the flagos calls so that ``_emulation.py``
can replay them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from .._env import op_variable
from .._errors import CaptureError
from ..routing import routes as _routes

# Allocation only: a replay has nothing to redo for them (CUDA replays no kernel for an empty tensor either).
_ALLOCATIONS = frozenset({"empty.memory_format", "empty_strided", "empty_like", "new_empty", "new_empty_strided"})
# Tags of ops whose result a host must read before the op can finish.
_HOST_READ_TAGS = (torch.Tag.data_dependent_output, torch.Tag.dynamic_output_shape)
# How a vendor words a refusal of work under capture: CUDA's copy check ("... during CUDA graph capture ..."), its
# stream errors ("operation not permitted when stream is capturing", cudaErrorStreamCapture*), HIP's alike.
_CAPTURE_REFUSAL = re.compile(r"graph capture|stream is capturing|StreamCapture", re.IGNORECASE)


@dataclass
class Entry:
    """One recorded flagos call: rerun ``func(*args, **kwargs)`` and copy the ``fresh`` outputs (by position in the
    flattened result) into the tensors the capture returned, so readers of those tensors see the new values."""

    func: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    outputs: list[Any]
    fresh: list[int]

    def replay(self) -> None:
        result, _ = tree_flatten(self.func(*self.args, **self.kwargs))
        for i in self.fresh:
            new, old = result[i], self.outputs[i]
            if new.shape != old.shape or new.dtype != old.dtype:
                raise CaptureError(
                    f"torch_fl graphs: replaying {_name(self.func)} gave {tuple(new.shape)} {new.dtype} where the "
                    f"capture gave {tuple(old.shape)} {old.dtype}; a graph replays fixed shapes: capture again"
                )
            old.copy_(new)


@dataclass
class Recording:
    """What an emulated capture keeps: the calls to replay, the tensors it allocated (its pool), and the bytes of
    pre-existing flagos storages it wrote, to put back when the capture ends."""

    entries: list[Entry] = field(default_factory=list)
    kept: list[torch.Tensor] = field(default_factory=list)
    born: set[int] = field(default_factory=set)
    saved: dict[int, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)

    def restore(self) -> None:
        """Undo the capture's writes to memory that existed before it: on a GPU a capture runs nothing."""
        for target, bytes_before in self.saved.values():
            target.copy_(bytes_before)
        self.saved.clear()


def _name(func: Any) -> str:
    return str(func.name()).removeprefix("aten::") if hasattr(func, "name") else str(func)


def _tensors(tree: Any) -> list[torch.Tensor]:
    return [t for t in tree_flatten(tree)[0] if isinstance(t, torch.Tensor)]


def _storage_key(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def _written(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    """The tensors ``func`` writes, from its schema's ``(a!)`` annotations."""
    schema = func._schema
    found: list[torch.Tensor] = []
    for i, arg in enumerate(schema.arguments):
        if arg.alias_info is None or not arg.alias_info.is_write:
            continue
        value = kwargs.get(arg.name) if arg.kwarg_only or i >= len(args) else args[i]
        found.extend(_tensors(value))
    return found


# Each op's route in the table in force, asked once per table: reload_routes() publishes a new table object.
_route_cache: dict[Any, str | None] = {}
_cached_table: list[Any] = [None]


def _route(func: Any) -> str | None:
    table = _routes.state().table
    if table is not _cached_table[0]:
        _route_cache.clear()
        _cached_table[0] = table
    if func not in _route_cache:
        try:
            _route_cache[func] = _routes.route(_name(func)).route
        except KeyError:  # an op the router never sees (a composite): its parts are checked one by one
            _route_cache[func] = None
    return _route_cache[func]


class CaptureMode(TorchDispatchMode):
    """Check (and, with ``recording``, record) the calls of one capture on this thread."""

    def __init__(self, recording: Recording | None) -> None:
        super().__init__()
        self.recording = recording
        self.host_born: list[torch.Tensor] = []  # host tensors made in the capture: writing them is harmless
        self.error: CaptureError | None = None

    def refuse(self, func: Any, why: str, way_out: str) -> CaptureError:
        self.error = CaptureError(f"torch_fl graphs: {_name(func)} cannot be captured: {why}; {way_out}")
        return self.error

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        inputs = _tensors((args, kwargs))
        on_flagos = [t for t in inputs if t.device.type == "flagos"]
        on_host = [t for t in inputs if t.device.type == "cpu"]
        if on_flagos:
            self._check_device_op(func, on_host)
        self._check_transfer(func, bool(on_flagos), bool(on_host), kwargs.get("device"))
        written = _written(func, args, kwargs)
        self._check_host_writes(func, written)
        if self.recording is not None:
            self._save_before_write(written)
        out = self._run(func, args, kwargs)
        outputs = _tensors(out)
        out_devices = {t.device.type for t in outputs}
        if "cpu" in out_devices:
            self.host_born.extend(t for t in outputs if t.device.type == "cpu")
        self._check_transfer(func, bool(on_flagos), bool(on_host), "cpu" if "cpu" in out_devices else None)
        self._check_transfer(func, bool(on_flagos), bool(on_host), "flagos" if "flagos" in out_devices else None)
        if self.recording is not None and (on_flagos or any(t.device.type == "flagos" for t in outputs)):
            self._record(func, args, kwargs, out, inputs)
        return out

    def _run(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run the op; a vendor's refusal of its inner work under capture becomes a CaptureError naming the op. A
        kernel's own host work (a composite that reads data on the host, a copy of a host tensor) is invisible to
        this mode, which sees the op only, so the vendor's capture check is the one that finds it."""
        try:
            return func(*args, **kwargs)
        except CaptureError:
            raise
        except RuntimeError as exc:
            if not _CAPTURE_REFUSAL.search(str(exc)):
                raise
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise self.refuse(
                func, f"its kernel did work a graph cannot hold ({first})", "keep it out of the captured region"
            ) from exc

    def _check_device_op(self, func: Any, on_host: list[torch.Tensor]) -> None:
        if any(tag in func.tags for tag in _HOST_READ_TAGS):
            raise self.refuse(
                func,
                "the host must read its data (or its output size) from the device",
                "move it before or after the captured region",
            )
        if any(t.dim() > 0 for t in on_host):
            raise self.refuse(
                func,
                "it mixes host and flagos tensors (a copy between host and device)",
                "copy host data into a static flagos input before replay()",
            )
        if _route(func) == "cpu":
            raise self.refuse(
                func,
                "its route is 'cpu', a host round trip a replay cannot repeat",
                f"route it natively ({op_variable(_name(func))}=native) or keep it out of the captured region",
            )

    def _check_transfer(self, func: Any, on_flagos: bool, on_host: bool, target: Any) -> None:
        """Refuse a copy to another device before it runs: on a GPU it would break the capture without a name."""
        if target is None:
            return
        kind = torch.device(target).type
        if on_flagos and kind == "cpu":
            raise self.refuse(func, "it reads a flagos tensor on the host", "read results after replay()")
        if on_host and kind == "flagos" and not on_flagos:
            raise self.refuse(func, "it copies host memory to the device", "copy into a static input before replay()")

    def _check_host_writes(self, func: Any, written: list[torch.Tensor]) -> None:
        born = {_storage_key(t) for t in self.host_born}
        for t in written:
            if t.device.type == "cpu" and _storage_key(t) not in born:
                raise self.refuse(
                    func,
                    "it writes a host tensor, which a replay would not write again",
                    "keep that state on the device (torch.optim: capturable=True)",
                )

    def _save_before_write(self, written: list[torch.Tensor]) -> None:
        recording = self.recording
        assert recording is not None
        for t in written:
            key = _storage_key(t)
            if t.device.type != "flagos" or key in recording.born or key in recording.saved or t.numel() == 0:
                continue
            whole = torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())
            recording.saved[key] = (whole, whole.clone())

    def _record(self, func: Any, args: Any, kwargs: Any, out: Any, inputs: list[torch.Tensor]) -> None:
        recording = self.recording
        assert recording is not None
        outputs = tree_flatten(out)[0]
        read = {_storage_key(t) for t in inputs}
        fresh = [i for i, t in enumerate(outputs) if isinstance(t, torch.Tensor) and _storage_key(t) not in read]
        for i in fresh:
            recording.born.add(_storage_key(outputs[i]))
        if _name(func) in _ALLOCATIONS:
            recording.kept.extend(outputs[i] for i in fresh)
            return
        if not fresh and not _written(func, args, kwargs):
            return  # a view: it aliases a buffer the replay refills, nothing to redo
        # Host scalars (0-dim CPU tensors) are frozen at capture, as a GPU graph bakes them into the kernel.
        args, kwargs = _freeze_host_scalars((args, kwargs))
        recording.entries.append(Entry(func, args, kwargs, outputs, [i for i in fresh if outputs[i].numel()]))


def _freeze_host_scalars(tree: tuple[Any, Any]) -> tuple[Any, Any]:
    from torch.utils._pytree import tree_map

    def freeze(x: Any) -> Any:
        return x.clone() if isinstance(x, torch.Tensor) and x.device.type == "cpu" else x

    return tree_map(freeze, tree)
