"""The flagos device as users meet it: device objects, moves, factories, printing, save/load,
the ``torch.flagos`` device module and several devices in one process (generators: test_device_rng.py)."""

from __future__ import annotations

import gc
import io
import os
import subprocess
import sys

import pytest
import torch

import torch_fl

DEVICE = "flagos"


def sample(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return (torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * 4).to(dtype)


# ---- device objects and moves -------------------------------------------------------------


def test_device_objects():
    d = torch.device("flagos:1")
    assert (d.type, d.index) == ("flagos", 1)
    assert torch.device("flagos", 0) == torch.device("flagos:0")
    assert str(torch.device("flagos")) == "flagos"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool])
def test_to_flagos_and_back(dtype, assert_same):
    host = sample(3, 5, dtype=dtype) if dtype != torch.bool else sample(3, 5) > 0
    dev = host.to(DEVICE)
    assert dev.device == torch.device("flagos", torch.flagos.current_device())
    assert dev.is_flagos and not host.is_flagos
    back = dev.cpu()
    assert back.device.type == "cpu" and back.dtype == dtype
    assert torch.equal(back, host)
    assert_same(dev, host)
    assert torch.equal(dev.to("cpu", copy=True), host)
    assert torch.equal(host.flagos().cpu(), host)  # the generated Tensor.flagos() method


def test_to_with_dtype_and_noncontiguous(assert_same):
    host = sample(4, 6)
    assert_same(host.t().to(DEVICE), host.t())
    assert_same(host.to(DEVICE, torch.float64), host.to(torch.float64))
    assert_same(host.to(DEVICE).to(torch.int32), host.to(torch.int32))
    assert_same(host[:, ::2].to(DEVICE), host[:, ::2])


def test_module_to_flagos(assert_same):
    torch.manual_seed(0)
    layer = torch.nn.Linear(3, 2)
    moved = torch.nn.Linear(3, 2).to(DEVICE)
    moved.load_state_dict(layer.state_dict())
    assert moved.weight.device.type == "flagos"
    x = sample(4, 3)
    assert_same(moved(x.to(DEVICE)), layer(x), exact=False)


# ---- factories ----------------------------------------------------------------------------

FACTORIES = {
    "zeros": lambda d: torch.zeros(2, 3, device=d),
    "ones_int": lambda d: torch.ones(4, dtype=torch.int64, device=d),
    "full": lambda d: torch.full((2, 2), 3.5, device=d),
    "arange": lambda d: torch.arange(1, 10, 2, device=d),
    "arange_float": lambda d: torch.arange(0, 1, 0.125, device=d),
    "linspace": lambda d: torch.linspace(-1, 1, 7, device=d),
    "eye": lambda d: torch.eye(3, 4, device=d),
    "tensor": lambda d: torch.tensor([[1, 2], [3, 4]], device=d),
    "tensor_bf16": lambda d: torch.tensor([0.5, -2.25], dtype=torch.bfloat16, device=d),
    "empty_shape": lambda d: torch.empty(3, 0, 2, device=d).shape,
    "zeros_like": lambda d: torch.zeros_like(torch.ones(2, 5, device=d)),
    "full_like": lambda d: torch.full_like(torch.ones(3, device=d, dtype=torch.float16), 2),
    "new_ones": lambda d: torch.ones(1, device=d).new_ones(2, 3),
    "tril_indices": lambda d: torch.tril_indices(3, 3, device=d),
}


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_factory(name, assert_same):
    fn = FACTORIES[name]
    assert_same(fn(DEVICE), fn("cpu"))


def test_random_factories_land_on_flagos():
    for t in (
        torch.rand(3, device=DEVICE),
        torch.randn(2, 2, device=DEVICE),
        torch.randint(0, 5, (4,), device=DEVICE),
        torch.randperm(5, device=DEVICE),
        torch.empty(3, device=DEVICE).uniform_(),
        torch.empty(3, device=DEVICE).normal_(),
    ):
        assert t.device.type == "flagos"
    r = torch.rand(1000, device=DEVICE).cpu()
    assert 0 <= r.min() and r.max() < 1 and 0.4 < r.mean() < 0.6
    assert sorted(torch.randperm(7, device=DEVICE).tolist()) == list(range(7))


# ---- printing -----------------------------------------------------------------------------


def _with_device(text: str, device: str) -> str:
    """CPU repr -> the repr on ``device``: torch puts device= before dtype=."""
    if ", dtype=" in text:
        return text.replace(", dtype=", f", device='{device}', dtype=", 1)
    return f"{text[:-1]}, device='{device}')"


@pytest.mark.parametrize(
    "make",
    [
        lambda: sample(3),
        lambda: sample(2, 3).to(torch.float16),
        lambda: torch.arange(5),
        lambda: sample(40, 40),
        lambda: torch.tensor(2.5),
        lambda: sample(2, 2) > 0,
    ],
    ids=["f32", "f16", "i64", "summarised", "scalar", "bool"],
)
def test_printing(make):
    host = make()
    device = f"flagos:{torch.flagos.current_device()}"
    # the longer suffix may move a line break: compare the words
    assert repr(host.to(DEVICE)).split() == _with_device(repr(host), device).split()
    assert str(host.to(DEVICE)).split() == _with_device(str(host), device).split()


