"""The flagos device module's own part: devices, streams, events, generators and autocast's dtypes.

``torch.flagos`` (``flagos.py``) shows these with the rest of torch.cuda's device API; the modules it gathers
(graphs, the device API, memory) import this one, never that face, so no import runs back up.
"""

from __future__ import annotations

import torch

from . import _core

__all__ = [
    "Event",
    "Stream",
    "StreamContext",
    "current_device",
    "current_stream",
    "default_stream",
    "device",
    "device_count",
    "empty_host_cache",
    "get_amp_supported_dtype",
    "get_rng_state",
    "initial_seed",
    "is_available",
    "is_bf16_supported",
    "is_initialized",
    "manual_seed",
    "manual_seed_all",
    "seed",
    "set_device",
    "set_rng_state",
    "set_stream",
    "stream",
    "synchronize",
]

_Device = torch.device | str | int | None


def _index(device: _Device, *, any_type: bool = False) -> int:
    """Device index of ``device`` (None = the current flagos device). A device of another type is an error unless
    ``any_type``: Dynamo's device interface takes the index alone, as flagos device i is the vendor's device i."""
    if device is None:
        return _core.current_device()
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != "flagos" and not any_type:
        raise ValueError(f"expected a flagos device, got {device}")
    return _core.current_device() if device.index is None else device.index


class device:
    """Context manager that makes ``device`` current (like ``torch.cuda.device``);
    torch's serialization uses it to restore tensors onto flagos."""

    def __init__(self, device: _Device) -> None:
        self.index = _index(device) if device is not None else -1
        self.previous = -1

    def __enter__(self) -> None:
        if self.index >= 0:
            self.previous = _core.current_device()
            _core.set_device(self.index)

    def __exit__(self, *exc: object) -> None:
        if self.index >= 0:
            _core.set_device(self.previous)


def is_available() -> bool:
    return _core.device_count() > 0


def is_initialized() -> bool:
    return _core.accelerator() is not None


def device_count() -> int:
    return _core.device_count()


def current_device() -> int:
    return _core.current_device()


def set_device(device: _Device) -> None:
    _core.set_device(_index(device))


def synchronize(device: _Device = None) -> None:
    """Wait for all work queued on ``device`` (the vendor's stream semantics)."""
    _core.synchronize(_index(device))


# ---- memory: torch_fl/_memory.py (torch.flagos.memory), history and snapshots in _memory_history.py -----------


def empty_host_cache() -> None:
    """Give cached, unused pinned host memory back (the vendor's host cache; a no-op under emulation, which caches
    none). ``torch.accelerator.empty_host_cache`` is this function once torch_fl is imported."""
    _core.empty_host_cache()


def manual_seed(seed: int, device: _Device = None) -> None:
    _core.manual_seed(_index(device), int(seed) & 0xFFFF_FFFF_FFFF_FFFF)


def manual_seed_all(seed: int) -> None:
    for index in range(device_count()):
        _core.manual_seed(index, int(seed) & 0xFFFF_FFFF_FFFF_FFFF)


def seed() -> int:
    return _core.seed(current_device())


def initial_seed() -> int:
    return _core.initial_seed(current_device())


def get_rng_state(device: _Device = None) -> torch.Tensor:
    return _core.get_rng_state(_index(device))


def set_rng_state(new_state: torch.Tensor, device: _Device = None) -> None:
    _core.set_rng_state(_index(device), new_state)


def _is_in_bad_fork() -> bool:
    """A fork of a process that has initialised a GPU runtime cannot use it (torch.manual_seed asks before it
    seeds flagos in DataLoader workers, for one); the emulation has no such state."""
    return _core.accelerator() in ("cuda", "dcu") and torch.cuda._is_in_bad_fork()


def _lazy_init() -> None:
    """torch calls this before a factory function or ``.to()`` makes a flagos tensor (device_lazy_init). The runtime
    starts at ``import torch_fl``, so there is nothing left to start; being here is what matters: torch marks a device
    module initialised only once its ``_lazy_init`` ran, and some torch lines (2.9 and 2.11 measured) ask a device
    module lacking one again on every factory call, an import and an attribute lookup each time."""
    if not is_initialized():
        raise RuntimeError("the flagos runtime has not started: `import torch_fl` starts it (and says what stops it)")


