"""FSDP2, DTensor, tensor parallelism and distributed checkpoints on flagos, against one process on the host.

Two launches serve every test here (starting ranks is most of the time): 4 ranks train, tensor-parallelize and
save a checkpoint; then 2 ranks train (float32, bfloat16 mixed precision, host offload), move DTensors between
placements, tensor-parallelize, resume the 4-rank checkpoint, survive a failed save, refuse bad input and lose a
rank. Each rank writes what it saw (sharded_worker.py); the references are trained here, on the CPU.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import torch_fl

sys.path.insert(0, str(Path(__file__).parent))
import sharded_checks as checks  # noqa: E402
import sharded_models as models  # noqa: E402
from launcher import WORLDS, launch  # noqa: E402

SMALL = 2 if 2 in WORLDS else None
BIG = 4 if 4 in WORLDS else None  # on a node of 2 GPUs the checkpoint is saved and resumed on 2
BIG_PARTS = ["fsdp-fp32", "fsdp-bf16", "fsdp-tp-2d", "tp-mlp", "tp-attention", "dcp-save"]
SMALL_PARTS = [
    "fsdp-fp32",
    "fsdp-bf16",
    "fsdp-offload",
    "dtensor",
    "tp-mlp",
    "tp-attention",
    "errors",
    "dcp-resume",
    "dcp-interrupted",
    "dead-rank",
]
needs_two = pytest.mark.skipif(SMALL is None, reason="needs 2 flagos devices with one GPU each (NCCL, RCCL)")
TRAINED_WORLDS = [w for w in (SMALL, BIG) if w]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[int, list[dict]]:
    """world -> each rank's results; the 4-rank launch first, since the 2-rank one resumes its checkpoint."""
    ckpt = tmp_path_factory.mktemp("ckpt")
    out = {}
    for world, parts in ((BIG, BIG_PARTS), (SMALL, SMALL_PARTS if BIG else ["dcp-save", *SMALL_PARTS])):
        if world:
            out[world] = launch(
                ",".join(parts),
                world,
                tmp_path_factory.mktemp(f"sharded{world}"),
                script="sharded_worker.py",
                env={"FLAGOS_DIST_CKPT": str(ckpt)},
                peer_loss=True,
            )
    return out


def part(runs: dict, world: int, name: str, ranks: range | None = None) -> list[dict]:
    """Each rank's result of one part, failing with the rank's traceback if the part raised there."""
    got = []
    for rank in ranks if ranks is not None else range(world):
        res = runs[world][rank].get(name)
        assert res is not None, f"rank {rank} of {world} has no result for {name}"
        assert "exception" not in res, f"{name} raised on rank {rank} of {world}:\n{res['exception']}"
        got.append(res)
    return got


@pytest.fixture(scope="module")
def reference() -> checks.Reference:
    return checks.Reference.train()


