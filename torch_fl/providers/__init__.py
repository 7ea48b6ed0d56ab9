"""Python route providers: named tables of operator implementations.

A provider serves the ops it has kernels for, on vendor tensors (CUDA tensors
on NVIDIA and DCU; the router re-tags flagos tensors before the call and the
results after it). ``flaggems`` is built in; tests and users register their
own with :func:`register_provider` and apply them with ``torch_fl.reload_routes()``,
or ship one through the ``torch_fl.providers`` entry-point group.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from importlib import metadata

Kernel = Callable[..., object]

ENTRY_POINT_GROUP = "torch_fl.providers"


class Provider:
    """Base class: override ``load`` (op -> kernel) and optionally ``check``."""

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
            self._kernels = dict(self.load()) if self.unavailable_reason() is None else {}
        return self._kernels

    def ops(self) -> Iterable[str]:
        return self.kernels().keys()

    def supports(self, op: str) -> bool:
        return op in self.kernels()

    def kernel(self, op: str) -> Kernel:
        return self.kernels()[op]


class TableProvider(Provider):
    """A provider given as a plain mapping of op name to callable."""

    def __init__(self, name: str, kernels: Mapping[str, Kernel], available: Callable[[], str | None] | None = None):
        super().__init__(name)
        self._table = dict(kernels)
        self._available = available

    def check(self) -> str | None:
        return self._available() if self._available is not None else None

    def load(self) -> Mapping[str, Kernel]:
        return self._table


_REGISTRY: dict[str, Provider] = {}
_ENTRY_POINTS_LOADED = False


def register_provider(
    name: str, kernels: Mapping[str, Kernel] | Provider, *, available: Callable[[], str | None] | None = None
) -> Provider:
    """Register a provider under ``name`` (a route name in confs and FLAGOS_OP_*)."""
    if name in ("native", "cpu", "cuda", "default"):
        raise ValueError(f"provider name {name!r} is reserved for a built-in route; choose another name")
    provider = kernels if isinstance(kernels, Provider) else TableProvider(name, kernels, available)
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
            register_provider(ep.name, ep.load()())
