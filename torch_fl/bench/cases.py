"""What the node check measures, as data: the seed's route A/B cases and the arms.

Adding a case or a route is adding a row here; run.py and child.py hold no per-case code.
torch is imported inside the builders only, so the parent process (run.py) reads these tables
without loading torch.

Inputs are built on the host and then moved to the device under test: a device-side
``torch.randn`` would itself go through the route table, and so be a different measurement
under each arm.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

Args = tuple[tuple[Any, ...], dict[str, Any]]


# ---- route A/B ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One A/B case: ``op`` (an aten schema name) called on the arguments ``build`` returns."""

    name: str
    op: str
    build: Callable[[torch.device], Args]
    note: str


def _host_then(device: torch.device, *shape: int) -> torch.Tensor:
    import torch

    return torch.randn(*shape).to(device)


def _residual(device: torch.device) -> Args:
    return (_host_then(device, 3, 101, 320).transpose(0, 1), _host_then(device, 101, 3, 320)), {"alpha": 1}


def _attention(device: torch.device) -> Args:
    return (_host_then(device, 101, 60, 16).transpose(0, 1), _host_then(device, 60, 101, 16)), {"alpha": 1}


def _ffn(device: torch.device) -> Args:
    return (_host_then(device, 101, 3, 1280), 1.0), {"alpha": 1}


def _bias(device: torch.device) -> Args:
    return (_host_then(device, 3, 101, 33), _host_then(device, 33)), {"alpha": 1}


CASES: tuple[Case, ...] = (
    Case("residual_101x3x320_noncontig", "add.Tensor", _residual, "(3,101,320).transpose(0,1) + (101,3,320)"),
    Case("attention_60x101x16_noncontig", "add.Tensor", _attention, "(101,60,16).transpose(0,1) + (60,101,16)"),
    Case("ffn_101x3x1280_scalar", "add.Tensor", _ffn, "(101,3,1280) + Python float 1.0"),
    Case("bias_3x101x33", "add.Tensor", _bias, "(3,101,33) + broadcast (33,)"),
)


# ---- arms --------------------------------------------------------------------------------------

PLAIN = "plain"  # the vendor device itself, plain torch tensors, no torch_fl in the process
# --control: the plain arm once more, in a process of its own at the end of each run. Its ratio to the
# first plain process is the noise between two processes doing the same thing (an A/A test): a flagos
# ratio inside that band is not a measured difference.
CONTROL = "plain-again"
DEFAULT_ROUTES = ("native", "flaggems", "cpu")  # flagos routes; a later fast path is one more name
BUILTIN_ROUTES = ("native", "cpu")  # always available; any other name is a provider
PLAIN_DEVICE = {"cpu": "cpu", "cuda": "cuda", "dcu": "cuda"}  # DCU runs HIP behind torch's cuda device
FLAGOS_DEVICE = "flagos:0"


def is_plain(arm: str) -> bool:
    return arm in (PLAIN, CONTROL)


def arm_label(arm: str, vendor: str) -> str:
    """How an arm is shown to people: ``plain cpu`` vs ``flagos cpu`` are different things."""
    if arm == CONTROL:
        return f"plain {PLAIN_DEVICE[vendor]} again"
    return f"plain {PLAIN_DEVICE[vendor]}" if arm == PLAIN else f"flagos {arm}"


def override_var(op: str) -> str:
    """The FLAGOS_OP_ variable that forces ``op``'s route (the dot doubled). Spelled here, not imported from
    torch_fl._env: the plain arms load this file by its path and never import the torch_fl package."""
    return "FLAGOS_OP_" + op.replace(".", "__")


def find_cases(names: list[str] | None) -> tuple[Case, ...]:
    if not names:
        return CASES
    by_name = {c.name: c for c in CASES}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ValueError(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(by_name)}")
    return tuple(by_name[n] for n in names)