@pytest.mark.parametrize(
    ("world", "policy"), [(w, "fsdp-fp32") for w in TRAINED_WORLDS] + ([(SMALL, "fsdp-offload")] if SMALL else [])
)
def test_fsdp_training_equals_one_process(runs, reference, world, policy):
    """fully_shard layer by layer, forward, backward and SGD steps on each rank's share: every rank's whole
    parameters and the ranks' mean loss equal one process trained on the whole batches (float32 rounding).
    Offloaded, the shards live in pinned host memory and the optimizer steps there."""
    per_rank = part(runs, world, policy)
    torch.testing.assert_close(checks.mean_losses(per_rank), reference.losses, rtol=1e-5, atol=0)
    for rank, res in enumerate(per_rank):
        checks.fsdp_trained(rank, res, reference, policy, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("world", TRAINED_WORLDS)
def test_fsdp_bf16_mixed_precision_follows_one_process(runs, reference, world):
    """MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32) follows the float32 process within bfloat16's
    rounding: the losses within 2%, each parameter's update within 10% (sharded_checks.fsdp_bf16)."""
    per_rank = part(runs, world, "fsdp-bf16")
    torch.testing.assert_close(checks.mean_losses(per_rank), reference.losses, rtol=2e-2, atol=0)
    for rank, res in enumerate(per_rank):
        checks.fsdp_bf16(rank, res, reference)


@pytest.mark.parametrize("world", TRAINED_WORLDS)
@pytest.mark.parametrize("case", sorted(models.TP_CASES))
def test_tensor_parallel_equals_one_process(runs, world, case):
    """parallelize_module with ColwiseParallel / RowwiseParallel: the output, the whole gradients and the whole
    parameters after an SGD step equal one process's, and the weights were really sharded."""
    for rank, res in enumerate(part(runs, world, f"tp-{case}")):
        checks.tensor_parallel(rank, res, case, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(BIG is None, reason="needs 4 flagos devices with one GPU each (NCCL, RCCL)")
def test_fsdp_with_tensor_parallel_on_a_2d_mesh_equals_one_process(runs):
    """A 2 x 2 mesh: ColwiseParallel/RowwiseParallel over "tp", fully_shard over "dp", trained on each
    data-parallel rank's share: every whole parameter equals one process's."""
    for rank, res in enumerate(part(runs, BIG, "fsdp-tp-2d")):
        checks.fsdp_tp_2d(rank, res, rtol=1e-5, atol=1e-6)


@needs_two
def test_dtensor_moves_between_shard_replicate_and_partial(runs):
    """distribute_tensor and redistribute between Shard(0), Shard(1), Replicate and Partial, in float32 and
    bfloat16, with even and uneven rows: each rank's local piece and the whole tensor are exact."""
    for rank, res in enumerate(part(runs, SMALL, "dtensor")):
        checks.dtensor(rank, res, SMALL)


@needs_two
def test_checkpoint_resumes_on_another_world_size(runs):
    """An FSDP2 model and its Adam state saved by DCP on 4 ranks (2 where fewer devices), loaded on 2 into a model
    that starts elsewhere: the same parameters and moments, exactly."""
    saved = part(runs, BIG or SMALL, "dcp-save")[0]
    for rank, res in enumerate(part(runs, SMALL, "dcp-resume")):
        checks.resumed(rank, res, saved)


@needs_two
def test_a_failed_save_leaves_the_last_good_checkpoint(runs):
    """The save of step 2 fails on one rank after writing its share: every rank's save raises with the cause,
    step 2 has no metadata and refuses to load, and step 1 loads back exactly what was saved."""
    for rank, res in enumerate(part(runs, SMALL, "dcp-interrupted")):
        checks.interrupted(rank, res)


@needs_two
def test_init_device_mesh_makes_the_default_group_serve_host_and_flagos(runs):
    """init_device_mesh("flagos", ...) in a fresh process creates the default group as init_process_group() does
    under torch_fl: Gloo for host tensors (DCP's and the object collectives), flagos for flagos tensors."""
    assert runs[SMALL][0]["default_backend"].replace(" ", "") == torch_fl.distributed.default_backend()


@needs_two
def test_bad_input_is_a_clear_error(runs):
    """A mesh larger than the world and a placement past the tensor's dimensions raise at once, naming both."""
    for res in part(runs, SMALL, "errors"):
        assert "bigger than default world size 2, but found 4 ranks" in (res["mesh-larger-than-world"] or ""), res
        assert "Sharding dim 3 greater than tensor ndim 2" in (res["shard-past-the-last-dim"] or ""), res


@needs_two
def test_dead_rank_fails_fsdp_naming_the_collective(runs):
    """The last rank exits after a good step; the survivor's next forward fails within the group's 5 s timeout,
    naming FSDP2's all-gather, the rank and the library, instead of hanging. Gloo fails at once on the closed
    connection; NCCL waits out the timeout, and its watchdog may take a few seconds more to say so."""
    survivor = part(runs, SMALL, "dead-rank", ranks=range(SMALL - 1))[0]
    assert survivor["error"], "the forward with a dead peer returned normally"
    assert "all_gather_into_tensor failed on rank 0 of 2" in survivor["error"], survivor["error"]
    assert survivor["seconds"] < 15, f"the error took {survivor['seconds']:.1f} s"
    assert "dead-rank" not in runs[SMALL][SMALL - 1], "the last rank was meant to die in that part"
