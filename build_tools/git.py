"""What the tooling reads from the checkout's git: the HEAD commit and its time."""

from __future__ import annotations

import subprocess
from pathlib import Path

# 1980-01-01, the earliest time a zip entry can carry: the epoch of a checkout without git history.
ZIP_EPOCH = "315532800"


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``git -C repo ARGS``, quietly; a checkout without git (or no git at all) answers with a failure."""
    argv = ["git", "-C", str(repo), *args]
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(argv, 127, "", str(exc))


def head_commit(repo: Path) -> str:
    """HEAD of the checkout at ``repo`` (with ``-dirty`` when tracked files differ from it); "" outside git."""
    head = _git(repo, "rev-parse", "HEAD")
    if head.returncode != 0 or not head.stdout.strip():
        return ""
    dirty = _git(repo, "diff", "--quiet", "HEAD", "--").returncode == 1
    return head.stdout.strip() + ("-dirty" if dirty else "")


def source_date_epoch(repo: Path) -> str:
    """SOURCE_DATE_EPOCH of a build: the time of the checkout's HEAD commit, so that two builds of one commit from
    the same locked inputs write the same timestamps into the wheel."""
    res = _git(repo, "log", "-1", "--format=%ct")
    value = res.stdout.strip() if res.returncode == 0 else ""
    return value if value.isdigit() and int(value) > int(ZIP_EPOCH) else ZIP_EPOCH
