"""torch.distributed on flagos tensors: every collective, DDP against one process, and a dead rank.

Each scenario starts WORLD_SIZE ranks of worker.py as separate processes (as torchrun does) on a free port and
reads their verdicts. Under emulation the collectives run over Gloo, on a GPU node over NCCL: the same tests.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import torch_fl  # noqa: F401

HERE = Path(__file__).parent
WORKER = HERE / "worker.py"
sys.path.insert(0, str(HERE))
import worker  # noqa: E402  (its model, batches and step count are the single-process reference's too)

# Seconds a launch may take (FLAGOS_DIST_TIMEOUT_S); a rank still running after it is a hang, and each rank
# prints its Python stack shortly before (worker.py, FLAGOS_DIST_HANG_DUMP_S).
TIMEOUT_S = float(os.environ.get("FLAGOS_DIST_TIMEOUT_S", "240"))


def _worlds() -> tuple[int, ...]:
    """2 and 4 ranks; on GPUs no more ranks than devices (NCCL gives each rank a GPU of its own)."""
    if torch_fl.accelerator() == "cpu":
        return (2, 4)
    return tuple(w for w in (2, 4) if w <= torch.flagos.device_count())


WORLDS = _worlds()
needs_two = pytest.mark.skipif(not WORLDS, reason="needs 2 flagos devices with one GPU each (NCCL, RCCL)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# How a rank that lost its peer learns of it: Gloo fails the collective by itself; NCCL does when the waiting
# thread blocks on the work (instead of the watchdog tearing the process down after the timeout).
PEER_LOSS_ENV = {"TORCH_NCCL_BLOCKING_WAIT": "1", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "0"}


def launch(scenario: str, world: int, tmp: Path) -> list[dict]:
    """Run ``scenario`` on ``world`` ranks; the ranks' results, or a failure that shows what each rank printed."""
    tmp.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), PYTHONFAULTHANDLER="1",
                   FLAGOS_DIST_HANG_DUMP_S=str(max(TIMEOUT_S - 15, 5)))
        if scenario == "dead-peer":
            env.update(PEER_LOSS_ENV)
        procs.append(subprocess.Popen([sys.executable, str(WORKER), scenario, str(tmp)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    logs = []
    hung = None
    for rank, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=TIMEOUT_S if hung is None else 5)
        except subprocess.TimeoutExpired:
            hung = rank if hung is None else hung
            p.kill()
            out, _ = p.communicate()
        logs.append(f"--- rank {rank} (exit {p.returncode})\n{out[-3000:]}")
    if hung is not None:
        pytest.fail(f"{scenario} on {world} ranks: rank {hung} still running after {TIMEOUT_S:.0f} s (a hang)\n"
                    + "\n".join(logs))
    results = []
    for rank in range(world):
        path = tmp / f"rank{rank}.json"
        results.append(json.loads(path.read_text()) if path.is_file() else None)
    if scenario != "dead-peer":
        missing = [r for r, res in enumerate(results) if res is None]
        assert not missing, f"{scenario}: ranks {missing} wrote no result\n" + "\n".join(logs)
    return results


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
    for expected in ("all_reduce.RedOpType.SUM", "broadcast", "reduce", "all_gather[0]", "all_gather_into_tensor",
                     "reduce_scatter", "reduce_scatter_tensor", "all_to_all_single", "send/recv", "barrier"):
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
            torch.testing.assert_close(torch.tensor(values), want[name], rtol=rtol, atol=atol,
                                       msg=lambda m, rank=rank, name=name: f"rank {rank} {name}: {m}")


@needs_two
def test_dead_rank_fails_the_others_with_a_named_error(tmp_path):
    """A rank that dies makes the others' next collective fail within the group timeout (5 s), with an error
    that names the collective, the rank and the library, instead of hanging."""
    per_rank = launch("dead-peer", 2, tmp_path)
    survivor = per_rank[0]
    assert survivor is not None, "rank 0 wrote no result"
    assert survivor["error"], "all_reduce with a dead peer returned normally"
    assert "all_reduce" in survivor["error"] and "rank 0 of 2" in survivor["error"], survivor["error"]
    assert survivor["seconds"] < 60, f"the error took {survivor['seconds']:.0f} s"
