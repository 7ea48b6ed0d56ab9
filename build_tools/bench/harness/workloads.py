"""What the harness measures beyond the node check's A/B, as data: the paired arms, the overhead ops and the
training step's model.

Adding an op or an arm is adding a row here; the harness's other modules hold no per-op code. torch is imported
inside the builders only, so the parent process reads these tables without loading torch. Inputs are built on the
host and then moved to the device under test, as the node check's cases are (torch_fl/bench/cases.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

PLAIN = "plain"  # torch_fl/bench/cases.py's name of the plain arm


def _host_then(device: torch.device, *shape: int) -> torch.Tensor:
    import torch

    return torch.randn(*shape).to(device)


# ---- paired arms ------------------------------------------------------------------------------

# --paired-arms: the flagos arms one paired process times beside plain, as (route, replay on). The two flaggems
# arms take the same route; only the replay cache's switch tells FlagGems' Python path from its C++ replay.
PAIRED_ARMS: dict[str, tuple[str, bool]] = {
    "native": ("native", False),
    "flaggems": ("flaggems", False),
    "flaggems/replay": ("flaggems", True),
    "cpu": ("cpu", False),
}
DEFAULT_PAIRED_ARMS = ("native",)


# ---- dispatch overhead -----------------------------------------------------------------------------


@dataclass(frozen=True)
class OverheadOp:
    """One small-input op: ``setup`` makes the state on the device, ``call`` runs the op once.

    ``kind`` is the class of host work the router does for it: a functional op, an in-place or out= op (a
    written argument handed back), a backward kernel, a list op of torch.optim (one call, many tensors), or
    the device's own bookkeeping (views, allocation, copies), which never reaches the router."""

    name: str
    kind: str
    setup: Callable[[torch.device], dict[str, Any]]
    call: Callable[[dict[str, Any]], Any]
    note: str


SMALL = (16, 16)
LIST_LEN = 24  # the parameter tensors of the training step's model (2 encoder layers)


def _pair(device: torch.device) -> dict[str, Any]:
    return {"x": _host_then(device, *SMALL), "y": _host_then(device, *SMALL), "device": device}


def _host(device: torch.device) -> dict[str, Any]:
    import torch

    return {"h": torch.randn(*SMALL), "device": device}


def _lists(device: torch.device) -> dict[str, Any]:
    return {name: [_host_then(device, *SMALL) for _ in range(LIST_LEN)] for name in ("xs", "ys", "zs")}


def _empty(s: dict[str, Any]) -> Any:
    import torch

    return torch.empty(SMALL, device=s["device"])


def _aten(name: str) -> Any:
    import torch

    packet, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten, packet), overload or "default")


def _foreach(name: str, *lists: str, scalar: float | None = None) -> Callable[[dict[str, Any]], Any]:
    def call(s: dict[str, Any]) -> Any:
        import torch

        args = [s[n] for n in lists] + ([] if scalar is None else [scalar])
        return getattr(torch, name)(*args)

    return call


OVERHEAD_OPS: tuple[OverheadOp, ...] = (
    OverheadOp("view", "bookkeeping", _pair, lambda s: s["x"].view(-1), "x.view(-1), 16x16 float32"),
    OverheadOp("transpose", "bookkeeping", _pair, lambda s: s["x"].t(), "x.t()"),
    OverheadOp("select", "bookkeeping", _pair, lambda s: s["x"].select(0, 0), "x.select(0, 0)"),
    OverheadOp("empty", "bookkeeping", _pair, _empty, "torch.empty(16, 16, device=dev)"),
    OverheadOp("clone", "bookkeeping", _pair, lambda s: s["x"].clone(), "x.clone()"),
    # copy=True: on the plain cpu arm a move to the host would otherwise return x itself and copy nothing
    OverheadOp("to_host", "bookkeeping", _pair, lambda s: s["x"].to("cpu", copy=True), "x.to('cpu', copy=True)"),
    OverheadOp("from_host", "bookkeeping", _host, lambda s: s["h"].to(s["device"], copy=True), "h.to(dev, copy=True)"),
    OverheadOp("add", "functional", _pair, lambda s: s["x"] + s["y"], "x + y"),
    OverheadOp("mul", "functional", _pair, lambda s: s["x"] * s["y"], "x * y"),
    OverheadOp("sum", "functional", _pair, lambda s: s["x"].sum(), "x.sum() (full reduction)"),
    OverheadOp("mm", "functional", _pair, lambda s: s["x"] @ s["y"], "x @ y, 16x16 by 16x16"),
    OverheadOp("add_", "in-place", _pair, lambda s: s["x"].add_(s["y"], alpha=1e-3), "x.add_(y, alpha=1e-3)"),
    OverheadOp(
        "addcmul_",
        "in-place",
        _pair,
        lambda s: s["x"].addcmul_(s["y"], s["y"], value=1e-3),
        "x.addcmul_(y, y, value=1e-3)",
    ),
    OverheadOp(
        "add_out", "out=", _pair, lambda s: _aten("add.out")(s["x"], s["y"], out=s["y"]), "aten.add.out(x, y, out=y)"
    ),
    OverheadOp(
        "threshold_backward",
        "backward",
        _pair,
        lambda s: _aten("threshold_backward")(s["y"], s["x"], 0.0),
        "relu's backward kernel",
    ),
    OverheadOp(
        "softmax_backward",
        "backward",
        _pair,
        lambda s: _aten("_softmax_backward_data")(s["y"], s["x"], 1, s["x"].dtype),
        "softmax's backward kernel",
    ),
    OverheadOp(
        "foreach_add_",
        "list",
        _lists,
        _foreach("_foreach_add_", "xs", "ys"),
        f"torch._foreach_add_(xs, ys), {LIST_LEN} tensors each",
    ),
    OverheadOp(
        "foreach_addcdiv_",
        "list",
        _lists,
        _foreach("_foreach_addcdiv_", "xs", "ys", "zs", scalar=1e-3),
        f"torch._foreach_addcdiv_(xs, ys, zs, 1e-3), {LIST_LEN} tensors each",
    ),
)
OVERHEAD_ARMS = (PLAIN, "native")
OVERHEAD_PAIRS = 6  # rounds of one batch per arm, per op: single calls are ~µs, the median keeps one stall out
OVERHEAD_CONF = "# torch_fl bench: every routed op takes the native route\ndefault = native\n"


# ---- training step -------------------------------------------------------------------------------------------

# The step of a 2-layer TransformerEncoder (4 heads, ffn 4 x d_model, sequence 128, batch 8): forward, backward
# and AdamW (torch's default, the _foreach_ form), as the harness's ``--step 256,1024`` measures it. Each arm
# runs in processes of its own (flagos and plain CUDA autograd cannot share a process).
STEP_SHIPPED = "shipped"  # flagos with the vendor's conf as the wheel ships it
STEP_ARMS = (PLAIN, STEP_SHIPPED, "native")
STEP_SEQ, STEP_BATCH, STEP_LAYERS, STEP_HEADS = 128, 8, 2, 4
STEP_PROFILE_STEPS = 5  # steps under torch.profiler per arm (--step-profile)


def build_step(device: torch.device, d_model: int) -> Callable[[], None]:
    """The step as one call; the model and the batch are made on the host from one seed, then moved."""
    import torch

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model, STEP_HEADS, 4 * d_model, dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, STEP_LAYERS, enable_nested_tensor=False).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(STEP_BATCH, STEP_SEQ, d_model).to(device)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        opt.step()

    return step
