"""Device-generic behaviour that PyTorch promises on every device, checked on flagos against plain CPU: the same
result, or the same error. Where flagos keeps a refusal, the test checks the refusal that docs/device.md lists."""

from __future__ import annotations

import copy

import pytest
import torch

import torch_fl  # noqa: F401  (registers the flagos device)

DEVICES = ("cpu", "flagos")


# ---- copy_ between overlapping memory --------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
def test_copy_between_partly_overlapping_views_is_refused(device: str) -> None:
    x = torch.arange(8.0, device=device)
    with pytest.raises(RuntimeError, match="unsupported operation: some elements of the input tensor and the "):
        x[1:].copy_(x[:-1])
    assert x.cpu().tolist() == list(range(8)), "a refused copy wrote"


@pytest.mark.parametrize("device", DEVICES)
def test_copy_into_a_tensor_whose_elements_share_memory_is_refused(device: str) -> None:
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor refers to a single"):
        torch.zeros(1, device=device).expand(3).copy_(torch.ones(3, device=device))


def test_copies_within_one_storage_that_may_run_do() -> None:
    x = torch.arange(8.0, device="flagos")
    x.copy_(x)  # onto itself: nothing to do
    x[:4].copy_(x[4:])  # disjoint parts of one storage
    x.t().copy_(x)  # the same memory, seen alike
    assert x.cpu().tolist() == [4.0, 5.0, 6.0, 7.0, 4.0, 5.0, 6.0, 7.0]


# ---- deterministic algorithms fill new memory ------------------------------------------------------------------


@pytest.fixture
def deterministic():
    before = (torch.are_deterministic_algorithms_enabled(), torch.utils.deterministic.fill_uninitialized_memory)
    torch.use_deterministic_algorithms(True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    yield
    torch.use_deterministic_algorithms(before[0])
    torch.utils.deterministic.fill_uninitialized_memory = before[1]


FILLED = (torch.float32, torch.bfloat16, torch.complex64, torch.int32, torch.uint8, torch.bool)


def _same_values(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.device.type == "flagos" and got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("dtype", FILLED)
def test_empty_fills_new_memory_under_deterministic_algorithms(dtype: torch.dtype, deterministic) -> None:
    want = torch.empty(2, 3, dtype=dtype)
    assert want.isnan().all() if dtype.is_floating_point or dtype.is_complex else want.min() == want.max() != 0
    _same_values(torch.empty(2, 3, dtype=dtype, device="flagos"), want)
    _same_values(torch.empty_strided((2, 3), (1, 2), dtype=dtype, device="flagos"), want)


@pytest.mark.parametrize("dtype", (torch.float64, torch.int64))
def test_resize_fills_the_grown_part_under_deterministic_algorithms(dtype: torch.dtype, deterministic) -> None:
    results = []
    for device in DEVICES:
        x = torch.arange(3, dtype=dtype, device=device)
        x.resize_(7)
        x.resize_(2, 5)
        results.append(x)
    _same_values(results[1], results[0])


# ---- torch.mode ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", (torch.float32, torch.int64))
def test_mode_runs_as_on_the_cpu(dtype: torch.dtype, assert_same) -> None:
    host = torch.tensor([[3, 1, 3, 2, 1, 3], [5, 5, 4, 4, 4, 0]], dtype=dtype)
    dev = host.to("flagos")
    assert_same(torch.mode(dev, 1), tuple(torch.mode(host, 1)))
    assert_same(tuple(dev.mode(0, keepdim=True)), tuple(host.mode(0, keepdim=True)))
    values = torch.empty(0, dtype=dtype, device="flagos")
    indices = torch.empty(0, dtype=torch.int64, device="flagos")
    torch.mode(dev, -1, out=(values, indices))
    assert_same((values, indices), tuple(torch.mode(host, -1)))


# ---- Tensor.storage_type() -------------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:TypedStorage is deprecated")
@pytest.mark.parametrize(
    ("dtype", "name"),
    [
        (torch.float32, "FloatStorage"),
        (torch.int8, "CharStorage"),
        (torch.bool, "BoolStorage"),
        (torch.complex64, "ComplexFloatStorage"),
    ],
)
def test_storage_type_is_the_devices_legacy_class(dtype: torch.dtype, name: str) -> None:
    t = torch.zeros(3, dtype=dtype, device="flagos")
    kind = t.storage_type()
    assert kind is getattr(torch.flagos, name)
    assert torch.zeros(3, dtype=dtype).storage_type() is getattr(torch, name)  # what the CPU answers, for contrast
    assert isinstance(t.untyped_storage(), torch.UntypedStorage) and not isinstance(t.storage(), getattr(torch, name))
    assert isinstance(t.storage(), kind)


@pytest.mark.filterwarnings("ignore:TypedStorage is deprecated")
def test_legacy_storage_classes_make_flagos_storage() -> None:
    s = torch.flagos.FloatStorage(4)
    assert (s.device.type, s.dtype, s.size()) == ("flagos", torch.float32, 4)
    with pytest.raises(RuntimeError, match=r"cannot wrap a host buffer.*\.to\('flagos'\)"):
        torch.flagos.FloatStorage.from_buffer(b"\0" * 8, "native")


# ---- nn.DataParallel over two flagos devices -------------------------------------------------------------------


@pytest.mark.filterwarnings("error:PyTorch is not compiled with NCCL")  # torch's reduce_add asks NCCL first
def test_data_parallel_over_two_devices_computes_what_its_replicas_would(two_devices) -> None:
    torch.manual_seed(0)
    host = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.BatchNorm1d(6), torch.nn.Linear(6, 2))
    model = copy.deepcopy(host).to("flagos:0")
    batch = torch.randn(8, 4)
    # two replicas, each on its half of the batch (BatchNorm normalises each half by itself, as on CUDA), and the
    # gradients summed onto the module
    want = torch.cat([host(half) for half in batch.chunk(2)])
    want.square().sum().backward()
    got = torch.nn.DataParallel(model, device_ids=[0, 1])(batch.to("flagos:0"))
    got.square().sum().backward()
    assert got.device == torch.device("flagos:0")
    torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=1e-5, atol=1e-5)
    for (name, p), q in zip(model.named_parameters(), host.parameters(), strict=True):
        assert p.grad is not None and p.grad.device == torch.device("flagos:0"), name
        torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-5, atol=1e-5, msg=name)


