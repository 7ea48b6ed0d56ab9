"""Reading BuildKit's ``--progress plain`` output: which step a line belongs to, when a step ends, and which step
failed. The runner shows progress with these; a failed build is reported by its step."""

from __future__ import annotations

import re
from collections.abc import Sequence

STEP = re.compile(r"^#(\d+) (\[[^\]]+\] .*)$")  # a step's title: "#7 [build 3/5] RUN ..."
DONE = re.compile(r"^#(\d+) (DONE [\d.]+s|CACHED|ERROR.*)$")
OUTPUT = re.compile(r"^#(\d+) [\d.]+ ")  # a line a step printed
NINJA = re.compile(r"^#\d+ [\d.]+\s+(\[\d+/\d+\] .*)$")  # the compile's own progress


def failed_step(log_lines: Sequence[str]) -> str | None:
    """The BuildKit step that failed, from ``--progress plain`` output (e.g. ``[build 3/5] RUN python ...``)."""
    titles: dict[str, str] = {}
    failed: str | None = None
    for line in log_lines:
        if m := re.match(r"^#(\d+) (\[.+)$", line):
            titles.setdefault(m.group(1), m.group(2))
        if m := re.match(r"^#(\d+) ERROR", line):
            failed = titles.get(m.group(1), failed)
    if failed is None:
        for line in reversed(log_lines):
            if m := re.search(r"failed to solve.*?(\[[^\]]+\] [^:]+)", line):
                return m.group(1).strip()
    return failed
