"""``torch.compile`` on flagos: Dynamo's device interface, Inductor's backend and op overrides, and the route pass.

Nothing here runs at ``import torch_fl``: torch's compile stack takes seconds to import, and most processes never
compile. ``install()`` (called by ``import torch_fl``) only arranges for registration to follow torch's own imports:
the device interface once ``torch._dynamo.device_interface`` is imported (Dynamo imports it), and the rest once
``torch._inductor.compile_fx`` is imported (Inductor's backend imports it before it traces the first graph, so the
decomposition guard of ``routes`` is in place for that graph too). ``register()`` does it all at once
(idempotent). Where a module was imported before torch_fl, its part runs at once.

Per vendor (``torch_fl.accelerator()``):
  cpu          Inductor's C++ codegen on the host memory behind flagos (``codegen.EmulationWrapper``)
  cuda, dcu    Inductor's Triton codegen for the vendor GPU, launched on the current flagos stream, which is the
               vendor's current stream (``codegen.GpuWrapper``, Inductor's own wrapper with flagos' allocation
               call, and ``codegen.GpuOpOverrides``)
Routes: ``routes``; CUDA graphs (mode="reduce-overhead"): ``graphs`` and ``graph_runner``. The
torch-version-specific parts live in ``_torch_compat`` alone.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
import warnings
from types import ModuleType
from typing import Any

__all__ = ["install", "register", "registered", "routes_changed"]

_lock = threading.RLock()
_done: set[str] = set()
_running: set[str] = set()  # a part registering now: its own imports of torch's trigger modules must not rerun it


def registered() -> bool:
    return _done >= {"interface", "inductor"}


def _run(part: str) -> None:
    with _lock:
        if part in _done or part in _running:
            return
        _running.add(part)
        try:
            from . import _register

            getattr(_register, part)()
            _done.add(part)
        finally:
            _running.discard(part)


def register() -> None:
    """Register flagos with Dynamo and Inductor now (torch_fl does this itself on the first compilation)."""
    _run("interface")
    _run("inductor")


# module whose import triggers a part of the registration -> that part
_TRIGGERS = {"torch._dynamo.device_interface": "interface", "torch._inductor.compile_fx": "inductor"}


class _AfterImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Runs a part of the registration right after torch has imported the module it depends on."""

    def __init__(self) -> None:
        self._loaders: dict[str, importlib.abc.Loader] = {}

    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name not in _TRIGGERS or name in self._loaders:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        self._loaders[name] = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loaders[spec.name].create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loaders[module.__name__].exec_module(module)
        if module.__name__ == "torch._inductor.compile_fx":
            _run_from_import("interface")  # in case Inductor is imported before Dynamo's device interface
        _run_from_import(_TRIGGERS[module.__name__])
        if len(self._loaders) == len(_TRIGGERS) and self in sys.meta_path:
            sys.meta_path.remove(self)


def _run_from_import(part: str) -> None:
    """A failure here must not break torch's own import (and with it torch.compile for every other device): it
    becomes a warning that says what is missing, and flagos graphs then fail in Inductor."""
    try:
        _run(part)
    except Exception as exc:  # e.g. a torch line whose internals _torch_compat does not know yet
        import torch

        warnings.warn(
            f"torch_fl: torch.compile cannot use flagos in this process: registering its {part} with torch "
            f"{torch.__version__} failed ({type(exc).__name__}: {exc}). torch_fl/compile/_torch_compat/ lists "
            "the torch internals it relies on; compile other devices as usual, run flagos eagerly.",
            RuntimeWarning,
            stacklevel=2,
        )


def install() -> None:
    """Arrange for registration to follow torch's own imports of its compile stack, without importing it."""
    pending = [m for m in _TRIGGERS if m not in sys.modules]
    if pending and not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport())
    for module, part in _TRIGGERS.items():
        if module in sys.modules:
            _run_from_import(part)


def routes_changed() -> None:
    """After ``torch_fl.reload_routes()``: code compiled under the old routes must not run (see ``routes``)."""
    if "inductor" not in _done:
        return
    from . import routes

    routes.guard_decompositions()
    import torch._dynamo

    torch._dynamo.reset()
