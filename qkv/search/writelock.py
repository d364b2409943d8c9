"""The single-writer lock every store keeps in its index directory (DIR/.lock).

One home for it: the embedded store and the Milvus store both take it around a write session, so
a second writer gets the same ``WriterBusy`` message naming who holds the lock, and the lock dies
with its process (a ``flock``, released by the OS on kill -9). It protects writers on one machine.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path

from qkv.search.store import WriterBusy


class WriterLock:
    """An exclusive, non-blocking flock on ``root/.lock``; the holder's pid and start time are
    written into the file so a refused writer can say who holds it."""

    def __init__(self, root: Path):
        self.path = Path(root) / ".lock"
        self.fd = None

    def __enter__(self):
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                who = os.pread(self.fd, 200, 0).decode(errors="replace").strip()
            except OSError:
                who = ""
            os.close(self.fd)
            self.fd = None
            raise WriterBusy(f"another process is writing to the index at {self.path.parent} ({who or 'unknown'}); "
                             "wait for it to finish, then retry (searching works meanwhile)") from None
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, f"pid {os.getpid()} since {time.strftime('%Y-%m-%d %H:%M:%S')}".encode(), 0)
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self.fd, fcntl.LOCK_UN)
                os.close(self.fd)
            self.fd = None
        return False
