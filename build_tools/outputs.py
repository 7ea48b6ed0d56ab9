"""Atomic outputs: an interrupted run never leaves a half wheel or a half report directory. Each is filled under a
temporary name beside its final one, then renamed into place (a directory by two renames: old out, new in)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TMP_MARK = ".tmp-"


def _fsync(path: Path, *, strict: bool = True) -> None:
    """Flush ``path`` to disk through a read-only descriptor (a hard link may not be ours to write); a directory's
    flush is best effort (``strict=False``): not every filesystem can."""
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        if strict:
            raise


@contextmanager
def replacing(path: Path, *, mode: int | None = 0o644) -> Iterator[Path]:
    """The one atomic writer: yields a temporary path beside ``path`` for the caller to fill; on success it is
    flushed to disk and ``os.replace``d onto ``path`` (readers see the old file or the new one, never half);
    on an error it is removed. ``mode=None`` keeps the filled file's mode (a copy that keeps its metadata)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}{TMP_MARK}", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        _fsync(tmp)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync(path.parent, strict=False)


def atomic_write_text(path: Path, text: str) -> Path:
    """``text`` as UTF-8 with ``\\n`` line ends, whatever the platform."""
    with replacing(path) as tmp:
        tmp.write_bytes(text.encode("utf-8"))
    return path


def atomic_copy(src: Path, dst: Path, *, link: bool = False, keep_metadata: bool = False) -> Path:
    """Copy ``src`` to ``dst`` atomically. ``link``: a hard link where the filesystem allows one (else a copy);
    ``keep_metadata``: keep ``src``'s mode and times (staging compares them to skip unchanged files)."""
    with replacing(dst, mode=None if link or keep_metadata else 0o644) as tmp:
        tmp.unlink()
        try:
            if not link:
                raise OSError("copy")
            os.link(src, tmp)
        except OSError:
            (shutil.copy2 if link or keep_metadata else shutil.copyfile)(src, tmp)
    return dst


def temp_dir_beside(final: Path) -> Path:
    """A new empty directory next to ``final`` (same filesystem, so the swap is a rename)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{final.name}{TMP_MARK}", dir=final.parent))


def publish_dir(tmp: Path, final: Path) -> None:
    """Swap the filled ``tmp`` directory in as ``final``; the previous ``final`` is removed afterwards."""
    for d in [tmp, *(f for f in tmp.rglob("*") if f.is_dir())]:
        os.chmod(d, 0o755)
    old: Path | None = None
    if final.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{final.name}.old-", dir=final.parent))
        old.rmdir()
        os.replace(final, old)
    os.replace(tmp, final)
    _fsync(final.parent, strict=False)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def sweep_temporaries(directory: Path) -> list[Path]:
    """Remove leftovers of interrupted runs (``.<name>.tmp-*``, ``.<name>.old-*``) in ``directory``."""
    if not directory.is_dir():
        return []
    removed = [p for p in directory.iterdir() if p.name.startswith(".") and (TMP_MARK in p.name or ".old-" in p.name)]
    for p in removed:
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
    return removed


def keep_subdirs(final: Path, tmp: Path, names: list[str]) -> list[str]:
    """Copy ``final/<name>`` (another session's reports) into the ``tmp`` that replaces ``final``, unless ``tmp``
    has its own; copied, not moved, so that ``final`` stays complete until the swap. Returns the names kept."""
    kept = [name for name in names if (final / name).is_dir() and not (tmp / name).exists()]
    for name in kept:
        shutil.copytree(final / name, tmp / name)
    return kept