def test_printing_second_device(two_devices):
    host = sample(4)
    assert repr(host.to("flagos:1")) == _with_device(repr(host), "flagos:1")


# ---- save / load --------------------------------------------------------------------------


def _saved(obj: object) -> io.BytesIO:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return buffer


def test_load_map_location_cpu():
    host = sample(3, 4)
    loaded = torch.load(_saved({"w": host.to(DEVICE), "n": 3}), map_location="cpu")
    assert loaded["w"].device.type == "cpu" and torch.equal(loaded["w"], host) and loaded["n"] == 3


def test_save_state_dict_map_location_cpu():
    layer = torch.nn.Linear(4, 2).to(DEVICE)
    state = torch.load(_saved(layer.state_dict()), map_location="cpu")
    for key, value in layer.state_dict().items():
        assert state[key].device.type == "cpu" and torch.equal(state[key], value.cpu())


def test_load_map_location_flagos():
    host = sample(3, 4)
    loaded = torch.load(_saved(host), map_location="flagos")
    assert loaded.device.type == "flagos" and torch.equal(loaded.cpu(), host)


def test_load_keeps_saved_device(two_devices):
    host = sample(5)
    loaded = torch.load(_saved({"a": host.to("flagos:1"), "b": host}))
    assert loaded["a"].device == torch.device("flagos:1") and torch.equal(loaded["a"].cpu(), host)
    assert loaded["b"].device.type == "cpu"


def test_load_host_tensor_to_flagos_index(two_devices):
    host = sample(5)
    loaded = torch.load(_saved(host), map_location="flagos:1")
    assert loaded.device == torch.device("flagos:1") and torch.equal(loaded.cpu(), host)


# ---- the device module --------------------------------------------------------------------


def test_device_module_is_registered():
    assert torch.flagos is torch_fl.flagos
    assert torch.flagos.is_available()
    assert torch.flagos.is_initialized()


LAZY_INIT_CHILD = """
import torch, torch_fl
calls = []
original = torch.flagos._lazy_init
torch.flagos._lazy_init = lambda: calls.append(1) or original()
torch.empty(2, device="flagos")
torch.zeros(3, device="flagos")
torch.ones(2).to("flagos")
print(len(calls))
"""


