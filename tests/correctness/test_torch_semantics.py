"""Device-generic behaviour that PyTorch promises on every device, checked on flagos against plain CPU: the same
result, or the same error. Where flagos keeps a refusal, the test checks the refusal that docs/device.md lists."""

from __future__ import annotations

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
