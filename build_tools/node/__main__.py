"""``python -m build_tools.node [--dry-run] MODE`` from the checkout's root on a CUDA node with torch and no docker
(cuda_node.sh launches it): builds torch_fl against the node's torch (or installs it from the wheel index), installs
it beside that torch and runs MODE from a copy of tests/, so that the installed package is what runs. A lent
machine hands back few files: a mode writes at most 8 to OUT and fails when one of its checks fails. Every mode
starts with smoke's checks (node.txt). ``--dry-run`` prints the commands instead.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from . import start
from .executor import Executor, Local, Recorder
from .knobs import Knobs
from .modes import MODES
from .steps import Node

WRITES = {
    "smoke": "torch_fl info, a matmul, add on each of ROUTES: node.txt",
    "full": "routing + correctness suites (SUITE_WORKERS), then the bench: pytest.txt junit.xml bench.txt bench/*",
    "bench": "the route A/B bench (BENCH_ARGS): bench.txt bench/*",
    "index": "full from the carried wheels/VARIANT/ index, pip-installed into a venv as on a cluster",
    "train": "training flagos against cuda (train_check.py), TIME_PAIRS step times: train.txt",
    "models": "the model suite against cuda and its repeat (A/A), TIME_PAIRS step times: models.txt",
    "dist": "2 GPUs: the distributed suite, then all_reduce bandwidth against plain NCCL: dist.txt",
    "fsdp": "FSDP2, DTensor, TP and DCP on a 1-rank flagos mesh against the host: fsdp.txt",
    "checks": "models beside the suites (8 workers), the exit check under load: models.txt pytest.txt exit.txt",
    "opinfo": "the op database under the native and the cpu conf side by side: opinfo-{native,cpu}.{txt,json}",
    "mixed": "fails where the emulation takes a host tensor cuda refuses: mixed.txt",
    "compile": "torch.compile flagos against cuda, lockstep sets, Inductor features (COMPILE_SUITE): compile.txt",
    "llm": "a compiled HF Llama step flagos against cuda (harness.llm, LLM_SETS): llm.txt",
    "decode": "the reduce-overhead tests, then greedy decoding (harness.decode, DECODE_SETS): decode.txt",
    "replay": "REPLAY_PARTS of replay_check.py, then verify: replay.txt replay-{seed,sweep}.json verify.txt",
    "stepops": "the eager step's ATen calls replayed on flagos and cuda (STEP_OPS_D): step_ops.txt",
    "flaggems": "record workloads, qualify flaggems within FLAGGEMS_SECONDS, workloads and models on its conf",
    "flaggems-time": "the shipped flaggems and flaggems_tuned confs against all-native on the workloads "
    "(FLAGGEMS_WORKLOADS, FLAGGEMS_ROUNDS), no qualification: flaggems.txt flaggems-first.json",
    "interop": "DLPack of a flagos tensor as a CUDA capsule, then the DLPack, queue-sharing and sparse tests",
    "graphs": "capture tests, then graphs_check.py add rng provider train (GRAPH_PAIRS, GRAPH_SETS): graphs.txt",
    "zoo": "the model zoo against cuda and cuda again (ZOO_*), then the profile diff: zoo.{txt,json,md,png} "
    "profdiff.{json,md}",
    "profdiff": "the profile diff alone, flagos against plain cuda (PROFDIFF_MODELS): zoo.txt profdiff.{json,md}",
    "routercost": "the router's host cost per call, flagos against cuda in one process (ROUTER_COST_*): "
    "router_cost.txt",
}


def node_of(mode: str, repo: Path, environ: Mapping[str, str]) -> Node:
    knobs = Knobs.read(environ)
    out = Path(knobs.OUT or ("reports/index-node" if mode == "index" else "reports/cuda-node"))
    out = (repo / out).resolve()
    return Node(mode, repo, out, knobs, knobs.PYTHON, environ=dict(environ), started=time.time())


def run(node: Node, ex: Executor) -> int:
    """The common start, then the mode; the status of the first that fails."""
    return start.begin(node, ex) or MODES[node.mode](node, ex)


def main(argv: Sequence[str], environ: Mapping[str, str]) -> int:
    modes = "\n".join(f"  {mode:9} {what}" for mode, what in WRITES.items())
    parser = argparse.ArgumentParser(
        prog="python -m build_tools.node",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"modes:\n{modes}\n\nknobs (environment variables, default):\n{Knobs.table()}",
    )
    parser.add_argument("mode", choices=sorted(MODES), metavar="MODE")
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    args = parser.parse_args(argv)
    node = node_of(args.mode, Path.cwd(), environ)
    if args.dry_run:
        recorder = Recorder(node.out)
        status = run(node, recorder)
        print("\n".join(recorder.lines))
        return status
    node.out.mkdir(parents=True, exist_ok=True)
    return run(node, Local(node.out, environ))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], os.environ))