# ---- streams and events -------------------------------------------------------------------------------------
# On GPUs these are the vendor's streams and events; under emulation every stream is one serial queue (work has
# finished when the call returns) and events record the host clock. The objects are torch's own torch.Stream and
# torch.Event on a flagos device: torch checks their exact type in places (Event.elapsed_time, for one), so
# Stream and Event below build those objects instead of subclassing them, and isinstance() still answers.


class _OnFlagos(type):
    _base: type

    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, cls._base) and torch.device(obj.device).type == "flagos"  # type: ignore[attr-defined]


class Stream(metaclass=_OnFlagos):
    """A new flagos stream, like ``torch.cuda.Stream``: a ``torch.Stream`` with ``query``, ``synchronize``,
    ``wait_event``, ``wait_stream``, ``record_event``, and ``with stream:`` to make it current."""

    _base = torch.Stream

    def __new__(cls, device: _Device = None, priority: int = 0) -> torch.Stream:  # type: ignore[misc]
        return torch.Stream(device=torch.device("flagos", _index(device)), priority=priority)


class Event(metaclass=_OnFlagos):
    """A flagos event, like ``torch.cuda.Event``: a ``torch.Event`` with ``record``, ``wait``, ``query``,
    ``synchronize`` and ``elapsed_time`` (milliseconds; both events need ``enable_timing=True``)."""

    _base = torch.Event

    def __new__(  # type: ignore[misc]
        cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
    ) -> torch.Event:
        return torch.Event(
            device=torch.device("flagos", current_device()),
            enable_timing=enable_timing,
            blocking=blocking,
            interprocess=interprocess,
        )


def _stream(fields: tuple[int, int, int]) -> torch.Stream:
    stream_id, device_index, device_type = fields
    return torch.Stream(stream_id=stream_id, device_index=device_index, device_type=device_type)


def current_stream(device: _Device = None) -> torch.Stream:
    """The stream flagos work on ``device`` is queued on now (per thread, as on CUDA)."""
    return _stream(_core.current_stream(_index(device)))


def default_stream(device: _Device = None) -> torch.Stream:
    return _stream(_core.default_stream(_index(device)))


def set_stream(stream: torch.Stream | None) -> None:
    """Make ``stream`` current on its device (prefer the ``stream(...)`` context manager)."""
    if stream is None:
        return
    _check_flagos_stream(stream)
    _core.exchange_stream(stream.stream_id, stream.device_index)


def _check_flagos_stream(stream: object) -> None:
    if not isinstance(stream, Stream):
        raise ValueError(f"expected a flagos stream (torch.flagos.Stream() or torch.Stream on flagos), got {stream!r}")


class StreamContext:
    """Make ``stream`` current, and its device too, for the duration of a ``with`` block; ``None`` does nothing."""

    def __init__(self, stream: torch.Stream | None) -> None:
        if stream is not None:
            _check_flagos_stream(stream)
        self.stream = stream
        self._previous: list[tuple[int, tuple[int, int, int]]] = []

    def __enter__(self) -> torch.Stream | None:
        if self.stream is None:
            return None
        index = self.stream.device_index
        previous_device = current_device()
        if index != previous_device:
            _core.set_device(index)
        self._previous.append((previous_device, _core.exchange_stream(self.stream.stream_id, index)))
        return self.stream

    def __exit__(self, *exc: object) -> None:
        if self.stream is None:
            return
        previous_device, (stream_id, index, _) = self._previous.pop()
        _core.exchange_stream(stream_id, index)
        if previous_device != index:
            _core.set_device(previous_device)


def stream(stream: torch.Stream | None) -> StreamContext:
    """``with torch.flagos.stream(s):`` queues flagos work on ``s`` (like ``torch.cuda.stream``)."""
    return StreamContext(stream)


# ---- automatic mixed precision (torch.autocast("flagos"), torch.amp.GradScaler("flagos")) -------------------


def get_amp_supported_dtype() -> list[torch.dtype]:
    """The lower-precision dtypes ``torch.autocast("flagos", dtype=...)`` accepts."""
    return [torch.float16, torch.bfloat16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True
