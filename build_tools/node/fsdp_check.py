"""FSDP2, DTensor, tensor parallelism and distributed checkpoints on one flagos device: the code paths one rank
exercises, on a 1-rank mesh (NCCL under flagos on a GPU node, Gloo under emulation), against one process on the
host. The parts are the distributed suite's (tests/distributed/sharded_worker.py) and so are the checks.

    python build_tools/node/fsdp_check.py         (cuda_node.sh fsdp runs it with FLAGOS_ACCELERATOR=cuda)

Prints one line per check ("ok" or "FAIL" with the reason) and the seconds each part took; exits 1 on a failure.
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile
import time
import traceback

import neighbours

neighbours.reach("distributed")
import dcp_parts  # noqa: E402
import fsdp_parts  # noqa: E402
import sharded_checks as checks  # noqa: E402
import torch  # noqa: E402
import tp_parts  # noqa: E402
import worker  # noqa: E402

import torch_fl  # noqa: E402

# A GPU computes float32 in another order than the host reference (and cuBLAS may split reductions differently):
# the DDP encoder check's bar, not the emulation's 1e-5.
RTOL, ATOL = 1e-4, 1e-5


def main() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    worker.setup_rank()
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("flagos", (1,))
    print(
        f"accelerator {torch_fl.accelerator()}, torch {torch.__version__}, mesh {mesh}, "
        f"default group {torch.distributed.get_backend_config()}"
    )
    ref = checks.Reference.train()
    failed = 0

    def run(name: str, part, verdict) -> None:
        nonlocal failed
        start = time.monotonic()
        try:
            res = part(mesh)
            seconds = time.monotonic() - start
            verdict(res)
            print(f"ok   {name} ({seconds:.2f} s)", flush=True)
        except Exception:
            failed += 1
            print(f"FAIL {name}\n{traceback.format_exc()[-2500:]}", flush=True)

    def fsdp(policy: str):
        return lambda mesh: fsdp_parts.part_fsdp(policy, mesh)

    def trained_like_ref(res: dict, rtol: float = 2e-2) -> None:
        torch.testing.assert_close(torch.tensor(res["losses"]), ref.losses, rtol=rtol, atol=0)

    run(
        "fully_shard fp32: 2 SGD steps equal one process",
        fsdp("fsdp-fp32"),
        lambda r: (trained_like_ref(r, RTOL), checks.fsdp_trained(0, r, ref, "fsdp-fp32", RTOL, ATOL)),
    )
    run(
        "fully_shard bf16 params, fp32 reduce: within bf16 rounding",
        fsdp("fsdp-bf16"),
        lambda r: (trained_like_ref(r), checks.fsdp_bf16(0, r, ref)),
    )
    run(
        "fully_shard with CPUOffloadPolicy: pinned host shards, equal one process",
        fsdp("fsdp-offload"),
        lambda r: (trained_like_ref(r, RTOL), checks.fsdp_trained(0, r, ref, "fsdp-offload", RTOL, ATOL)),
    )
    run(
        "FSDP2 over dp with TP over tp on a 1 x 1 mesh: equal one process",
        fsdp_parts.part_fsdp_tp,
        lambda r: checks.fsdp_tp_2d(0, r, RTOL, ATOL),
    )
    run("DTensor placements (Shard, Replicate, Partial)", tp_parts.part_dtensor, lambda r: checks.dtensor(0, r, 1))
    for case in sorted(checks.models.TP_CASES):
        run(
            f"parallelize_module {case}: equal one process",
            lambda mesh, case=case: tp_parts.part_tp(case, mesh),
            lambda r, case=case: checks.tensor_parallel(0, r, case, RTOL, ATOL),
        )
    with tempfile.TemporaryDirectory() as ckpt:
        os.environ["FLAGOS_DIST_CKPT"] = ckpt
        saved: dict = {}
        run("DCP save of the model and Adam state", dcp_parts.part_save, saved.update)
        run(
            "DCP load into a model that starts elsewhere: exact",
            dcp_parts.part_resume,
            lambda r: checks.resumed(0, r, saved),
        )
        run(
            "DCP: a failed save leaves the last good checkpoint",
            dcp_parts.part_interrupted,
            lambda r: checks.interrupted(0, r),
        )
    print(f"{'FAILED' if failed else 'passed'}: {failed} of the checks failed" if failed else "passed: every check")
    return 1 if failed else 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # no teardown of the group (as the distributed suite's ranks do)
