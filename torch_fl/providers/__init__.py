"""Python route providers: named tables of operator implementations.

A provider serves the ops it has kernels for, on vendor tensors (CUDA tensors
on NVIDIA and DCU; the router re-tags flagos tensors before the call and the
results after it). ``flaggems`` is built in; tests and users register their
own with :func:`register_provider` and apply them with ``torch_fl.reload_routes()``,
or ship one through the ``torch_fl.providers`` entry-point group.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from importlib import metadata

from .._hints import close_matches
from .._names import RESERVED

Kernel = Callable[..., object]

ENTRY_POINT_GROUP = "torch_fl.providers"


class Provider:
    """Base class: override ``load`` (op -> kernel) and optionally ``check``.

    Every op name a provider serves must be an operator of this torch (``add.Tensor``), checked when
    its table is loaded. A provider that follows several torch lines (FlagGems) sets
    ``tracks_other_torch_versions``: names this torch lacks are then ignored instead.
    """

    tracks_other_torch_versions = False
    # Calls go through the replay cache (torch_fl.replay): the provider's kernels launch through a launcher the
    # recorder sees (Triton's, or torch_fl.replay.launch) and it keeps no device memory between calls.
    replay = False

    def __init__(self, name: str) -> None:
        self.name = name
        self._kernels: dict[str, Kernel] | None = None
        self._reason: str | None = None
        self._checked = False

    # -- to override -----------------------------------------------------
    def check(self) -> str | None:
        """Why this provider cannot run in this process, or None when it can."""
        return None

    def load(self) -> Mapping[str, Kernel]:
        raise NotImplementedError

    def version(self) -> str | None:
        """The version of the kernels (a package's version): a qualification report is keyed by it."""
        return None

    # -- used by route resolution and the router -------------------------
    def unavailable_reason(self) -> str | None:
        if not self._checked:
            self._checked = True
            try:
                self._reason = self.check()
            except Exception as exc:  # a broken optional dependency must not break import
                self._reason = f"{type(exc).__name__}: {exc}"
        return self._reason

    def kernels(self) -> Mapping[str, Kernel]:
        if self._kernels is None:
            table = dict(self.load()) if self.unavailable_reason() is None else {}
            if not self.tracks_other_torch_versions:
                check_op_names(self.name, table)
            self._kernels = table
        return self._kernels

    def ops(self) -> Iterable[str]:
        return self.kernels().keys()

    def supports(self, op: str) -> bool:
        return op in self.kernels()

    def kernel(self, op: str) -> Kernel:
        return self.kernels()[op]


class TableProvider(Provider):
    """A provider given as a plain mapping of op name to callable."""

    def __init__(
        self,
        name: str,
        kernels: Mapping[str, Kernel],
        available: Callable[[], str | None] | None = None,
        replay: bool = False,
        version: str | None = None,
    ):
        super().__init__(name)
        self._table = dict(kernels)
        self._available = available
        self.replay = replay
        self._version = version

    def version(self) -> str | None:
        return self._version

    def check(self) -> str | None:
        return self._available() if self._available is not None else None

    def load(self) -> Mapping[str, Kernel]:
        return self._table


_REGISTRY: dict[str, Provider] = {}
_ENTRY_POINTS_LOADED = False
_KNOWN_OPS: Callable[[], Collection[str]] | None = None  # set by torch_fl: the aten ops of this torch


def set_known_ops(known: Callable[[], Collection[str]]) -> None:
    global _KNOWN_OPS
    _KNOWN_OPS = known


def check_op_names(provider: str, table: Mapping[str, Kernel]) -> None:
    """Raise ValueError naming every op of ``table`` that this torch does not have, with the nearest names."""
    if _KNOWN_OPS is None:
        return
    known = _KNOWN_OPS()
    unknown = sorted(op for op in table if op not in known)
    if not unknown:
        return
    lines = []
    for op in unknown:
        near = close_matches(op, known, n=5, cutoff=0.6)
        lines.append(f"  {op!r}: " + (f"nearest: {', '.join(near)}" if near else "no operator has a similar name"))
    raise ValueError(
        f"provider {provider!r} registers {len(unknown)} unknown operator name(s); names are aten schema names "
        "as in torch.ops.aten.<name>.<overload> (e.g. 'add.Tensor'):\n" + "\n".join(lines)
    )


def register_provider(
    name: str,
    kernels: Mapping[str, Kernel] | Provider,
    *,
    available: Callable[[], str | None] | None = None,
    replay: bool = False,
    version: str | None = None,
) -> Provider:
    """Register a provider under ``name`` (a route name in confs and FLAGOS_OP_*). ``replay=True`` sends a
    table's calls through the replay cache (torch_fl.replay); a Provider subclass sets its ``replay`` attribute.
    ``version`` keys the qualification reports and confs made for this table (torch_fl.qualify)."""
    if name in RESERVED:
        raise ValueError(f"provider name {name!r} is reserved for a built-in route; choose another name")
    if not isinstance(kernels, Provider):
        check_op_names(name, kernels)  # before registering: nothing half-applied
    provider = kernels if isinstance(kernels, Provider) else TableProvider(name, kernels, available, replay, version)
    provider.name = name
    _REGISTRY[name] = provider
    return provider


def unregister_provider(name: str) -> None:
    _REGISTRY.pop(name, None)


def providers() -> dict[str, Provider]:
    return dict(_REGISTRY)


def load_entry_points() -> None:
    """Register providers that installed packages declare (once, on demand)."""
    global _ENTRY_POINTS_LOADED
    if _ENTRY_POINTS_LOADED:
        return
    _ENTRY_POINTS_LOADED = True
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name not in _REGISTRY:
            # a plain table's version is its package's, so qualification reports and confs are keyed by it
            version = ep.dist.version if ep.dist is not None else None
            register_provider(ep.name, ep.load()(), version=version)
