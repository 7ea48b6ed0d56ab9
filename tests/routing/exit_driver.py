"""Run a short backward-then-exit program many times and count the runs that did not exit cleanly.

The parent imports torch and torch_fl once; each run is a fork that trains one step on flagos and then leaves
the interpreter the ordinary way (atexit, finalisation), exactly as a short script does. ``--parallel`` runs
that many at once, which also keeps the CPUs busy. Prints one JSON line: runs, failures (exit codes) and the
first failing run's stderr. ``--no-settle`` leaves out torch_fl's exit-time settling (a control).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import torch

import torch_fl


def child(stderr_path: str) -> None:
    fd = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 2)
    x = torch.randn(16, 16, device="flagos", requires_grad=True)
    w = torch.randn(16, 16, device="flagos", requires_grad=True)
    torch.tanh(x @ w).sum().backward()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--no-settle", action="store_true")
    args = parser.parse_args()
    if args.no_settle:
        import atexit

        atexit.unregister(torch_fl._startup.settle_at_exit)
    import gc

    gc.freeze()  # the forks share the imported modules; their exit skips re-scanning them (faster, same path)
    logs = tempfile.mkdtemp(prefix="flagos-exit-")
    running: dict[int, str] = {}
    failures: list[dict[str, object]] = []
    started = 0
    while started < args.runs or running:
        while started < args.runs and len(running) < args.parallel:
            path = os.path.join(logs, f"run{started}.err")
            pid = os.fork()
            if pid == 0:
                child(path)
                return 0  # back to the interpreter's normal exit
            running[pid] = path
            started += 1
        pid, status = os.wait()
        path = running.pop(pid)
        code = os.waitstatus_to_exitcode(status)
        with open(path, errors="replace") as f:
            err = f.read()
        if code != 0 or "terminate called" in err:
            failures.append({"exit": code, "stderr": err[-2000:]})
    print(json.dumps({"runs": args.runs, "failures": len(failures), "first": failures[:1]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
