"""Sparse layouts are not supported on flagos: every way to make a sparse flagos tensor ends in one message that
says so and names the ways out, never an internal error ("Cannot access storage of SparseTensorImpl")."""

from __future__ import annotations

import pytest
import torch

import torch_fl  # noqa: F401

MESSAGE = r"not supported on flagos .*\.cpu\(\).*\.to_dense\(\)"

MAKERS = {
    "dense.to_sparse": lambda: torch.arange(6.0, device="flagos").to_sparse(),
    "to_sparse_csr": lambda: torch.eye(3, device="flagos").to_sparse_csr(),
    "sparse factory": lambda: torch.sparse_coo_tensor(torch.tensor([[0, 2]]), torch.ones(2), (3,), device="flagos"),
    "host sparse .to": lambda: torch.eye(3).to_sparse().to("flagos"),
}


@pytest.mark.parametrize("name", list(MAKERS))
def test_sparse_flagos_tensors_are_refused_clearly(name: str) -> None:
    with pytest.raises(NotImplementedError, match=MESSAGE):
        MAKERS[name]()


def test_host_sparse_tensors_still_work_beside_flagos() -> None:
    sparse = torch.eye(3).to_sparse()
    dense = torch.arange(9.0).reshape(3, 3)
    result = torch.sparse.mm(sparse, dense).to("flagos")
    assert torch.equal(result.cpu(), dense)
