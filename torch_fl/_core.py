"""The core library and its operators under their Python names.

The compiled part of torch_fl is one library, ``libtorch_fl_core.so``, built once per torch line. Its face to
Python is dispatcher operators (``torch.ops.flagos.*``, declared in csrc/ops/), never a CPython extension, so one
wheel serves every Python of the line (docs/architecture.md). This module loads the library and gives each
operator the Python types its callers use: tuples, dicts, unsigned seeds, a scope object. Operators cross with
schema types only, so an unsigned 64-bit value crosses as the same bits in a signed int.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

LIBRARY = Path(__file__).parent / "libtorch_fl_core.so"


def _load() -> None:
    problem = None if LIBRARY.is_file() else "no such file"
    if problem is None:
        try:
            torch.ops.load_library(str(LIBRARY))
        except OSError as exc:
            problem = str(exc)
    if problem is not None:  # typically: importing the source tree instead of the installed wheel
        raise ImportError(
            f"torch_fl's compiled core is missing from {LIBRARY.parent} or does not load ({problem}). If that is a "
            "source checkout, run Python from another directory so the installed wheel is imported, or build it "
            "first (pip install --no-build-isolation .). `import torch` loads torch_fl only when FLAGOS_AUTOLOAD=1."
        )


_load()
_ops = torch.ops.flagos
_ops.hide_from_dispatch_modes.default()  # runtime bookkeeping, not computation: no TorchDispatchMode sees it
_U64 = 1 << 64


def _op(name: str) -> Callable[..., Any]:
    """The operator's callable without ``OpOverload.__call__``'s Python frame (half of a bare call's cost)."""
    overload = getattr(_ops, name).default
    return getattr(overload, "_op", overload)


_comm_keep = _op("comm_keep")
_comm_wrap = _op("comm_wrap")
_dtype_code_of = _op("dtype_code")
_flagos_view = _op("flagos_view")
_host_access_close = _op("host_access_close")
_host_access_open = _op("host_access_open")
_init = _op("init")
_initial_seed = _op("initial_seed")
_launch_module = _op("launch_module")
_manual_seed = _op("manual_seed")
_replay_configure = _op("replay_configure")
_replay_settings = _op("replay_settings")
_replay_stats = _op("replay_stats")
_replay_submit = _op("replay_submit")
_router_counters = _op("router_counters")
_seed = _op("seed")
_set_routes = _op("set_routes")


def _signed(value: int) -> int:
    """An unsigned 64-bit value as the signed int with the same bits."""
    value = int(value) % _U64
    return value - _U64 if value >= 1 << 63 else value


def _unsigned(value: int) -> int:
    return value % _U64


# -- the runtime (csrc/ops/runtime.cpp) ----------------------------------------------------------------------------
built_runtimes: Callable[[], list[str]] = _op("built_runtimes")
accelerator: Callable[[], str | None] = _op("accelerator")
device_count: Callable[[], int] = _op("device_count")
current_device: Callable[[], int] = _op("current_device")
set_device: Callable[[int], None] = _op("set_device")
empty_host_cache: Callable[[], None] = _op("empty_host_cache")
synchronize: Callable[[int], None] = _op("synchronize")
settle_autograd_threads: Callable[[], None] = _op("settle_autograd_threads")
# (stream_id, device_index, device_type): the fields torch.Stream is built from
current_stream: Callable[[int], tuple[int, int, int]] = _op("current_stream")
default_stream: Callable[[int], tuple[int, int, int]] = _op("default_stream")
exchange_stream: Callable[[int, int], tuple[int, int, int]] = _op("exchange_stream")
get_rng_state: Callable[[int], torch.Tensor] = _op("get_rng_state")
set_rng_state: Callable[[int, torch.Tensor], None] = _op("set_rng_state")


# -- memory (csrc/runtime/memory_ops.cpp): torch.flagos.memory and the emulation's device memory -----------------
mem_get_info: Callable[[int], tuple[int, int]] = _op("mem_get_info")  # (free, total) bytes
caching_allocator_alloc: Callable[[int, int, int | None], int] = _op("caching_allocator_alloc")  # size, device, stream
caching_allocator_delete: Callable[[int], None] = _op("caching_allocator_delete")
emulation_set_capacity: Callable[[int], None] = _op("emulation_set_capacity")
emulation_capacity: Callable[[], int] = _op("emulation_capacity")
emulation_set_memory_fraction: Callable[[float, int], None] = _op("emulation_set_memory_fraction")
emulation_memory_fraction: Callable[[int], float] = _op("emulation_memory_fraction")
# (enabled, context, stacks, max_entries), as torch.cuda.memory._record_memory_history takes them
emulation_record_memory_history: Callable[[str | None, str | None, str, int], None] = _op(
    "emulation_record_memory_history"
)
# (blocks, events, files, names, lines, starts, frame ids): flat lists that torch_fl/_memory_history.py unpacks
emulation_memory_snapshot: Callable[[], tuple[list[int], ...]] = _op("emulation_memory_snapshot")
emulation_pool_begin: Callable[[int, int], None] = _op("emulation_pool_begin")  # device, pool
emulation_pool_end: Callable[[int, int], None] = _op("emulation_pool_end")


def init(accelerator: str, emulated_devices: int, trap_host_access: bool = False) -> None:
    _init(accelerator, emulated_devices, trap_host_access)


def manual_seed(index: int, seed: int) -> None:
    _manual_seed(index, _signed(seed))


def initial_seed(index: int) -> int:
    return _unsigned(_initial_seed(index))


def seed(index: int) -> int:
    return _unsigned(_seed(index))


# -- the router (csrc/ops/routes.cpp) ------------------------------------------------------------------------------
class RouteKind(enum.IntEnum):
    """How the router runs an operator (csrc/dispatch/router.h, RouteKind)."""

    Native = 0
    Cpu = 1
    Provider = 2


route_of: Callable[[str], str] = _op("route_of")
intercept_ops: Callable[[Sequence[str]], list[str]] = _op("intercept_ops")
intercepted_ops: Callable[[], list[str]] = _op("intercepted_ops")
transfer_ops: Callable[[], list[str]] = _op("transfer_ops")
decomposed_ops: Callable[[], list[str]] = _op("decomposed_ops")
fast_path_ops: Callable[[], list[str]] = _op("fast_path_ops")
set_alias_reuse: Callable[[bool], None] = _op("set_alias_reuse")
alias_reuse: Callable[[], bool] = _op("alias_reuse")
set_router_counters: Callable[[bool], None] = _op("set_router_counters")
reset_router_counters: Callable[[], None] = _op("reset_router_counters")
set_log_dispatch: Callable[[bool], None] = _op("set_log_dispatch")
log_dispatch: Callable[[], bool] = _op("log_dispatch")
enable_provider_calls: Callable[[], None] = _op("enable_provider_calls")


_dtype_bit = _op("dtype_bit")
EVERY_DTYPE = (1 << 64) - 1  # a route's dtype mask with every bit set: it serves every dtype


def dtype_mask(names: Sequence[str]) -> int:
    """The router's mask of the dtypes named (torch's names: ``float32``); () serves every dtype."""
    if not names:
        return EVERY_DTYPE
    return sum({_unsigned(_dtype_bit(getattr(torch, name))) for name in names})


def set_routes(
    fallback: tuple[RouteKind, int],
    per_op: dict[str, tuple[RouteKind, int, int, RouteKind]],
    providers: Sequence[str],
    replayable: Sequence[bool],
) -> None:
    """Publish a complete route table; each op's route is (RouteKind, provider index or -1, the dtype mask it
    serves (``dtype_mask``), the RouteKind of the other dtypes)."""
    ops = list(per_op)
    _set_routes(
        int(fallback[0]),
        fallback[1],
        ops,
        [int(per_op[op][0]) for op in ops],
        [per_op[op][1] for op in ops],
        [_signed(per_op[op][2]) for op in ops],
        [int(per_op[op][3]) for op in ops],
        list(providers),
        [bool(r) for r in replayable],
    )


def router_counters() -> list[tuple[str, str, int, tuple[int, int, int, int]]]:
    """(op, path, calls, (arguments, kernel, results, release) ns summed) per operator and router path."""
    ops, paths, calls, ns = _router_counters()
    return [
        (op, path, n, tuple(ns[4 * i : 4 * i + 4]))
        for i, (op, path, n) in enumerate(zip(ops, paths, calls, strict=True))
    ]


# -- the replay (csrc/ops/replay.cpp) ------------------------------------------------------------------------------
replay_clear: Callable[[], None] = _op("replay_clear")
_STAT_NAMES = (
    "hits",
    "recordings",
    "refused_calls",
    "unkeyed_calls",
    "verified",
    "evictions",
    "ready_keys",
    "refused_keys",
    "pending_keys",
)


def replay_configure(enabled: bool, verify: bool, capacity: int) -> None:
    _replay_configure(enabled, verify, capacity)


def replay_settings() -> tuple[bool, bool, int]:
    return tuple(_replay_settings())  # type: ignore[return-value]


def replay_stats() -> list[dict[str, Any]]:
    ops, counts, reasons, reason_counts = _replay_stats()
    out, at, reason_at = [], 0, 0
    width = len(_STAT_NAMES) + 1
    for op in ops:
        row = counts[at : at + width]
        at += width
        n_reasons = row[-1]
        stats: dict[str, Any] = {"op": op, **dict(zip(_STAT_NAMES, row[:-1], strict=True))}
        stats["reasons"] = dict(
            zip(
                reasons[reason_at : reason_at + n_reasons],
                reason_counts[reason_at : reason_at + n_reasons],
                strict=True,
            )
        )
        reason_at += n_reasons
        out.append(stats)
    return out


def launch_module(
    function: int, grid: Sequence[int], block: Sequence[int], shared: int, values: Sequence[int], device: int
) -> None:
    """Launch a loaded module function on the flagos device's current stream (parameters as 8-byte values)."""
    _launch_module(_signed(function), list(grid), list(block), shared, [_signed(v) for v in values], device)


_DTYPE_CODES: dict[torch.dtype, int] = {}
_FILL_NONE, _FILL_BOOL, _FILL_INT, _FILL_FLOAT = 0, 1, 2, 3


def _dtype_code(dtype: torch.dtype) -> int:
    code = _DTYPE_CODES.get(dtype)
    if code is None:
        code = _DTYPE_CODES[dtype] = _dtype_code_of(dtype)
    return code


def _fill(value: object) -> tuple[int, int]:
    if value is None:
        return _FILL_NONE, 0
    if isinstance(value, bool):
        return _FILL_BOOL, int(value)
    if isinstance(value, int):
        return _FILL_INT, value
    return _FILL_FLOAT, struct.unpack("<q", struct.pack("<d", float(value)))[0]


def submit_recording(wire: tuple) -> None:
    """Hand the recorder's result for this thread's recorded provider call to the replay cache, in the flat form
    csrc/ops/replay.cpp reads: ("refused", reason) or ("plan", allocs, steps, launches, outputs, copies) as
    torch_fl/replay/_record.py's Recording.wire writes them."""
    if wire[0] == "refused":
        _replay_submit(wire[1], [])
        return
    _, allocs, steps, launches, outputs, copies = wire
    words: list[int] = [len(allocs)]
    for dtype, sizes, strides, offset in allocs:
        words += [_dtype_code(dtype), len(sizes), *sizes, *strides, offset]
    words.append(len(steps))
    for kind, index, value in steps:
        words += [kind, index, *_fill(value)]
    words.append(len(launches))
    for function, grid, block, shared, params in launches:
        words += [_signed(function), *grid, *block, shared, len(params)]
        for kind, index, offset, bits in params:
            words += [kind, index, offset, _signed(bits)]
    words.append(len(outputs))
    for kind, index, whole, sizes, strides, offset in outputs:
        words += [kind, index, int(whole), len(sizes), *sizes, *strides, offset]
    words.append(len(copies))
    for views in copies:
        for kind, index, sizes, strides, offset in views:
            words += [kind, index, len(sizes), *sizes, *strides, offset]
    _replay_submit(None, words)


# -- sharing, host access, collectives, graphs, compiled code (csrc/ops/) ------------------------------------------
vendor_view: Callable[[torch.Tensor], torch.Tensor] = _op("vendor_view")
fresh_aliases: Callable[[Sequence[torch.Tensor]], list[torch.Tensor]] = _op("fresh_aliases")
make_unreadable: Callable[[torch.Tensor, str], None] = _op("make_unreadable")
share_fd: Callable[[torch.Tensor], tuple[int, int]] = _op("share_fd")
from_shared_fd: Callable[[int, int, int], torch.Tensor] = _op("from_shared_fd")
host_trap_enabled: Callable[[], bool] = _op("host_trap_enabled")
register_graph_impl: Callable[[], bool] = _op("register_graph_impl")


_FLAGOS: list[torch.device] = []  # made at the first allocation: the name exists once PrivateUse1 is renamed


def empty_strided(size: Sequence[int], stride: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    """An uninitialised tensor on the current flagos device: the allocation call of the wrapper code torch.compile
    generates for flagos (torch_fl/compile/codegen.py). torch's own entry with a ready device object is the
    fastest way there without a CPython extension: a device string is parsed per call, and an operator's
    argument conversion costs about twice as much (docs/compile.md has the figures)."""
    if not _FLAGOS:
        _FLAGOS.append(torch.device("flagos"))
    return torch.empty_strided(size, stride, dtype=dtype, device=_FLAGOS[0])


def flagos_view(tensor: torch.Tensor, index: int = 0) -> torch.Tensor:
    return _flagos_view(tensor, index)


class HostAccess:
    """Keeps the flagos blocks at these storage addresses readable until close() (a no-op without the trap)."""

    def __init__(self, storages: Sequence[int]) -> None:
        self._scope: int | None = _host_access_open([int(s) for s in storages])

    def close(self) -> None:
        if self._scope is not None:
            scope, self._scope = self._scope, None
            _host_access_close(scope)


def comm_keep(work: Any) -> None:
    """Hold ``work`` (a ``torch.distributed.Work``) until the library's worker thread has let go of it
    (csrc/comm/work_keeper.cpp says why)."""
    _comm_keep(work.boxed())


def comm_wrap(vendor: Any, group: Any, vendor_device: str, vendor_type: Any) -> Any:
    """The flagos c10d backend over ``vendor`` (Gloo's or NCCL's backend object, of ``ProcessGroup.BackendType``
    ``vendor_type``), made in ``group``, a scratch ``ProcessGroup`` that holds nothing else (csrc/ops/comm.cpp says
    why it takes one). The two backends are of different types, since a group shares one backend per type."""
    group._register_backend(torch.device(vendor_device), vendor_type, vendor)
    _comm_wrap(group.boxed())
    return group._get_backend(torch.device("flagos"))
