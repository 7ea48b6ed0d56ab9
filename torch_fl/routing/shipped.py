"""The confs a wheel ships, chosen by name (FLAGOS_CONF), and the check that a conf's provider routes were
qualified for the provider version this process has."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .conf import Conf

CONF_DIR = Path(__file__).parents[1] / "configs"  # where the wheel installs configs/backends_*.conf
_WARNED: set[tuple[str, str]] = set()


def confs(conf_dir: Path, accel: str) -> dict[str, Path]:
    """The confs shipped for ``accel`` by FLAGOS_CONF name: ``default`` (backends_<accel>.conf) and each
    ``backends_<accel>_<name>.conf`` (``flaggems``: FlagGems where its qualification passed)."""
    found = {"default": conf_dir / f"backends_{accel}.conf"}
    for path in sorted(conf_dir.glob(f"backends_{accel}_*.conf")):
        found[path.stem.removeprefix(f"backends_{accel}_")] = path
    return found


def warn_qualification(path: str, conf: Conf, table: Any, providers: Mapping[str, Any]) -> None:
    """Warn once when the conf routes operators to a provider qualified at another version than the installed."""
    used = {r.route for r in table.entries.values()} | {table.default.route}
    for name, version in conf.qualified.items():
        provider = providers.get(name)
        installed = provider.version() if provider is not None and name in used else None
        if installed is None or installed == version or (name, installed) in _WARNED:
            continue
        _WARNED.add((name, installed))
        warnings.warn(
            f"{path} routes operators to {name} as qualified for {name} {version}, but {name} {installed} is "
            f"installed, whose kernels may differ; re-qualify on this node with `python -m torch_fl qualify "
            f"--provider {name}` and use the conf it writes (FLAGOS_BACKEND_CONFIG=<out>/qualified.conf)",
            stacklevel=4,
        )
