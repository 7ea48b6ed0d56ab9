"""Conjugate and negative views of flagos tensors (their bits survive re-tagging) against CPU."""

from __future__ import annotations

import pytest
import torch

CASES = {
    "conj_clone": lambda x: x.conj().clone(),
    "conj_add": lambda x: x.conj() + 1,
    "resolve_conj": lambda x: x.conj().resolve_conj(),
    "neg_view": lambda x: x.conj().imag.resolve_neg(),
    "neg_view_mul": lambda x: x.conj().imag * 2,
    "conj_copy_into": lambda x: torch.zeros_like(x).copy_(x.conj()),
    "conj_physical": lambda x: torch.conj_physical(x.conj()),
    "conj_matmul": lambda x: x.conj().reshape(2, 4) @ x.reshape(4, 2),
    "to_host_keeps_conj": lambda x: x.conj(),  # compared after .cpu()
}
# Sums of products: a GPU's matmul rounds differently from the CPU's, so these compare within tolerance.
ROUNDED = {"conj_matmul"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_conjugate_views(assert_same, name):
    torch.manual_seed(0)
    x = torch.randn(8, dtype=torch.complex64)
    got, want = CASES[name](x.to("flagos")), CASES[name](x)
    assert_same(got, want, exact=name not in ROUNDED)
    if name not in ROUNDED:
        assert got.cpu().resolve_conj().resolve_neg().equal(want.resolve_conj().resolve_neg())


def test_conjugate_copied_from_the_host(assert_same):
    x = torch.randn(8, dtype=torch.complex64)
    assert_same(x.conj().to("flagos"), x.conj())


@pytest.mark.parametrize("n", [None, 10])
def test_hfft_of_a_real_tensor(assert_same, n):
    x = torch.randn(8)
    assert_same(torch.fft.hfft(x.to("flagos"), n=n), torch.fft.hfft(x, n=n), exact=False)
