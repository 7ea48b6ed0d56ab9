"""What the node's modes share to run their commands: a log file of OUT several commands write in turn, and the
check that a pure-Python tool the node lacks was carried."""

from __future__ import annotations

from pathlib import Path
from typing import Unpack

from ..command import Command
from .executor import Executor, How
from .steps import Node


class Logged:
    """Commands whose output goes to one file of OUT: the first writes it anew, the rest append (a shell's
    ``( ... ) | tee FILE``)."""

    def __init__(self, ex: Executor, log: str, *, noise: bool = True) -> None:
        self.ex, self.log, self.noise, self.started = ex, log, noise, False

    def run(self, cmd: Command, **how: Unpack[How]) -> int:
        rc = self.ex.run(cmd, **{"log": self.log, "append": self.started, "quiet_noise": self.noise, **how})
        self.started = True
        return rc

    def say(self, line: str) -> None:
        self.ex.note(line, self.log)
        self.started = True


def last_line(path: Path) -> str:
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines() if path.is_file() else []
    return lines[-1] if lines else ""


def needs(node: Node, ex: Executor, modules: str, why: str) -> bool:
    """Are the pure-Python tools ``modules`` importable? Else says what to carry."""
    if ex.run(node.python(f"import {modules}", "-c", f"import {modules}"), show=False) == 0:
        return True
    ex.note(why)
    return False
