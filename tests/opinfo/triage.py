"""Run every OpInfo test in a forked child and record how it ended, crashes included: the input for
expected_failures.py when an accelerator, a torch line or a route conf is new.

    python tests/opinfo/triage.py --conf native --jobs 2 --out /tmp/triage-native.jsonl [--filter complex64]
    python tests/opinfo/triage.py --summarize /tmp/triage-native.jsonl /tmp/triage-cpu.jsonl

One JSON line per test: name, check, op, dtype, outcome (pass, fail, skip, crash), the last line of the error.
A fork per test costs milliseconds, where a pytest-xdist worker that dies costs a fresh interpreter; the
parent stays single-threaded (torch.set_num_threads(1)) so the children inherit no thread pool. On a GPU the
parent must not touch the device before forking: use pytest -n there (build_tools/node/cuda_node.sh opinfo).
--summarize prints the failing tests grouped by (check, outcome, message) and by conf, to write rows from.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from conftest import TORCH_TEST_ENV  # noqa: E402


def _run_shard(conf: str, shard: int, shards: int, out: str, name_filter: str, samples: int) -> None:
    fd, path = tempfile.mkstemp(prefix=f"flagos-triage-{conf}-", suffix=".conf")
    with os.fdopen(fd, "w") as f:
        f.write(f"default = {conf}\n")
    os.environ.update(FLAGOS_BACKEND_CONFIG=path, FLAGOS_OPINFO_CONF=conf, FLAGOS_OPINFO_SAMPLES=str(samples))
    os.environ.update(TORCH_TEST_ENV)
    import torch

    torch.set_num_threads(1)
    import test_opinfo

    cls = test_opinfo.TestFlagosOpsPRIVATEUSE1
    cls.setUpClass()
    names = sorted(n for n in dir(cls) if n.startswith("test_") and name_filter in n)[shard::shards]
    with open(out, "w") as log:
        for name in names:
            log.write(json.dumps(_one(cls, name, test_opinfo.TESTS.get(name))) + "\n")
            log.flush()


def _one(cls, name: str, index) -> dict:
    r, w = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:  # child: run the test, send (outcome, message) back, never return into the parent's code
        os.close(r)
        signal.alarm(300)
        result = unittest.TestResult()
        cls(name).run(result)
        problems = result.failures + result.errors
        if problems:
            lines = [line for line in problems[0][1].strip().splitlines() if "PYTORCH_" not in line]
            said = [line for line in lines if "Error" in line or "Exception" in line]
            outcome, msg = "fail", (said or lines or ["?"])[-1][:400]
        elif result.skipped:
            outcome, msg = "skip", result.skipped[0][1][:400]
        else:
            outcome, msg = "pass", ""
        os.write(w, json.dumps([outcome, msg]).encode())
        os._exit(0)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 65536):
        chunks.append(chunk)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        outcome, msg = "crash", f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
    elif chunks:
        outcome, msg = json.loads(b"".join(chunks))
    else:
        outcome, msg = "crash", f"exited {os.WEXITSTATUS(status)} without a result"
    check, op, dtype = index or (None, None, None)
    return {
        "name": name,
        "check": check,
        "op": op,
        "dtype": dtype,
        "outcome": outcome,
        "msg": msg,
        "seconds": round(time.monotonic() - start, 3),
    }


def _summarize(paths: list[str]) -> None:
    groups: dict[tuple, dict[str, set]] = defaultdict(lambda: defaultdict(set))
    for p in paths:
        for line in Path(p).read_text().splitlines():
            d = json.loads(line)
            if d["outcome"] in ("fail", "crash"):
                key = (d["check"], d["op"], d["outcome"], d["msg"][:160])
                groups[key][Path(p).stem].add(d["dtype"])
    for (check, op, outcome, msg), runs in sorted(groups.items(), key=lambda kv: (kv[0][2], kv[0][3], kv[0][0])):
        where = "; ".join(f"{run}: {','.join(sorted(dtypes))}" for run, dtypes in sorted(runs.items()))
        print(f"{outcome:5} {check:9} {op:40} [{where}] {msg}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conf", choices=("native", "cpu"), default="native")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", help="JSON lines file (the shards' files are joined into it)")
    ap.add_argument("--filter", default="", help="only tests whose name contains this")
    ap.add_argument("--samples", type=int, default=1, help="samples per (op, dtype), as --opinfo-samples")
    ap.add_argument("--shard", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--summarize", nargs="+", metavar="JSONL")
    args = ap.parse_args()
    if args.summarize:
        _summarize(args.summarize)
        return 0
    if not args.out:
        ap.error("--out is required")
    if args.shard is not None:
        _run_shard(args.conf, args.shard, args.jobs, args.out, args.filter, args.samples)
        return 0
    parts = [f"{args.out}.{k}" for k in range(args.jobs)]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--conf",
                args.conf,
                "--jobs",
                str(args.jobs),
                "--out",
                part,
                "--filter",
                args.filter,
                "--samples",
                str(args.samples),
                "--shard",
                str(k),
            ]
        )
        for k, part in enumerate(parts)
    ]
    rc = max(p.wait() for p in procs)
    with open(args.out + ".tmp", "w") as out:
        for part in parts:
            out.write(Path(part).read_text())
            os.unlink(part)
    os.replace(args.out + ".tmp", args.out)
    return rc


if __name__ == "__main__":
    sys.exit(main())