# ---- documented refusals (docs/device.md) ----------------------------------------------------------------------

QUANTIZED = r"quantized tensors are not supported on flagos .*\.cpu\(\).*\.dequantize\(\)"


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.quantize_per_tensor(torch.ones(4, device="flagos"), 0.1, 0, torch.qint8),
        lambda: torch.quantize_per_tensor(torch.ones(4), 0.1, 0, torch.qint8).to("flagos"),
        lambda: torch._empty_affine_quantized((2,), scale=0.1, zero_point=0, dtype=torch.quint8, device="flagos"),
    ],
    ids=["quantize a flagos tensor", "move a quantized host tensor", "quantized factory"],
)
def test_quantized_flagos_tensors_are_refused_clearly(make) -> None:
    with pytest.raises(NotImplementedError, match=QUANTIZED):
        make()


def test_sparse_gradients_are_refused_clearly() -> None:
    embedding = torch.nn.Embedding(5, 3, sparse=True).to("flagos")
    loss = embedding(torch.tensor([1, 3], device="flagos")).sum()
    with pytest.raises(NotImplementedError, match=r"parse tensors are not supported on flagos .*sparse=False"):
        loss.backward()


def test_complex32_pow_follows_the_vendor_kernels() -> None:
    # under emulation the vendor is the CPU, whose pow has no ComplexHalf kernel (CUDA's has one): the same error
    base = torch.tensor([1 + 1j, 0.5 - 2j], dtype=torch.complex64)
    for device in DEVICES if torch_fl.accelerator() == "cpu" else ():
        with pytest.raises(NotImplementedError, match="\"pow\" not implemented for 'ComplexHalf'"):
            base.to(torch.complex32).to(device) ** 2
    got = base.to("flagos") ** 2  # complex64 and wider run on every vendor
    torch.testing.assert_close(got.cpu(), base**2)
