"""Lightning's accelerator for flagos: ``Trainer(accelerator="flagos", devices=1)``.

``lightning`` and ``pytorch_lightning`` each carry their own ``Accelerator`` base class and registry, so the class
is made once per namespace (``accelerator_class``) and registered into that namespace's ``AcceleratorRegistry``
(``register``; torch_fl.integrations calls it when the namespace is imported). ``FlagosAccelerator`` is the
``lightning`` namespace's class.

Lightning's connector builds ``SingleDeviceStrategy("cpu")`` for one device of any accelerator it does not know
by name, and a CUDA autocast for ``precision="bf16-mixed"``/``"16-mixed"``. ``setup`` (Lightning's hook that runs
before the model moves) points both at flagos, so the plain ``Trainer(accelerator="flagos")`` trains on flagos.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType
from typing import Any

import torch

NAME = "flagos"
_classes: dict[str, type] = {}  # namespace -> its FlagosAccelerator


def _parse(devices: Any, error: type[Exception]) -> list[int]:
    """Lightning's ``devices=`` (1, "2", [0, 1], "0,1", -1) as flagos indices, each checked against the count."""
    count = torch.flagos.device_count()
    if isinstance(devices, str):
        text = devices.strip()
        try:
            devices = [int(p) for p in text.split(",") if p.strip()] if "," in text else int(text)
        except ValueError:
            raise error(
                f"Trainer(accelerator='flagos', devices={devices!r}): devices is a count, a list of flagos indices "
                "or -1 for all of them"
            ) from None
    if isinstance(devices, bool) or not isinstance(devices, (int, list, tuple)):
        raise error(
            f"Trainer(accelerator='flagos', devices={devices!r}): devices is a count, a list of flagos indices or -1"
        )
    if isinstance(devices, int):
        if devices == -1:
            devices = count
        if devices < 1:
            raise error(f"Trainer(accelerator='flagos', devices={devices}): ask for at least one flagos device")
        if devices > count:
            raise error(
                f"Trainer(accelerator='flagos', devices={devices}): this process has {count} flagos device(s); "
                "ask for fewer (under emulation FLAGOS_EMU_DEVICES sets how many there are)"
            )
        return list(range(devices))
    indices = [int(i) for i in devices]
    bad = [i for i in indices if not 0 <= i < count]
    if not indices or bad or len(set(indices)) != len(indices):
        raise error(
            f"Trainer(accelerator='flagos', devices={list(devices)!r}): name each flagos index once, each in "
            f"0..{count - 1}"
        )
    return indices


def _namespace(module: ModuleType) -> str:
    """``lightning`` or ``pytorch_lightning``: the package a Lightning module belongs to."""
    return "pytorch_lightning" if module.__name__.startswith("pytorch_lightning") else "lightning"


def _pytorch(namespace: str, sub: str) -> ModuleType:
    prefix = "pytorch_lightning" if namespace == "pytorch_lightning" else "lightning.pytorch"
    return importlib.import_module(f"{prefix}.{sub}")


def accelerator_class(namespace: str = "lightning") -> type:
    """The flagos ``Accelerator`` of one Lightning namespace, made on first use."""
    if namespace in _classes:
        return _classes[namespace]
    base = _pytorch(namespace, "accelerators").Accelerator
    error = _pytorch(namespace, "utilities.exceptions").MisconfigurationException

    class FlagosAccelerator(base):  # type: ignore[misc, valid-type]
        """Runs a Lightning Trainer on flagos devices (the emulation's or a GPU's, as FLAGOS_ACCELERATOR says)."""

        def setup_device(self, device: torch.device) -> None:
            if device.type == NAME:
                torch.flagos.set_device(device)
            elif device.type != "cpu":  # cpu: the connector's default strategy, which setup() retargets
                raise error(
                    f"FlagosAccelerator got device {device}; with accelerator='flagos' the strategy's device is a "
                    "flagos device: drop the strategy's device argument or name 'flagos:<index>'"
                )

        def setup(self, trainer: Any) -> None:
            _retarget(trainer, namespace, error)

        def get_device_stats(self, device: Any) -> dict[str, Any]:
            return torch.flagos.memory_stats(device)

        def teardown(self) -> None:
            pass

        @staticmethod
        def parse_devices(devices: Any) -> list[int]:
            return _parse(devices, error)

        @staticmethod
        def get_parallel_devices(devices: Any) -> list[torch.device]:
            return [torch.device(NAME, i) for i in _parse(devices, error)]

        @staticmethod
        def auto_device_count() -> int:
            return torch.flagos.device_count()

        @staticmethod
        def is_available() -> bool:
            return torch.flagos.is_available()

        @staticmethod
        def name() -> str:
            return NAME

        @classmethod
        def register_accelerators(cls, accelerator_registry: Any) -> None:
            if NAME not in accelerator_registry:
                accelerator_registry.register(NAME, cls, description="torch_fl's flagos device")

    FlagosAccelerator.__module__ = __name__
    _classes[namespace] = FlagosAccelerator
    return FlagosAccelerator


def _retarget(trainer: Any, namespace: str, error: type[Exception]) -> None:
    """Point the connector's single-device defaults (a CPU device, a CUDA autocast) at flagos."""
    strategy = trainer.strategy
    single = _pytorch(namespace, "strategies").SingleDeviceStrategy
    if strategy.root_device.type != NAME:
        if type(strategy) is not single or strategy.root_device.type != "cpu":
            raise error(
                f"accelerator='flagos' with {type(strategy).__name__} on {strategy.root_device}: give the strategy "
                "flagos devices (SingleDeviceStrategy('flagos:0'), or leave strategy='auto')"
            )
        # Lightning keeps the chosen devices on its connector and the single device on the strategy, both private;
        # the frameworks suite (tests/models/test_frameworks.py) fails if either moves
        chosen = getattr(getattr(trainer, "_accelerator_connector", None), "_parallel_devices", None) or [
            torch.device(NAME, torch.flagos.current_device())
        ]
        strategy._root_device = torch.device(chosen[0])
        torch.flagos.set_device(strategy._root_device)
    mixed = _pytorch(namespace, "plugins.precision").MixedPrecision
    plugin = strategy.precision_plugin
    if isinstance(plugin, mixed) and plugin.device != NAME:
        plugin.device = NAME  # autocast on flagos, not on the CUDA device the connector names
        if plugin.scaler is not None:
            plugin.scaler = torch.amp.GradScaler(NAME)


def register(module: ModuleType) -> None:
    """Add flagos to the ``AcceleratorRegistry`` of the Lightning namespace ``module`` belongs to."""
    namespace = _namespace(module)
    accelerator_class(namespace).register_accelerators(module.AcceleratorRegistry)


def __getattr__(name: str) -> Any:
    if name == "FlagosAccelerator":
        if "lightning" not in sys.modules and importlib.util.find_spec("lightning") is None:
            raise ImportError(
                "torch_fl.integrations.lightning.FlagosAccelerator needs Lightning: pip install 'torch-fl[lightning]'"
            )
        return accelerator_class("lightning")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
