"""Arms that cannot share a process, timed turn by turn while all of them are alive.

A flagos training step and a plain-device one cannot run in one process (PyTorch allows one accelerator per
process once torch_fl is imported), and a GPU host's speed drifts over seconds and differs between processes by
more than the router costs. So each arm gets a process of its own, all of them start together, and the parent
then asks them in turn for a few synchronized steps: one arm runs while the others wait on a pipe. Arms timed
back to back see the same host, and the ratio of two arms is taken within each round.

This file imports nothing but the standard library, and nothing of torch_fl: a plain arm's process loads it
(worker.py, build_tools/node/compile_check.py by its path) without the torch_fl package.

Protocol (one line each, child to parent marked, anything else on stdout ignored):
  child:  LOCKSTEP-READY <json>        once set up and warmed up (the json says what the arm ran, its routes)
  parent: run <n> [<u>]                the child runs u untimed steps (default 0), then n timed ones, each
                                       synchronized, and answers
  child:  LOCKSTEP-TIMES <json list>   ms of each timed step
  parent: <request> <n>                a request the child's serve() was given (say, profile n steps)
  child:  LOCKSTEP-REPLY <json>        what it returned
  parent: quit                         (or end of input) the child returns from serve()
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from typing import IO, Any

READY = "LOCKSTEP-READY "
TIMES = "LOCKSTEP-TIMES "
REPLY = "LOCKSTEP-REPLY "


class LockstepError(RuntimeError):
    """An arm's process failed, or gave no answer in the time allowed; the message names the arm."""


# ---- child side --------------------------------------------------------------------------------------------


def pin_all_threads(cpu: int | set[int] | None) -> None:
    """Pin every thread of this process (torch starts some while it sets up) to ``cpu`` (one CPU or a set of them);
    later threads inherit."""
    if cpu is None:
        return
    cpus = {cpu} if isinstance(cpu, int) else cpu
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except (ProcessLookupError, PermissionError):  # a thread that has ended meanwhile
            pass


def serve(
    step: Callable[[], Any],
    sync: Callable[[], None],
    info: Mapping[str, Any],
    inp: IO[str] | None = None,
    out: IO[str] | None = None,
    requests: Mapping[str, Callable[[int], Any]] | None = None,
    turn_cpu: int | None = None,
) -> None:
    """Answer the parent's ``run <n> [<u>]`` requests with the ms of ``n`` steps, each synchronized, after ``u``
    untimed ones, and its other ``requests`` (name -> function of n, whose json-able result is the reply), until
    ``quit``. ``turn_cpu``: every thread runs on that CPU during a turn, and on the CPUs it had before in between
    (where the other requests, a compilation say, may use them all)."""
    inp = inp or sys.stdin
    out = out or sys.stdout
    requests = requests or {}
    out.write(READY + json.dumps(dict(info)) + "\n")
    out.flush()
    for line in inp:
        words = line.split()
        if not words or words[0] == "quit":
            return
        size = (2, 3) if words[0] == "run" else (2,)
        if words[0] not in ("run", *requests) or len(words) not in size or not all(w.isdigit() for w in words[1:]):
            known = ", ".join(["'run <n> [<untimed>]'", *(f"'{r} <n>'" for r in requests)])
            raise ValueError(f"lockstep: unknown request {line.strip()!r}; expected {known} or 'quit'")
        if words[0] != "run":
            out.write(REPLY + json.dumps(requests[words[0]](int(words[1]))) + "\n")
            out.flush()
            continue
        times = []
        free = os.sched_getaffinity(0) if turn_cpu is not None else None
        pin_all_threads(turn_cpu)
        sync()
        # The first steps after another arm had the device pay for the switch (caches, clocks, the driver's
        # queue): the parent may ask for some that are run and not timed.
        for _ in range(int(words[2]) if len(words) == 3 else 0):
            step()
        sync()
        for _ in range(int(words[1])):
            started = time.perf_counter()
            step()
            sync()
            times.append((time.perf_counter() - started) * 1e3)
        pin_all_threads(free)
        out.write(TIMES + json.dumps(times) + "\n")
        out.flush()


# ---- parent side -------------------------------------------------------------------------------------------


class _Arm:
    def __init__(self, name: str, argv: list[str], env: Mapping[str, str]) -> None:
        self.name = name
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, env=dict(env), text=False
        )
        self.pending = b""

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
        except BrokenPipeError as exc:
            raise LockstepError(self._died()) from exc

    def answer(self, mark: str, deadline: float) -> Any:
        """The json after the next line that starts with ``mark``."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while True:
            while b"\n" in self.pending:
                line, self.pending = self.pending.split(b"\n", 1)
                text = line.decode(errors="replace")
                if text.startswith(mark):
                    return json.loads(text[len(mark) :])
            left = deadline - time.monotonic()
            if left <= 0:
                raise LockstepError(f"{self.name}: no answer in the time allowed")
            readable, _, _ = select.select([fd], [], [], left)
            if not readable:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                raise LockstepError(self._died())
            self.pending += chunk

    def _died(self) -> str:
        code = self.proc.wait()
        self.stderr.seek(0)
        tail = "\n".join(self.stderr.read().splitlines()[-25:])
        return f"{self.name}: the process ended (exit {code}) without answering:\n{tail}"

    def close(self, at_once: bool = False) -> None:
        """Ask the process to quit (it finishes its turn first); ``at_once`` kills it, as after a failed group,
        where an arm may still be starting and nothing it would say is waited for."""
        if self.proc.poll() is None and not at_once:
            try:
                self.send("quit")
                self.proc.wait(timeout=30)
            except (LockstepError, subprocess.TimeoutExpired, OSError):
                pass
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()


class Group:
    """One process per arm, all alive together; ``turn`` asks one of them for steps.

    ``timeout`` bounds the whole group, start-up included: past it every request raises LockstepError.
    """

    def __init__(self, arms: Mapping[str, tuple[list[str], Mapping[str, str]]], timeout: float) -> None:
        self.deadline = time.monotonic() + timeout
        self.arms: dict[str, _Arm] = {}
        try:
            for name, (argv, env) in arms.items():
                self.arms[name] = _Arm(name, argv, env)
            self.info = {name: arm.answer(READY, self.deadline) for name, arm in self.arms.items()}
        except BaseException:
            self.close(at_once=True)
            raise

    def turn(self, name: str, steps: int, untimed: int = 0) -> list[float]:
        """The ms of ``steps`` synchronized steps of one arm, run after ``untimed`` steps that are not timed."""
        arm = self.arms[name]
        arm.send(f"run {steps} {untimed}" if untimed else f"run {steps}")
        return [float(t) for t in arm.answer(TIMES, self.deadline)]

    def ask(self, name: str, request: str, n: int) -> Any:
        """One of the requests the arm's serve() was given, with its argument; its reply."""
        arm = self.arms[name]
        arm.send(f"{request} {n}")
        return arm.answer(REPLY, self.deadline)

    def rounds(
        self, count: int, steps: int, order: Iterable[str] | None = None, untimed: int = 0
    ) -> list[dict[str, list[float]]]:
        """``count`` rounds; in each, every arm runs ``untimed`` then ``steps`` timed steps, the order rotated by one
        per round."""
        names = list(order or self.arms)
        out = []
        for r in range(count):
            k = r % len(names)
            out.append({name: self.turn(name, steps, untimed) for name in names[k:] + names[:k]})
        return out

    def close(self, at_once: bool = False) -> None:
        for arm in self.arms.values():
            arm.close(at_once)

    def __enter__(self) -> Group:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        self.close(at_once=exc_type is not None)
