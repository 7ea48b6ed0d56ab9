"""The ``flaggems`` route: FlagGems' Triton kernels on the vendor tensors."""

from __future__ import annotations

from collections.abc import Mapping
from importlib import metadata

from . import Kernel, Provider


class FlagGemsProvider(Provider):
    tracks_other_torch_versions = True  # FlagGems lists ops of several torch lines; this torch's are used
    replay = True  # its Triton launches are recorded and replayed from C++ (torch_fl.replay)

    def __init__(self, accelerator: str) -> None:
        super().__init__("flaggems")
        self.accelerator = accelerator

    def check(self) -> str | None:
        if self.accelerator not in ("cuda", "dcu"):
            return (
                f"FlagGems needs a GPU; this process runs FLAGOS_ACCELERATOR={self.accelerator} "
                "(CPU emulation), where chains fall through to their next route"
            )
        try:
            import flag_gems  # noqa: F401  (device detection happens at import)
        except Exception as exc:
            return f"flag_gems is not importable ({type(exc).__name__}: {exc}); pip install flag_gems"
        return None

    def version(self) -> str | None:
        try:
            return metadata.version("flag_gems")
        except metadata.PackageNotFoundError:
            return None

    def load(self) -> Mapping[str, Kernel]:
        import flag_gems

        from ..replay import _triton

        _triton.install()  # before FlagGems makes its first launcher, so that every launch can be recorded

        # FlagGems lists (aten op name, implementation) pairs for its own
        # registration; the router calls the implementations directly.
        table = getattr(flag_gems, "_FULL_CONFIG", None)
        if table is None:
            raise RuntimeError("this flag_gems has no _FULL_CONFIG op table; torch_fl supports flag_gems 5.x")
        kernels: dict[str, Kernel] = {}
        for item in table:
            if len(item) < 2 or not callable(item[1]):
                continue
            if len(item) > 2 and callable(item[2]) and not item[2]():
                continue  # FlagGems' own condition (e.g. a torch version) says no
            kernels[item[0]] = item[1]
        return kernels
