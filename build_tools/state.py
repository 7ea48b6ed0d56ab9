"""What the last build of each toolchain left: its input key, wheel and hash (build/state/<toolchain>.json)."""

from __future__ import annotations

import json
from pathlib import Path

from . import outputs


class State:
    def __init__(self, root: Path) -> None:
        self.root = root  # build/state

    def path(self, name: str) -> Path:
        return self.root / f"{name}.json"

    def reports(self, name: str) -> Path:
        """Where the build's own reports (auditwheel-show.txt, build-info.json) are kept for the test reports."""
        return self.root / name

    def read(self, name: str) -> dict:
        try:
            return json.loads(self.path(name).read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return {}

    def write(self, name: str, *, replace: bool = False, **values: object) -> None:
        """Record ``values`` beside what the file holds, or, with ``replace``, instead of it (a new build's record
        keeps nothing of the last one's)."""
        state = values if replace else {**self.read(name), **values}
        outputs.atomic_write_text(self.path(name), json.dumps(state, indent=2, sort_keys=True) + "\n")
