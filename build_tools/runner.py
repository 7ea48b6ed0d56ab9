"""Run planned commands: progress while they run, the full output in a log, one clear line when they fail.

The dry run is the runner's alone: the flows run commands, ask the host questions, refuse, and make or remove
directories through it; a dry run prints what a real run would do, and a question answers ``PLANNED``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from . import buildkit, outputs
from .command import Command

HEARTBEAT_S = 20.0
T = TypeVar("T")


class UserError(RuntimeError):
    """A one-line problem with its fix."""


class StepFailed(RuntimeError):
    """A planned command exited non-zero; the message is the one line to show."""


class Planned:
    """The answer to a question in a dry run: false, so that a dry run takes the path that plans the work."""

    def __bool__(self) -> bool:
        return False


PLANNED = Planned()


@dataclass
class Result:
    returncode: int
    seconds: float
    log: Path | None
    planned: bool = False  # a dry run printed the command instead of running it


def _short(text: str, width: int = 110) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


class Runner:
    """Runs ``Command`` objects. ``dry_run`` prints them instead; ``echo`` is where lines go (nox's logger)."""

    def __init__(self, log_dir: Path, *, dry_run: bool = False, echo: Callable[[str], None] = print) -> None:
        self.log_dir = log_dir
        self.dry_run = dry_run
        self.echo = echo

    def run(self, cmd: Command, *, check: bool = True, passthrough: bool = False) -> Result:
        """Run ``cmd``. BuildKit builds show one line per step (and compile progress); ``passthrough`` shows all."""
        log, line = self.log_dir / (cmd.log_name or "command.log"), cmd.shell()
        if self.dry_run:
            self.echo(f"[dry-run] {cmd.title}")
            print(line, flush=True)
            return Result(0, 0.0, None, planned=True)
        log.parent.mkdir(parents=True, exist_ok=True)
        self.echo(f"{cmd.title}  (full log: {log})")
        self._steps: dict[str, str] = {}
        self._announced: set[str] = set()
        self._cached = 0
        start = time.monotonic()
        self._last_print = start
        tail: deque[str] = deque(maxlen=40)
        all_lines: list[str] = []
        with log.open("w", encoding="utf-8") as f:
            f.write(f"$ {line}\n")
            f.flush()
            proc = subprocess.Popen(
                list(cmd.argv),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env={**os.environ, **cmd.env},
                cwd=cmd.cwd or None,
                text=True,
                errors="replace",
                bufsize=1,
            )
            assert proc.stdout is not None
            try:
                for raw in proc.stdout:
                    line = raw.rstrip("\n")
                    f.write(raw)
                    tail.append(line)
                    if cmd.kind == "build":
                        all_lines.append(line)
                        self._progress(line, start)
                    elif passthrough:
                        print(line, flush=True)
                rc = proc.wait()
            except KeyboardInterrupt:
                proc.terminate()
                proc.wait(timeout=30)
                raise
        seconds = time.monotonic() - start
        if cmd.kind == "build" and self._cached:
            self._print(f"  {seconds:6.0f}s  {self._cached} steps reused from the build cache")
        if rc != 0 and check:
            if not passthrough:
                print("\n".join(f"  | {t}" for t in tail), flush=True)
            step = buildkit.failed_step(all_lines) if cmd.kind == "build" else None
            where = f" at step {_short(step, 140)}" if step else ""
            raise StepFailed(f"{cmd.title} failed{where} (exit {rc}); full log: {log}")
        return Result(rc, seconds, log)

    @contextmanager
    def alongside(self, cmd: Command) -> Iterator[None]:
        """Run ``cmd`` in the background while the block runs, its output to its log alone. Its failure is raised
        when the block ends; where the block fails too, the block's error is raised and this one is shown."""
        background = Runner(self.log_dir, echo=self.echo)  # its own progress state, apart from this thread's
        if self.dry_run:
            self.run(cmd)
            yield
            return
        quiet = Command(cmd.title + " (alongside)", cmd.argv, cmd.env, cmd.log_name)  # no progress lines
        failed: list[BaseException] = []

        def work() -> None:
            try:
                background.run(quiet)
            except BaseException as exc:  # handed to the caller's thread below
                failed.append(exc)

        thread = threading.Thread(target=work, name=cmd.log_name or cmd.title, daemon=True)
        thread.start()
        try:
            yield
        except BaseException:
            thread.join()
            if failed:
                self.echo(f"also failed: {failed[0]}")
            raise
        thread.join()
        if failed:
            raise failed[0]

    def ask(self, question: Callable[[], T], *, unasked: str = "") -> T | Planned:
        """The answer to ``question`` (what the last run left, what docker holds); a dry run answers ``PLANNED``
        and says ``unasked`` (what a real run needs the answer for), when given."""
        if not self.dry_run:
            return question()
        if unasked:
            self.echo(f"dry run: {unasked}")
        return PLANNED

    def refuse(self, problem: str | Exception) -> None:
        """Stop with ``problem`` (an exception, or the text of a ``UserError``); a dry run only says so and goes on."""
        if self.dry_run:
            self.echo(f"dry run: a real run would stop here: {problem}")
        elif isinstance(problem, Exception):
            raise problem
        else:
            raise UserError(problem)

    def scratch_dir(self, final: Path) -> Path:
        """A new empty directory beside ``final`` to fill and swap in (outputs.publish_dir); a dry run names one."""
        if self.dry_run:
            return final.parent / f".{final.name}{outputs.TMP_MARK}XXXX"
        outputs.sweep_temporaries(final.parent)
        return outputs.temp_dir_beside(final)

    def make_dir(self, path: Path) -> None:
        if not self.dry_run:
            path.mkdir(parents=True, exist_ok=True)

    def remove(self, path: Path) -> None:
        if not self.dry_run:
            shutil.rmtree(path, ignore_errors=True)

    @contextmanager
    def secret_file(self, name: str, text: str, shown: str) -> Iterator[Path]:
        """``text`` in a private file outside the repository (0600, removed afterwards); a dry run prints ``shown``."""
        if self.dry_run:
            self.echo(shown)
            yield Path(f"<private-tmp>/{name}")
            return
        with tempfile.TemporaryDirectory(prefix="torch-fl-secrets-") as d:  # 0700, removed with its file
            path = Path(d) / name
            path.touch(mode=0o600, exist_ok=False)
            path.write_text(text)
            yield path

    def _print(self, text: str) -> None:
        print(text, flush=True)
        self._last_print = time.monotonic()

    def _progress(self, line: str, start: float) -> None:
        """Progress of a BuildKit build: a step's title once it does work (cached steps are only counted), its
        duration when it ends, ninja's ``[n/m]`` lines, and the latest line after ``HEARTBEAT_S`` of silence."""
        now = time.monotonic()
        elapsed = now - start
        if m := buildkit.STEP.match(line):
            if "internal]" not in m.group(2):
                self._steps.setdefault(m.group(1), m.group(2))
            return
        if m := buildkit.DONE.match(line):
            step, what = m.group(1), m.group(2)
            if what == "CACHED":
                self._cached += 1
            elif step in self._steps:
                self._announce(step, elapsed)
                if not what.startswith("DONE 0."):
                    self._print(f"  {elapsed:6.0f}s    └ {what}")
            return
        m = buildkit.OUTPUT.match(line)
        if m and m.group(1) in self._steps:
            self._announce(m.group(1), elapsed)
        if m := buildkit.NINJA.match(line):
            self._print(f"  {elapsed:6.0f}s    {_short(m.group(1))}")
        elif now - self._last_print > HEARTBEAT_S and line.strip():
            self._print(f"  {elapsed:6.0f}s    … {_short(buildkit.OUTPUT.sub('', line), 100)}")

    def _announce(self, step: str, elapsed: float) -> None:
        if step not in self._announced:
            self._announced.add(step)
            self._print(f"  {elapsed:6.0f}s  {_short(self._steps[step])}")
