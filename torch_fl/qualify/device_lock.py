"""The device the workers of one qualification share: a check holds it shared, a timing holds it alone.

Workers check samples side by side on one device, but a time taken while other workers' kernels run measures
theirs too: with 16 workers on one H100, a 32k-element ``cos`` took 450 µs and native against native came out 2x
apart. So a worker holds the device shared while it calls an operator for a verdict, and alone while it times
one (speed.py). Two flock(2) locks on files of the run directory do it. The first is a turnstile that every
holder passes: a worker waiting to time holds it, so no new check starts and the checks already running cannot
starve the timing. A worker that dies releases its locks with its files.

A wait is reported (``on_wait("wait")`` before, ``on_wait("waited", seconds)`` after) only where the lock is
not free at once, so that the parent does not count the wait against the operator's hang timeout.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

TURNSTILE = ".device-turnstile.lock"
DEVICE = ".device.lock"

OnWait = Callable[..., None]


class DeviceLock:
    def __init__(self, directory: Path, on_wait: OnWait | None = None) -> None:
        # opened here, once per worker: flock(2) locks belong to an open file, so each worker's are its own
        self._turnstile = os.open(directory / TURNSTILE, os.O_RDWR | os.O_CREAT, 0o644)
        self._device = os.open(directory / DEVICE, os.O_RDWR | os.O_CREAT, 0o644)
        self._on_wait = on_wait or (lambda *_: None)

    def close(self) -> None:
        os.close(self._turnstile)
        os.close(self._device)

    def shared(self) -> AbstractContextManager[None]:
        """Held while the caller runs kernels beside other workers' (a check)."""
        return self._hold(fcntl.LOCK_SH)

    def alone(self) -> AbstractContextManager[None]:
        """Held while no other worker may run kernels (a timing)."""
        return self._hold(fcntl.LOCK_EX)

    @contextmanager
    def _hold(self, mode: int) -> Iterator[None]:
        self._take(self._turnstile, fcntl.LOCK_EX)
        try:
            self._take(self._device, mode)
            try:
                if mode == fcntl.LOCK_SH:  # a check lets the next holder through at once; a timing keeps the turnstile
                    fcntl.flock(self._turnstile, fcntl.LOCK_UN)
                yield
            finally:
                fcntl.flock(self._device, fcntl.LOCK_UN)
        finally:
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)  # unlocking a lock this file does not hold does nothing

    def _take(self, fd: int, mode: int) -> None:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        self._on_wait("wait")
        start = time.monotonic()
        try:
            fcntl.flock(fd, mode)
        finally:
            self._on_wait("waited", time.monotonic() - start)
