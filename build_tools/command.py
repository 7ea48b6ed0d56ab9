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

    def shell(self) -> str:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        line = shlex.join(self.argv)
        return f"{env} {line}" if env else line
