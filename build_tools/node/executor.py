"""Who runs a node mode's commands: ``Local`` runs them on this machine, each line of their output to the terminal
and to the mode's file under OUT; ``Recorder`` only writes down what would run (``--dry-run`` and the unit tests).
A mode is written against ``Executor`` and never knows which one it has."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol, TypedDict, Unpack

from ..command import Command

# Lines that warnings print, which the modes' files leave out
NOISE = ("UserWarning", "FutureWarning", "warnings.warn", "return func", "mask = row_mask")
TIMED_OUT = 124  # what `timeout` returns, which the reports' readers know


class How(TypedDict, total=False):
    """How a command runs: its output to the terminal (``show``, default on) and to OUT/``log`` (appended with
    ``append``), without the warnings' lines with ``quiet_noise``; past ``timeout`` seconds it is stopped (SIGINT
    first with ``interrupt``, so that pytest still prints its summary) and its status is 124."""

    log: str
    append: bool
    show: bool
    quiet_noise: bool
    timeout: float
    interrupt: bool


class Executor(Protocol):
    out: Path

    def run(self, cmd: Command, **how: Unpack[How]) -> int:
        """Run ``cmd`` as ``how`` says; its status."""
        ...

    def output(self, cmd: Command, *, append_to: Path | None = None) -> str:
        """What ``cmd`` prints on stdout (a question to the node: its torch, its wheel, a path), whatever its
        status; with ``append_to``, also appended to that file (a JSON line a later step compares)."""
        ...

    def together(self, jobs: Sequence[Callable[[], int]]) -> list[int]:
        """Run ``jobs`` at the same time; their statuses, in order."""
        ...

    def note(self, line: str, log: str = "node.txt") -> None:
        """A line for the terminal and OUT/``log``."""
        ...

    def remove(self, *paths: Path) -> None:
        """Remove files or folders an earlier call left."""
        ...

    def copy(self, src: Path, dst: Path) -> None:
        """Copy a file or a folder, where it is there."""
        ...

    def write(self, path: Path, text: str) -> None: ...


class Local:
    """Runs on this machine."""

    def __init__(self, out: Path, environ: Mapping[str, str]) -> None:
        self.out, self.environ = out, dict(environ)
        self._lock = threading.Lock()

    def _open(self, log: str, append: bool):
        return (self.out / log).open("a" if append else "w", encoding="utf-8") if log else None

    def run(self, cmd: Command, **how: Unpack[How]) -> int:
        timeout, show, quiet_noise = how.get("timeout"), how.get("show", True), how.get("quiet_noise", False)
        sink = self._open(how.get("log", ""), how.get("append", False))
        proc = subprocess.Popen(
            list(cmd.argv),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=cmd.cwd or None,
            env={**self.environ, **cmd.env},
            text=True,
            errors="replace",
        )
        timer = threading.Timer(timeout, self._stop, (proc, how.get("interrupt", False))) if timeout else None
        if timer:
            timer.start()
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                if quiet_noise and any(n in line for n in NOISE):
                    continue
                if sink:
                    sink.write(line)
                    sink.flush()
                if show:
                    with self._lock:
                        sys.stdout.write(line)
                        sys.stdout.flush()
            rc = proc.wait()
        finally:
            if timer:
                timer.cancel()
            if sink:
                sink.close()
        return TIMED_OUT if timer and getattr(proc, "timed_out", False) else rc

    @staticmethod
    def _stop(proc: subprocess.Popen, interrupt: bool) -> None:
        proc.timed_out = True  # type: ignore[attr-defined]
        proc.send_signal(signal.SIGINT if interrupt else signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()

    def output(self, cmd: Command, *, append_to: Path | None = None) -> str:
        res = subprocess.run(
            list(cmd.argv), capture_output=True, text=True, cwd=cmd.cwd or None, env={**self.environ, **cmd.env}
        )
        sys.stderr.write(res.stderr)
        if append_to:
            with append_to.open("a", encoding="utf-8") as f:
                f.write(res.stdout)
        return res.stdout.strip()

    def together(self, jobs: Sequence[Callable[[], int]]) -> list[int]:
        results = [1] * len(jobs)

        def work(i: int) -> None:
            results[i] = jobs[i]()

        threads = [threading.Thread(target=work, args=(i,)) for i in range(len(jobs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return results

    def note(self, line: str, log: str = "node.txt") -> None:
        print(line, flush=True)
        with (self.out / log).open("a", encoding="utf-8") as f:
            f.write(line + "\n")

    def remove(self, *paths: Path) -> None:
        for path in paths:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)

    def copy(self, src: Path, dst: Path) -> None:
        if not src.exists():
            return
        if src.is_dir():
            shutil.copytree(src, dst, dirs_exist_ok=True)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)

    def write(self, path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


class Recorder:
    """Writes down each command, one line each (``cd DIR && ENV ARGV > OUT/FILE``), and answers questions from
    ``answers`` (the first key found in the command's text); every command succeeds."""

    def __init__(self, out: Path, answers: Mapping[str, str] | None = None) -> None:
        self.out, self.answers = out, dict(answers or {})
        self.lines: list[str] = []

    def run(self, cmd: Command, **how: Unpack[How]) -> int:
        line = cmd.shell()
        if timeout := how.get("timeout"):
            line = f"[timeout {timeout:g}s{' INT' if how.get('interrupt') else ''}] {line}"
        if log := how.get("log"):
            line += f" {'>>' if how.get('append') else '>'} OUT/{log}"
        self.lines.append(line)
        return 0

    def output(self, cmd: Command, *, append_to: Path | None = None) -> str:
        self.lines.append(f"$( {cmd.shell()} )" + (f" >> {append_to}" if append_to else ""))
        text = cmd.shell()
        return next((answer for key, answer in self.answers.items() if key in text), "")

    def together(self, jobs: Sequence[Callable[[], int]]) -> list[int]:
        self.lines.append(f"[together: {len(jobs)} jobs]")
        return [job() for job in jobs]

    def note(self, line: str, log: str = "node.txt") -> None:
        self.lines.append(f"# {line}" + ("" if log == "node.txt" else f" >> OUT/{log}"))

    def remove(self, *paths: Path) -> None:
        self.lines.append("rm -rf " + " ".join(map(str, paths)))

    def copy(self, src: Path, dst: Path) -> None:
        self.lines.append(f"cp -r {src} {dst}")

    def write(self, path: Path, text: str) -> None:
        self.lines.append(f"write {path}: {text!r}")


def environ_with(environ: Mapping[str, str], **paths: Sequence[str | os.PathLike]) -> dict[str, str]:
    """``environ`` with each ``NAME=[path, ...]`` put first on that search path."""
    out = dict(environ)
    for name, first in paths.items():
        out[name] = os.pathsep.join([*map(str, first), *filter(None, [environ.get(name, "")])])
    return out
