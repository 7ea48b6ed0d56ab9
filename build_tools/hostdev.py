"""What a test container's ``--device`` flags and optional mounts need from the docker host (DCU and the like).

The container runs as the caller's uid, so it joins the group of every passed device node by number, which is right
whatever the image calls it (``video`` or ``render``). The host is passed in (``exists``, ``stat``, ``listdir``), so
the unit tests fake it."""

from __future__ import annotations

import os
import stat as statmod
from collections.abc import Callable, Sequence
from pathlib import Path

Exists = Callable[[str], bool]
Stat = Callable[[str], "os.stat_result | None"]
ListDir = Callable[[str], "list[str]"]


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def device_paths(flags: Sequence[str]) -> list[str]:
    """Host paths of ``--device=HOST[:CONTAINER[:PERMS]]`` (and ``--device HOST``) flags."""
    out: list[str] = []
    items = list(flags)
    for i, flag in enumerate(items):
        if flag.startswith("--device="):
            value = flag.split("=", 1)[1]
        elif flag == "--device" and i + 1 < len(items):
            value = items[i + 1]
        else:
            continue
        out.append(value.split(":", 1)[0])
    return out


def missing_devices(flags: Sequence[str], exists: Exists = os.path.exists) -> list[str]:
    return [p for p in device_paths(flags) if not exists(p)]


def device_groups(flags: Sequence[str], stat: Stat = _stat, listdir: ListDir = _listdir) -> list[int]:
    """Group ids owning the passed character devices (a directory such as /dev/dri: the nodes in it), root's 0
    excluded (root's group grants nothing here), in first-seen order."""
    gids: list[int] = []
    for path in device_paths(flags):
        if (st := stat(path)) is None:
            continue
        nodes = [st]
        if statmod.S_ISDIR(st.st_mode):
            nodes = [s for name in listdir(path) if (s := stat(str(Path(path) / name))) is not None]
        for node in nodes:
            if statmod.S_ISCHR(node.st_mode) and node.st_gid != 0 and node.st_gid not in gids:
                gids.append(node.st_gid)
    return gids


def run_flags(
    flags: Sequence[str],
    optional_mounts: Sequence[str],
    *,
    exists: Exists = os.path.exists,
    stat: Stat = _stat,
    listdir: ListDir = _listdir,
) -> list[str]:
    """The host-dependent ``docker run`` flags of a row: present optional mounts, then device groups."""
    mounts = [a for mount in optional_mounts if exists(mount.split(":", 1)[0]) for a in ("-v", mount)]
    return mounts + [f"--group-add={gid}" for gid in device_groups(flags, stat, listdir)]


def problem(session: str, missing: Sequence[str], build_session: str) -> str | None:
    """One line saying which device nodes this host lacks for ``session``; None when nothing is missing."""
    if not missing:
        return None
    return (
        f"{session} passes {', '.join(missing)} into the test container, but this docker host has no "
        f"{'such device' if len(missing) == 1 else 'such devices'}: run it on an accelerator node with the driver "
        f"loaded (`nox -s {build_session}` builds the wheel on any host)"
    )