def test_torch_lazy_init_runs_once(tmp_path):
    # torch remembers a device module as initialised only after its _lazy_init ran; without one, some torch lines
    # import the module and look the attribute up again on every factory call.
    child = subprocess.run(
        [sys.executable, "-c", LAZY_INIT_CHILD], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.split() == ["1"]


def test_device_count():
    count = torch.flagos.device_count()
    assert count >= 1
    if torch_fl.accelerator() == "cpu":
        assert count == int(os.environ.get("FLAGOS_EMU_DEVICES") or 2)


EMU_DEVICES_CHILD = """
import torch, torch_fl
print(torch.flagos.device_count())
x = torch.arange(4.).to("flagos:2")
print((x * 2).device, (x * 2).cpu().tolist() == (torch.arange(4.) * 2).tolist())
"""


@pytest.mark.skipif(torch_fl.accelerator() != "cpu", reason="FLAGOS_EMU_DEVICES sizes the CPU emulation only")
def test_emulated_device_count_variable(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLAGOS")}
    three = subprocess.run(
        [sys.executable, "-c", EMU_DEVICES_CHILD],
        cwd=tmp_path,
        env={**env, "FLAGOS_EMU_DEVICES": "3"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert three.returncode == 0, three.stderr
    assert three.stdout.split() == ["3", "flagos:2", "True"]
    zero = subprocess.run(
        [sys.executable, "-c", "import torch, torch_fl"],
        cwd=tmp_path,
        env={**env, "FLAGOS_EMU_DEVICES": "0"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert zero.returncode != 0 and "FLAGOS_EMU_DEVICES" in zero.stderr


def test_current_and_set_device(two_devices):
    torch.flagos.set_device(1)
    assert torch.flagos.current_device() == 1
    assert torch.ones(2, device=DEVICE).device == torch.device("flagos:1")
    assert torch.tensor([1, 2], device=DEVICE).device == torch.device("flagos:1")
    assert torch.randn(2, device=DEVICE).device == torch.device("flagos:1")
    assert torch.ones(2).to(DEVICE).device == torch.device("flagos:1")
    torch.flagos.set_device("flagos:0")
    assert torch.flagos.current_device() == 0
    assert torch.ones(2, device=DEVICE).device == torch.device("flagos:0")


def test_device_guard_context(two_devices, assert_same):
    """torch.accelerator's device guard switches the flagos device for factories and moves, and back."""
    assert torch.accelerator.current_accelerator() == torch.device("flagos")
    host = sample(3)
    with torch.accelerator.device_index(1):
        assert torch.flagos.current_device() == 1
        made = [torch.ones(2, device=DEVICE), torch.empty(2, device=DEVICE), host.to(DEVICE)]
        computed = made[2] * 2
    assert torch.flagos.current_device() == 0
    for t in made + [computed]:
        assert t.device == torch.device("flagos:1")
    assert_same(computed, host * 2, device="flagos:1")
    assert torch.ones(2, device=DEVICE).device == torch.device("flagos:0")


def test_default_device_context(two_devices):
    with torch.device("flagos:1"):
        t = torch.zeros(3)
        u = torch.arange(4)
    assert t.device == torch.device("flagos:1") and u.device == torch.device("flagos:1")
    assert torch.zeros(1).device.type == "cpu"


def test_synchronize():
    t = torch.ones(100, device=DEVICE) * 2
    torch.flagos.synchronize()
    torch.flagos.synchronize(0)
    torch.flagos.synchronize("flagos:0")
    torch_fl.flagos.synchronize(torch.device("flagos:0"))
    assert t.sum().item() == 200


def test_memory_allocated_tracks_tensor(assert_same):
    gc.collect()
    device = torch.flagos.current_device()
    before = torch.flagos.memory_allocated()
    t = torch.empty(1024, 1024, device=DEVICE)  # 4 MiB: no allocator rounding
    assert torch.flagos.memory_allocated() - before == t.nbytes
    assert torch.flagos.memory_allocated(device) == torch.flagos.memory_allocated()
    assert torch.flagos.max_memory_allocated() >= before + t.nbytes
    del t
    gc.collect()
    assert torch.flagos.memory_allocated() == before


def test_memory_allocated_per_device(two_devices):
    gc.collect()
    before0, before1 = torch.flagos.memory_allocated(0), torch.flagos.memory_allocated(1)
    t = torch.empty(256, 1024, device="flagos:1")
    assert torch.flagos.memory_allocated(1) - before1 == t.nbytes
    assert torch.flagos.memory_allocated(0) == before0
    del t
    gc.collect()
    assert torch.flagos.memory_allocated(1) == before1


def test_memory_of_op_results_is_counted():
    """Results made by kernels (not by factories) count too, and are given back."""
    gc.collect()
    before = torch.flagos.memory_allocated()
    x = torch.ones(512, 1024, device=DEVICE)
    y = x * 2 + 1
    assert torch.flagos.memory_allocated() - before == x.nbytes + y.nbytes
    del x, y
    gc.collect()
    assert torch.flagos.memory_allocated() == before


# ---- several devices ----------------------------------------------------------------------


def test_ops_stay_on_their_device(two_devices, assert_same):
    a, b = sample(3, 4, seed=1), sample(4, 5, seed=2)
    a1, b1 = a.to("flagos:1"), b.to("flagos:1")
    assert torch.flagos.current_device() == 0
    results = {
        "add": (a1 + 1, a + 1),
        "matmul": (a1 @ b1, a @ b),
        "sum": (a1.sum(0), a.sum(0)),
        "index": (a1[a1 > 0], a[a > 0]),
        "cat": (torch.cat([a1, a1]), torch.cat([a, a])),
        "softmax": (a1.softmax(-1), a.softmax(-1)),
        "view": (a1.t(), a.t()),
        "like": (torch.zeros_like(a1), torch.zeros_like(a)),
        "rand_like": (torch.rand_like(a1).shape, torch.rand_like(a).shape),
    }
    for name, (got, want) in results.items():
        assert_same(got, want, device="flagos:1" if isinstance(want, torch.Tensor) else None, exact=False, path=name)


def test_cross_device_copy(two_devices, assert_same):
    host = sample(3, 4)
    on0 = host.to("flagos:0")
    on1 = on0.to("flagos:1")
    assert_same(on1, host, device="flagos:1")
    back = on1.to("flagos:0")
    assert_same(back, host, device="flagos:0")
    target = torch.zeros(3, 4, device="flagos:1")
    target.copy_(on0)
    assert_same(target, host, device="flagos:1")
    target[:, 1:3].copy_(on0.t()[1:3].t() * 0)
    expected = host.clone()
    expected[:, 1:3] = 0
    assert_same(target, expected, device="flagos:1")
    on0.add_(1)  # the copies are independent
    assert_same(on1, host, device="flagos:1")


def test_mixing_devices_raises(two_devices):
    a = torch.ones(3, device="flagos:0")
    b = torch.ones(3, device="flagos:1")
    for fn in (lambda: a + b, lambda: torch.cat([a, b]), lambda: a.add_(b), lambda: torch.mm(a[None], b[:, None])):
        with pytest.raises(RuntimeError) as caught:
            fn()
        message = str(caught.value)
        assert "flagos:0" in message and "flagos:1" in message, message
    assert torch.equal(a.cpu(), torch.ones(3))  # the failed in-place op left self alone


@pytest.mark.parametrize("order", ["flagos_first", "cpu_first"])
def test_mixing_flagos_and_cpu_raises(order):
    a, b = torch.ones(3, device=DEVICE), torch.ones(3)
    if order == "cpu_first":
        a, b = b, a
    with pytest.raises(RuntimeError, match="(?i)cpu"):
        a + b
