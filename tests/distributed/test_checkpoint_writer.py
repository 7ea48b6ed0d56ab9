"""DCP's file writer saves flagos tensors whatever device type torch finds available first (torch_fl/_checkpoint.py).

On a CUDA vendor torch finds ``cuda``, and its writer's loader then moved only cuda tensors to the host: every
flagos save failed. Under the emulation torch finds flagos itself, so these tests make the writer find ``cuda``, as
on a GPU node, with a stand-in for the stream API that the loader asks of that device's module.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import filesystem

import torch_fl  # noqa: F401


class _Streams:
    """What the loader asks of a device module: a current stream it can wait on, synchronize and enter."""

    class Stream:
        def synchronize(self) -> None:
            pass

        def wait_stream(self, other: object) -> None:
            pass

    current = Stream()

    def current_stream(self) -> Stream:
        return self.current

    @contextlib.contextmanager
    def stream(self, stream: Stream) -> Iterator[None]:
        yield


@pytest.fixture
def writer_finds_another_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(filesystem, "_get_available_device_type", lambda: "cuda")
    monkeypatch.setattr(filesystem, "_get_device_module", lambda device_type: _Streams())


def test_the_loader_hands_flagos_tensors_to_the_writer_on_the_host(writer_finds_another_device: None) -> None:
    values = {"w": torch.arange(6.0).reshape(2, 3).to("flagos"), "host": torch.ones(2)}
    loader = filesystem._OverlappingCpuLoader(values.__getitem__)
    for key, value in values.items():
        loader.add(value.numel() * value.element_size(), key)
    loader.start_loading()
    staged = dict((key, tensor) for tensor, key in loader.values())
    assert {t.device.type for t in staged.values()} == {"cpu"}
    assert torch.equal(staged["w"], torch.arange(6.0).reshape(2, 3)) and torch.equal(staged["host"], torch.ones(2))


def test_a_flagos_state_dict_saves_and_loads_back(writer_finds_another_device: None, tmp_path) -> None:
    model = torch.nn.Linear(4, 3).to("flagos")
    saved = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    dcp.save({"model": model.state_dict()}, checkpoint_id=tmp_path / "step1", no_dist=True)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    state = {"model": model.state_dict()}
    dcp.load(state, checkpoint_id=tmp_path / "step1", no_dist=True)
    model.load_state_dict(state["model"])
    for key, value in model.state_dict().items():
        assert value.device.type == "flagos" and torch.equal(value.cpu(), saved[key]), key
