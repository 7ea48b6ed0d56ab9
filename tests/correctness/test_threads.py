"""Threads running ops on shared flagos tensors at the same time get the same results as CPU."""

from __future__ import annotations

import threading

import torch

DEVICE = "flagos"
ROUNDS = 40


def _run_threads(work, count: int) -> list[object]:
    """Run ``work(i)`` in ``count`` threads released together; re-raise the first failure."""
    barrier = threading.Barrier(count)
    results: list[object] = [None] * count
    errors: list[BaseException] = []

    def body(i: int) -> None:
        try:
            barrier.wait()
            results[i] = work(i)
        except BaseException as exc:  # noqa: BLE001  (reported in the main thread)
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def test_concurrent_ops_on_shared_tensors(assert_same):
    g = torch.Generator().manual_seed(0)
    a_host, b_host = torch.randn(32, 48, generator=g), torch.randn(48, 16, generator=g)
    a, b = a_host.to(DEVICE), b_host.to(DEVICE)  # read by both threads
    scales = (2.0, -3.0)

    def work(i: int) -> list[list[torch.Tensor]]:
        s = scales[i]
        acc = torch.zeros(32, 16, device=DEVICE)
        seen = []
        for r in range(ROUNDS):
            y = (a * s + r / ROUNDS) @ b  # pointwise + matmul through the router
            acc.add_(y.relu())  # in-place on a thread-local tensor
            seen.append([y.sum(1), a[a > s].sum(), torch.cat([a[:2], a[-2:]]).amax(0)])
        return [acc, seen]

    results = _run_threads(work, len(scales))
    for i, s in enumerate(scales):
        acc = torch.zeros(32, 16)
        seen = []
        for r in range(ROUNDS):
            y = (a_host * s + r / ROUNDS) @ b_host
            acc.add_(y.relu())
            seen.append([y.sum(1), a_host[a_host > s].sum(), torch.cat([a_host[:2], a_host[-2:]]).amax(0)])
        assert_same(results[i], [acc, seen], exact=False, scale=10, path=f"thread {i}")  # GPU matmul rounding
    assert torch.equal(a.cpu(), a_host) and torch.equal(b.cpu(), b_host)  # shared inputs untouched


def test_concurrent_inplace_on_disjoint_views(assert_same):
    """Two threads write disjoint halves of one flagos tensor through views."""

    def work(base: torch.Tensor, i: int) -> None:
        row = base[i]
        for r in range(ROUNDS):
            row.add_(i + 1).mul_(1.5)
            row[r] = -r

    base = torch.zeros(2, 1000, device=DEVICE)
    _run_threads(lambda i: work(base, i), 2)
    expected = torch.zeros(2, 1000)
    for i in range(2):
        work(expected, i)
    assert_same(base, expected)


def test_concurrent_allocation_and_transfer():
    """Factories, host<->device copies and frees from two threads keep the right bytes."""

    def work(i: int) -> list[torch.Tensor]:
        out = []
        for r in range(ROUNDS):
            host = torch.arange(r * 10, r * 10 + 100, dtype=torch.float32) * (i + 1)
            dev = host.to(DEVICE)
            out.append(dev.cpu() - host)  # zero if the bytes made the round trip intact
            del dev
        return out

    for diffs in _run_threads(work, 2):
        assert all(torch.count_nonzero(d).item() == 0 for d in diffs)
