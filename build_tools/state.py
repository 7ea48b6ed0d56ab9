"""What the last build of each vendor left: its input key, wheel and hash (build/state/<vendor>.json)."""

from __future__ import annotations

import json
from pathlib import Path

from . import outputs


class State:
    def __init__(self, root: Path) -> None:
        self.root = root  # build/state

    def path(self, vendor: str) -> Path:
        return self.root / f"{vendor}.json"

    def reports(self, vendor: str) -> Path:
        """Where the build's own reports (auditwheel-show.txt, build-info.json) are kept for the test reports."""
        return self.root / vendor

    def read(self, vendor: str) -> dict:
        try:
            return json.loads(self.path(vendor).read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return {}

    def write(self, vendor: str, **values: object) -> None:
        state = {**self.read(vendor), **values}
        outputs.atomic_write_text(self.path(vendor), json.dumps(state, indent=2, sort_keys=True) + "\n")
