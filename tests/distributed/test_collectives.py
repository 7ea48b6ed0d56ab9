"""torch.distributed on flagos tensors: every collective, DDP against one process, and a dead rank.

Each scenario starts WORLD_SIZE ranks of worker.py as separate processes (as torchrun does) on a free port and
reads their verdicts. Under emulation the collectives run over Gloo, on a GPU node over NCCL: the same tests.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import torch_fl  # noqa: F401

sys.path.insert(0, str(Path(__file__).parent))
import worker  # noqa: E402  (its model, batches and step count are the single-process reference's too)
from launcher import WORLDS, launch  # noqa: E402

needs_two = pytest.mark.skipif(not WORLDS, reason="needs 2 flagos devices with one GPU each (NCCL, RCCL)")


@pytest.fixture(scope="module")
def collectives(tmp_path_factory):
    """The verdicts of one launch per world size, shared by the tests below (a failed launch fails them all
    with its message, without launching again)."""
    runs: dict[int, tuple[dict, ...] | BaseException] = {}

    def get(world: int) -> tuple[dict, ...]:
        if world not in runs:
            try:
                runs[world] = tuple(launch("collectives", world, tmp_path_factory.mktemp(f"collectives{world}")))
            except (AssertionError, pytest.fail.Exception) as exc:
                runs[world] = exc
        if isinstance(runs[world], BaseException):
            raise runs[world]
        return runs[world]

    return get


CASES = [
    f"{dtype}/{layout}/{mode}"
    for dtype in worker.DTYPES
    for layout in ("contiguous", "strided")
    for mode in ("sync", "async")
]


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("case", CASES)
def test_every_collective(collectives, world, case):
    """all_reduce (sum, max), broadcast, reduce, all_gather(_into_tensor), reduce_scatter(_tensor),
    all_to_all_single, send/recv and barrier give exactly the expected tensors on every rank, in place."""
    per_rank = collectives(world)
    failures = {
        f"rank {r}: {name}": verdict
        for r, res in enumerate(per_rank)
        for name, verdict in res[case].items()
        if verdict != "ok"
    }
    assert not failures, "\n".join(f"{k}: {v}" for k, v in failures.items())
    names = set(per_rank[0][case])
    for expected in (
        "all_reduce.RedOpType.SUM",
        "broadcast",
        "reduce",
        "all_gather[0]",
        "all_gather_into_tensor",
        "reduce_scatter",
        "reduce_scatter_tensor",
        "all_to_all_single",
        "send/recv",
        "barrier",
    ):
        assert expected in names, f"{expected} was not checked (checked: {sorted(names)})"


@needs_two
def test_default_map_sends_flagos_to_flagos(collectives):
    """init_process_group() without a backend maps the flagos device to the flagos backend."""
    assert "flagos:flagos" in collectives(WORLDS[0])[0]["backend_for_flagos"].replace(" ", "")


@pytest.mark.parametrize("world", WORLDS)
def test_ddp_equals_one_process_on_the_whole_batch(tmp_path, world):
    """DDP over ``world`` ranks, each on its share of the batch, ends with the parameters of one process
    trained on the whole batch (the CPU model here)."""
    per_rank = launch("ddp", world, tmp_path)
    reference = worker.tiny_model()
    worker.train("tiny", reference, 0, 1, torch.device("cpu"))
    want = {n: p.detach() for n, p in reference.named_parameters()}
    _same_params(per_rank, want, rtol=1e-5, atol=1e-6)


def test_ddp_with_no_backend_named_trains_on_flagos(tmp_path):
    """The README's example: init_process_group() with no backend, then DDP of a flagos model, trains as with the
    flagos backend named (torch's own default leaves DDP looking for a Gloo backend it never made)."""
    per_rank = launch("ddp-default", WORLDS[0] if WORLDS else 1, tmp_path)
    assert {res["backend"] for res in per_rank} == {torch_fl.distributed.default_backend()}
    reference = worker.tiny_model()
    worker.train("tiny", reference, 0, 1, torch.device("cpu"))
    _same_params(per_rank, {n: p.detach() for n, p in reference.named_parameters()}, rtol=1e-5, atol=1e-6)


def test_a_backend_that_leaves_out_flagos_warns_with_what_to_write():
    """init_process_group("gloo") maps cpu and cuda only: the warning comes at once and names the string that also
    serves flagos tensors; no backend, or a map that names flagos, passes through without a word."""
    import warnings

    from torch_fl import distributed as fl_dist

    assert getattr(torch.distributed.init_process_group, "__wrapped_by_torch_fl__", False)
    calls = []

    def init(backend=None, init_method=None, timeout=None):
        calls.append(backend)

    wrapped = fl_dist._with_flagos_default(init)
    with pytest.warns(UserWarning, match=r"init_process_group\('gloo'\) gives flagos tensors no backend"):
        wrapped("gloo")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        wrapped()
        wrapped(backend="flagos")
        wrapped("cpu:gloo,flagos:flagos")
    assert calls == ["gloo", fl_dist.default_backend(), "flagos", "cpu:gloo,flagos:flagos"]


@needs_two
def test_ddp_encoder_equals_one_device(tmp_path):
    """The 2-layer TransformerEncoder: DDP over two flagos devices ends where one flagos device ends that
    trained on the whole batch (both run the vendor's kernels: no host reference in between)."""
    one = launch("ddp-encoder", 1, tmp_path / "one")[0]
    want = {n: torch.tensor(v) for n, v in one["params"].items()}
    _same_params(launch("ddp-encoder", 2, tmp_path / "two"), want, rtol=1e-4, atol=1e-5)


def _same_params(per_rank: list[dict], want: dict[str, torch.Tensor], *, rtol: float, atol: float) -> None:
    for rank, res in enumerate(per_rank):
        assert sorted(res["params"]) == sorted(want), f"rank {rank}: other parameters than the reference"
        for name, values in res["params"].items():
            torch.testing.assert_close(
                torch.tensor(values),
                want[name],
                rtol=rtol,
                atol=atol,
                msg=lambda m, rank=rank, name=name: f"rank {rank} {name}: {m}",
            )


@needs_two
def test_dead_rank_fails_the_others_with_a_named_error(tmp_path):
    """A rank that dies makes the others' next collective fail within the group timeout (5 s), with an error
    that names the collective, the rank and the library, instead of hanging."""
    per_rank = launch("dead-peer", 2, tmp_path, peer_loss=True, every_rank_writes=False)
    survivor = per_rank[0]
    assert survivor is not None, "rank 0 wrote no result"
    assert survivor["error"], "all_reduce with a dead peer returned normally"
    assert "all_reduce" in survivor["error"] and "rank 0 of 2" in survivor["error"], survivor["error"]
    assert survivor["seconds"] < 60, f"the error took {survivor['seconds']:.0f} s"
