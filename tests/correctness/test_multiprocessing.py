"""flagos tensors through torch.multiprocessing. Under the emulation they share memory as CPU tensors do: the
receiving process sees the sender's storage and the sender sees its writes. On GPU vendors (no CUDA IPC for flagos
storages yet) the receiver gets the refusal as an error, never a queue that waits forever."""

from __future__ import annotations

import pytest
import torch
import torch.multiprocessing as mp

import torch_fl

EMULATED = torch_fl.accelerator() == "cpu"
LAST = f"flagos:{torch.flagos.device_count() - 1}"  # the device index travels too


def consumer(items, results) -> None:  # noqa: ANN001 (queues)
    """Receive (tensor, view of the same storage, parameter, empty tensor); report and write into them."""
    try:
        tensor, view, param, empty = items.get(timeout=120)
    except RuntimeError as exc:
        results.put(("refused", str(exc)))
        return
    same = view.untyped_storage().data_ptr() == tensor.untyped_storage().data_ptr()
    got = {"device": str(tensor.device), "tensor": tensor.tolist(), "view": view.tolist(), "one storage": same}
    got.update(param=(type(param).__name__, param.requires_grad), empty=(empty.device.type, empty.numel()))
    results.put(("got", got))
    view.fill_(7.0)
    param.data.add_(1.0)
    torch.flagos.synchronize()
    results.put(("written",))


def test_queue_shares_flagos_memory_or_refuses_clearly() -> None:
    ctx = mp.get_context("spawn")
    items, results = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=consumer, args=(items, results))
    child.start()
    try:
        tensor = torch.arange(6.0, device=LAST)
        param = torch.nn.Parameter(torch.zeros(2, device="flagos"))
        items.put((tensor, tensor[4:], param, torch.empty(0, device="flagos")))
        first = results.get(timeout=120)
        if not EMULATED:
            assert first[0] == "refused" and ".cpu()" in first[1], first
            return
        want = {"device": LAST, "tensor": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0], "view": [4.0, 5.0], "one storage": True}
        want.update(param=("Parameter", True), empty=("flagos", 0))
        assert first == ("got", want)
        assert results.get(timeout=120) == ("written",)
        assert tensor.tolist() == [0.0, 1.0, 2.0, 3.0, 7.0, 7.0]  # the consumer's writes, seen here
        assert param.tolist() == [1.0, 1.0]
    finally:
        child.join(timeout=120)
        if child.is_alive():
            child.kill()
    assert child.exitcode == 0


def test_on_gpu_vendors_the_refusal_travels_in_place_of_the_tensor(monkeypatch) -> None:  # noqa: ANN001
    """What a GPU vendor does, checked here too: pickling warns, unpickling raises the way out."""
    import pickle
    import types
    from multiprocessing.reduction import ForkingPickler

    from torch_fl import _sharing

    monkeypatch.setattr(_sharing, "_core", types.SimpleNamespace(accelerator=lambda: "cuda"))
    with pytest.warns(UserWarning, match="cannot be shared"):
        data = ForkingPickler.dumps(torch.ones(3, device="flagos"))
    with pytest.raises(RuntimeError, match=r"tensor\.cpu\(\)"):
        pickle.loads(data)
