"""What a rank's results of the sharded parts must be, against one process on the host: shared by the CI suite
(test_sharded.py, many ranks under emulation) and the one-GPU check (build_tools/node/fsdp_check.py). Each check
raises AssertionError with the rank and the tensor that differ."""

from __future__ import annotations

from dataclasses import dataclass

import sharded_models as models
import torch


@dataclass(frozen=True)
class Reference:
    """The transformer before and after one process trained it on the whole batches."""

    before: dict[str, torch.Tensor]
    after: dict[str, torch.Tensor]
    losses: torch.Tensor

    @classmethod
    def train(cls) -> Reference:
        model = models.transformer()
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        losses = models.train(model, 0, 1, "cpu")
        return cls(before, {n: p.detach() for n, p in model.named_parameters()}, torch.tensor(losses))


def mean_losses(per_rank: list[dict]) -> torch.Tensor:
    """The whole batch's loss per step: the mean of the ranks' losses on equal shares."""
    return torch.tensor([res["losses"] for res in per_rank]).mean(0)


def fsdp_trained(rank: int, res: dict, ref: Reference, policy: str, rtol: float, atol: float) -> None:
    """Float32 FSDP2 (offloaded or not): every whole parameter equals the reference's; the shards are where the
    policy puts them (pinned host memory when offloaded)."""
    assert res["compute_dtype"] == "torch.float32" and res["shard_dtype"] == "torch.float32", res
    want_place = ("cpu", True) if policy == "fsdp-offload" else ("flagos", False)
    assert (res["shard_device"], res["shard_pinned"]) == want_place, (rank, res["shard_device"], res["shard_pinned"])
    for name, want in ref.after.items():
        torch.testing.assert_close(
            torch.tensor(res["params"][name]),
            want,
            rtol=rtol,
            atol=atol,
            msg=lambda m, name=name: f"rank {rank} {name}: {m}",
        )


def fsdp_bf16(rank: int, res: dict, ref: Reference) -> None:
    """bf16 parameters, fp32 reduction: the layers compute in bfloat16, the shards stay float32, and each update
    is within 10% of the float32 process's (bfloat16 keeps 8 bits of mantissa: about 0.4% per operation).
    Updates are compared, not parameters, which barely move in two steps."""
    assert (res["compute_dtype"], res["shard_dtype"]) == ("torch.bfloat16", "torch.float32"), res
    for name, want in ref.after.items():
        step, want_step = torch.tensor(res["params"][name]) - ref.before[name], want - ref.before[name]
        error = float((step - want_step).norm() / want_step.norm())
        assert error < 0.1, f"rank {rank} {name}: the update is {error:.1%} off the float32 process's"


def tensor_parallel(rank: int, res: dict, case: str, rtol: float, atol: float) -> None:
    """The output, whole gradients and whole parameters after the step equal one process's; the weights of the
    plan were sharded as its styles say (Colwise: rows, Rowwise: columns)."""
    build, make_input, plan = models.TP_CASES[case]
    model = build()
    want_out = models.tp_step(model, make_input())
    torch.testing.assert_close(
        torch.tensor(res["output"]), want_out.detach(), rtol=rtol, atol=atol, msg=lambda m: f"rank {rank} output: {m}"
    )
    for name, p in model.named_parameters():
        for kind, want in (("grads", p.grad), ("params", p.detach())):
            torch.testing.assert_close(
                torch.tensor(res[kind][name]),
                want,
                rtol=rtol,
                atol=atol,
                msg=lambda m, kind=kind, name=name: f"rank {rank} {kind} {name}: {m}",
            )
    for module, style in plan:
        want_dim = 0 if style == "colwise" else 1
        assert res["placements"][f"{module}.weight"] == f"(Shard(dim={want_dim}),)", (rank, res["placements"])


def fsdp_tp_2d(rank: int, res: dict, rtol: float, atol: float) -> None:
    """FSDP2 over "dp" with TP over "tp": the MLP's whole parameters equal one process's trained on the whole
    batches, and each parameter is placed on both mesh dimensions."""
    model = models.mlp()
    models.train(model, 0, 1, "cpu", make_batch=models.mlp_batch, loss_fn=models.mlp_loss)
    for name, want in model.named_parameters():
        torch.testing.assert_close(
            torch.tensor(res["params"][name]),
            want.detach(),
            rtol=rtol,
            atol=atol,
            msg=lambda m, name=name: f"rank {rank} {name}: {m}",
        )
        assert res["placements"][name].count("(dim=") + res["placements"][name].count("Replicate") == 2, res


def dtensor(rank: int, res: dict, world: int) -> None:
    failures = {k: v for k, v in res.items() if v != "ok"}
    assert not failures, f"rank {rank}:\n" + "\n".join(f"{k}: {v}" for k, v in failures.items())
    if world > 1:  # one rank has no uneven split: 4 * 1 + 1 rows are one chunk
        assert len(res) == 2 * 2 * 6, sorted(res)


def resumed(rank: int, res: dict, saved: dict) -> None:
    """The loaded parameters and Adam moments are exactly the saved ones."""
    for kind in ("params", "moments"):
        assert sorted(res[kind]) == sorted(saved[kind]), f"rank {rank}: other {kind} than were saved"
        for name, values in res[kind].items():
            torch.testing.assert_close(
                torch.tensor(values),
                torch.tensor(saved[kind][name]),
                rtol=0,
                atol=0,
                msg=lambda m, name=name: f"rank {rank} {name}: {m}",
            )


def interrupted(rank: int, res: dict) -> None:
    """The failed save raised with its cause; step 2 has no metadata and refuses to load; step 1 loads exactly."""
    assert res["save_error"] and "injected: the disk filled up" in res["save_error"], (rank, res["save_error"])
    assert res["metadata"] == {"step1": True, "step2": False}, (rank, res["metadata"])
    assert res["step1_loaded_equal"], f"rank {rank}: step 1 loaded other values than were saved"
    # torch 2.13 names the missing file (step2/.metadata); torch 2.11 says "metadata is None"
    error = res["step2_load_error"] or ""
    assert "step2/.metadata" in error or "metadata is None" in error, (rank, error)
