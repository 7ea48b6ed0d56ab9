"""torch.flagos mirrors torch.cuda's device API: every public callable of torch.cuda is on torch.flagos unless
torch_fl._cuda_only lists it (docs/device.md gives the same list with the reasons), and each answers from the flagos
device: the vendor's on GPUs (tests/correctness/test_device_api_cuda.py compares with plain CUDA), the emulated
device's under emulation."""

from __future__ import annotations

import gc
import inspect

import pytest
import torch

import torch_fl
from torch_fl._cuda_only import CUDA_ONLY

MiB = 1 << 20


def cuda_device_api() -> set[str]:
    """torch.cuda's public callables, less the legacy tensor and storage types (``torch.cuda.FloatTensor``, ...)."""
    names = set()
    for name in torch.cuda.__all__:
        value = getattr(torch.cuda, name, None)
        if not callable(value):
            continue  # submodules (amp, memory, ...) and constants
        if inspect.isclass(value) and name.endswith(("Tensor", "Storage")):
            continue
        names.add(name)
    return names


def emulation_only() -> None:
    if torch_fl.accelerator() != "cpu":
        pytest.skip(f"emulation only; this process runs FLAGOS_ACCELERATOR={torch_fl.accelerator()}")


def test_every_name_of_torch_cuda_is_on_torch_flagos_or_listed_as_cuda_only() -> None:
    wanted = cuda_device_api()
    missing = sorted(name for name in wanted - set(CUDA_ONLY) if not hasattr(torch.flagos, name))
    assert not missing, f"torch.flagos lacks {missing}: add them, or list them in torch_fl/_cuda_only.py with a reason"
    covered = sorted(wanted - set(CUDA_ONLY))
    assert all(callable(getattr(torch.flagos, name)) for name in covered)
    # The list names only real torch.cuda names that torch.flagos really leaves out: no stale entries.
    stale = sorted(name for name in CUDA_ONLY if hasattr(torch.flagos, name))
    assert not stale, f"{stale} are on torch.flagos but listed as CUDA-only"
    excepted = len(wanted & set(CUDA_ONLY))
    print(f"torch.cuda device API: {len(wanted)} names, {len(covered)} on torch.flagos, {excepted} CUDA-only")


def test_memory_module_is_reachable_as_on_cuda() -> None:
    for name in ("_record_memory_history", "_snapshot", "_dump_snapshot", "memory_snapshot", "MemPool"):
        assert callable(getattr(torch.flagos.memory, name)), name


def test_torch_accelerator_get_memory_info_answers_for_flagos() -> None:
    free, total = torch.accelerator.get_memory_info()
    assert 0 <= free <= total and total > 0
    assert torch.flagos.mem_get_info()[1] == total
    assert torch.accelerator.get_memory_info("flagos:0")[1] == torch.flagos.mem_get_info(0)[1]


def test_every_torch_accelerator_function_answers_for_flagos() -> None:
    assert torch.accelerator.current_accelerator().type == "flagos"
    if hasattr(torch.accelerator, "get_device_capability"):
        dtypes = torch.accelerator.get_device_capability()["supported_dtypes"]
        assert {torch.float32, torch.bfloat16, torch.int64} <= set(dtypes)
    with torch.accelerator.device_index(0):
        torch.accelerator.set_stream(torch.accelerator.current_stream())
        torch.accelerator.synchronize()
    if hasattr(torch.accelerator, "empty_host_cache"):  # torch 2.13 on; the H100's 2.11 has none
        torch.accelerator.empty_host_cache()
    held = torch.empty(MiB, dtype=torch.uint8, device="flagos")
    if torch_fl.accelerator() == "cpu":
        torch.flagos.memory._record_memory_history(context=None, stacks="python")
        try:
            again = torch.empty(MiB, dtype=torch.uint8, device="flagos")
            # torch.accelerator's snapshot starts after 2.12; flagos's own module answers on every line
            memory = torch.accelerator.memory if hasattr(torch.accelerator.memory, "_snapshot") else torch.flagos.memory
            snapshot = memory._snapshot()
        finally:
            torch.flagos.memory._record_memory_history(enabled=None)
        assert again.data_ptr() in {s["address"] for s in snapshot["segments"]}
    assert torch.accelerator.memory_allocated() >= held.nbytes


def test_properties_name_and_memory_of_the_emulated_device() -> None:
    emulation_only()
    props = torch.flagos.get_device_properties()
    assert "emulated" in torch.flagos.get_device_name() == props.name
    free, total = torch.flagos.mem_get_info()
    assert props.total_memory == total
    assert torch.flagos.get_device_capability() == (props.major, props.minor) == (0, 0)
    held = torch.empty(4 * MiB, dtype=torch.uint8, device="flagos")
    assert torch.flagos.mem_get_info()[0] == free - held.nbytes  # free memory is the capacity less what is held
    assert torch.flagos.device_memory_used() == total - torch.flagos.mem_get_info()[0]
    with pytest.raises(ValueError, match="out of range"):
        torch.flagos.get_device_properties(torch.flagos.device_count())


def test_rng_state_of_every_device_round_trips() -> None:
    states = torch.flagos.get_rng_state_all()
    assert len(states) == torch.flagos.device_count()
    first = torch.rand(4, device="flagos").cpu()
    torch.flagos.set_rng_state_all(states)
    assert torch.equal(torch.rand(4, device="flagos").cpu(), first)
    torch.flagos.seed_all()
    with pytest.raises(ValueError, match="one per device"):
        torch.flagos.set_rng_state_all(states[:1] * (len(states) + 1))


def test_device_of_makes_the_tensor_device_current(two_devices) -> None:
    t = torch.zeros(1, device="flagos:1")
    with torch.flagos.device_of(t):
        assert torch.flagos.current_device() == 1
    assert torch.flagos.current_device() == 0
    with torch.flagos.device_of(torch.zeros(1)):  # a host tensor changes nothing
        assert torch.flagos.current_device() == 0
    assert torch.flagos.can_device_access_peer(0, 1)


def test_out_of_memory_error_is_torchs() -> None:
    assert torch.flagos.OutOfMemoryError is torch.OutOfMemoryError


def test_raw_blocks_are_counted_until_deleted() -> None:
    gc.collect()  # tensors of earlier tests, freed while this one counts, would move the numbers
    before = torch.flagos.memory_allocated()
    address = torch.flagos.caching_allocator_alloc(2 * MiB)
    assert address != 0 and torch.flagos.memory_allocated() >= before + 2 * MiB
    torch.flagos.caching_allocator_delete(address)
    assert torch.flagos.memory_allocated() == before
    with pytest.raises(RuntimeError, match="not an address caching_allocator_alloc returned"):
        torch.flagos.caching_allocator_delete(address)


def test_emulated_sensors_say_what_the_device_is() -> None:
    emulation_only()
    assert torch.flagos.utilization() == 0 and torch.flagos.memory_usage() == 0
    with pytest.raises(RuntimeError, match="emulated flagos device has no temperature sensor"):
        torch.flagos.temperature()
    with pytest.raises(RuntimeError, match="no streams made outside torch"):
        torch.flagos.ExternalStream(1234)
    assert torch.flagos.get_allocator_backend() == "emulation"
