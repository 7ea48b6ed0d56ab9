"""What the install check runs on each node image besides the install itself."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_the_install_check_runs_the_readmes_first_use_as_written(smoke):
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## First use", 1)[1]
    block = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert smoke.FIRST_USE.strip() == block.strip()
