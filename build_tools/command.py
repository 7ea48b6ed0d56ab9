"""A command as data: what the flows plan, an executor runs and a dry run prints."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Command:
    title: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    log_name: str = ""
    kind: str = "plain"  # "build" (BuildKit plain progress is parsed) or "plain"
    cwd: str = ""  # where it runs; "" where the caller stands

    def shell(self) -> str:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        line = shlex.join(self.argv)
        line = f"{env} {line}" if env else line
        return f"cd {shlex.quote(self.cwd)} && {line}" if self.cwd else line
