"""Streams and events on flagos: torch.flagos.Stream/Event/current_stream/stream(...) and the generic
torch.Stream/torch.Event, as training scripts use them on CUDA. Under emulation every stream is one serial queue
and events carry host time; on a GPU they are the vendor's (the cuda-marked test checks record_stream there)."""

from __future__ import annotations

import threading

import pytest
import torch

import torch_fl  # noqa: F401


def test_new_streams_are_distinct_flagos_streams() -> None:
    a, b = torch.flagos.Stream(), torch.flagos.Stream()
    assert a.device == torch.device("flagos", torch.flagos.current_device())
    assert a != b
    assert a != torch.flagos.default_stream()
    assert isinstance(a, torch.flagos.Stream) and isinstance(a, torch.Stream)
    generic = torch.Stream(device="flagos")
    assert isinstance(generic, torch.flagos.Stream) and generic.device.type == "flagos"
    assert not isinstance(torch.Stream(device="cpu"), torch.flagos.Stream)


def test_stream_context_switches_the_current_stream_and_restores_it() -> None:
    s = torch.flagos.Stream()
    before = torch.flagos.current_stream()
    assert before == torch.flagos.default_stream()
    with torch.flagos.stream(s):
        assert torch.flagos.current_stream() == s
        with torch.flagos.stream(None):  # None changes nothing, as torch.cuda.stream(None)
            assert torch.flagos.current_stream() == s
    assert torch.flagos.current_stream() == before
    with s:  # torch.Stream's own context manager goes through the same device guard
        assert torch.flagos.current_stream() == s
    assert torch.flagos.current_stream() == before


def test_stream_context_on_another_device_switches_the_device_too() -> None:
    if torch.flagos.device_count() < 2:
        pytest.skip(f"needs two flagos devices, this process has {torch.flagos.device_count()}")
    s1 = torch.flagos.Stream("flagos:1")
    assert s1.device == torch.device("flagos:1")
    with torch.flagos.stream(s1):
        assert torch.flagos.current_device() == 1
        assert torch.flagos.current_stream() == s1
        assert torch.ones(2, device="flagos").device == torch.device("flagos:1")
    assert torch.flagos.current_device() == 0
    assert torch.flagos.current_stream("flagos:1") == torch.flagos.default_stream("flagos:1")


def test_the_current_stream_is_per_thread() -> None:
    s = torch.flagos.Stream()
    seen: list[torch.Stream] = []
    with torch.flagos.stream(s):
        worker = threading.Thread(target=lambda: seen.append(torch.flagos.current_stream()))
        worker.start()
        worker.join()
        assert torch.flagos.current_stream() == s
    assert seen == [torch.flagos.default_stream()]


def test_work_on_a_side_stream_is_ordered_with_events(assert_same) -> None:
    x = torch.randn(64, 64)
    side = torch.flagos.Stream()
    xf = x.to("flagos")
    side.wait_stream(torch.flagos.current_stream())
    with torch.flagos.stream(side):
        yf = xf @ xf
        done = torch.flagos.Event()
        done.record()
    current = torch.flagos.current_stream()
    current.wait_event(done)
    zf = yf + 1  # on the current stream: the event orders it after the side stream's matmul
    # A GPU may still be running the matmul right after record(): query only once the current stream has drained.
    current.synchronize()
    assert done.query() and side.query()
    assert_same(zf, x @ x + 1, exact=False)


def test_timing_events_measure_elapsed_time() -> None:
    start, end = torch.flagos.Event(enable_timing=True), torch.flagos.Event(enable_timing=True)
    start.record()
    x = torch.randn(256, 256, device="flagos")
    for _ in range(5):
        x = x @ x.T / 256
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) > 0
    assert end.elapsed_time(start) < 0
    generic = torch.Event(device="flagos", enable_timing=True)
    generic.record()
    generic.synchronize()
    assert end.elapsed_time(generic) >= 0  # torch.flagos.Event and torch.Event are the same kind


def test_elapsed_time_needs_timing_events_recorded() -> None:
    plain_a, plain_b = torch.flagos.Event(), torch.flagos.Event()
    plain_a.record()
    plain_b.record()
    with pytest.raises((RuntimeError, ValueError), match="enable_timing=True"):  # torch's own check
        plain_a.elapsed_time(plain_b)
    timed_a, timed_b = torch.flagos.Event(enable_timing=True), torch.flagos.Event(enable_timing=True)
    timed_a.record()
    with pytest.raises((RuntimeError, ValueError), match="recorded"):
        timed_a.elapsed_time(timed_b)


def test_an_event_never_recorded_is_complete() -> None:
    e = torch.flagos.Event()
    assert e.query()
    e.synchronize()
    torch.flagos.current_stream().wait_event(e)


def test_record_stream_takes_a_flagos_stream_of_the_tensors_device() -> None:
    x = torch.ones(8, device="flagos")
    x.record_stream(torch.flagos.Stream())
    with pytest.raises(RuntimeError, match="needs a flagos stream"):
        x.record_stream(torch.Stream(device="cpu"))
    if torch.flagos.device_count() > 1:
        with pytest.raises(RuntimeError, match="belongs to flagos:1"):
            x.record_stream(torch.flagos.Stream("flagos:1"))


def test_set_stream_rejects_other_devices_streams() -> None:
    with pytest.raises(ValueError, match="expected a flagos stream"):
        torch.flagos.set_stream(torch.Stream(device="cpu"))
    s = torch.flagos.Stream()
    torch.flagos.set_stream(s)
    try:
        assert torch.flagos.current_stream() == s
    finally:
        torch.flagos.set_stream(torch.flagos.default_stream())


@pytest.mark.cuda
def test_record_stream_keeps_memory_from_reuse_while_a_side_stream_uses_it() -> None:
    """On a GPU: a block read by a side stream, then freed, is not handed out again until the side stream has
    finished, exactly as with plain CUDA tensors. The control (no record_stream) shows the block is reused."""
    if torch_fl.accelerator() not in ("cuda", "dcu"):
        pytest.skip(f"needs a GPU runtime; this process runs FLAGOS_ACCELERATOR={torch_fl.accelerator()}")
    n = 1 << 20

    def reused(record: bool) -> bool:
        torch.flagos.synchronize()
        x = torch.ones(n, device="flagos")
        side = torch.flagos.Stream()
        side.wait_stream(torch.flagos.current_stream())
        with torch.flagos.stream(side):
            torch.cuda._sleep(200_000_000)  # keeps the side stream busy for a while
            y = x * 2
        if record:
            x.record_stream(side)
        pointer = x.data_ptr()
        del x
        z = torch.empty(n, device="flagos")  # same size, on the current stream
        again = z.data_ptr() == pointer
        side.synchronize()
        assert torch.equal(y.cpu(), torch.full((n,), 2.0))
        return again

    assert reused(record=False), "control: without record_stream the freed block should be reused at once"
    assert not reused(record=True), "record_stream did not keep the block from reuse while the side stream ran"
