"""Starting ranks of a worker script as separate processes (as torchrun does) and reading what they wrote.

Each rank writes ``rank<N>.json`` under the launch's folder; :func:`launch` returns those, or fails the test with
what every rank printed when one hangs or writes nothing.
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

import torch_fl

HERE = Path(__file__).parent

# Seconds a launch may take (FLAGOS_DIST_TIMEOUT_S); a rank still running after it is a hang, and each rank
# prints its Python stack shortly before (worker.py, FLAGOS_DIST_HANG_DUMP_S).
TIMEOUT_S = float(os.environ.get("FLAGOS_DIST_TIMEOUT_S", "240"))

# How a rank that lost its peer learns of it: Gloo fails the collective by itself; NCCL does when the waiting
# thread blocks on the work (instead of the watchdog tearing the process down after the timeout).
PEER_LOSS_ENV = {"TORCH_NCCL_BLOCKING_WAIT": "1", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "0"}


def _worlds() -> tuple[int, ...]:
    """2 and 4 ranks; on GPUs no more ranks than devices (NCCL gives each rank a GPU of its own)."""
    if torch_fl.accelerator() == "cpu":
        return (2, 4)
    return tuple(w for w in (2, 4) if w <= torch.flagos.device_count())


WORLDS = _worlds()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(
    scenario: str,
    world: int,
    tmp: Path,
    *,
    script: str = "worker.py",
    env: dict[str, str] | None = None,
    peer_loss: bool = False,
    every_rank_writes: bool = True,
) -> list[dict | None]:
    """Run ``script scenario tmp`` on ``world`` ranks; the ranks' results (None for a rank that wrote none)."""
    tmp.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    procs = []
    for rank in range(world):
        rank_env = dict(
            os.environ,
            RANK=str(rank),
            WORLD_SIZE=str(world),
            LOCAL_RANK=str(rank),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
            PYTHONFAULTHANDLER="1",
            FLAGOS_DIST_HANG_DUMP_S=str(max(TIMEOUT_S - 15, 5)),
            **(env or {}),
        )
        if peer_loss:
            rank_env.update(PEER_LOSS_ENV)
        procs.append(
            subprocess.Popen(
                [sys.executable, str(HERE / script), scenario, str(tmp)],
                env=rank_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
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
        pytest.fail(
            f"{scenario} on {world} ranks: rank {hung} still running after {TIMEOUT_S:.0f} s (a hang)\n"
            + "\n".join(logs)
        )
    results = []
    for rank in range(world):
        path = tmp / f"rank{rank}.json"
        results.append(json.loads(path.read_text()) if path.is_file() else None)
    if every_rank_writes:
        missing = [r for r, res in enumerate(results) if res is None]
        assert not missing, f"{scenario}: ranks {missing} wrote no result\n" + "\n".join(logs)
    return results
