"""Exclusive locks on directories (a run dir while it trains, a cached base model while it is
built), torch-free.

A lock is `flock` on a file beside the data (`<dir>/.lock`, or `<dir>.lock` for a directory that
is swapped in whole): the kernel releases it when the holding process dies, however it dies, so
a crashed run never blocks its own resume. The holder writes its PID and host name into the
file; a second process waits up to `wait_s` seconds and then raises `Locked`, a usage error
(exit 2) naming the holder.
"""
from __future__ import annotations

import errno
import fcntl
import os
import socket
import time
from pathlib import Path

from grpo_research.errors import UsageError

POLL_S = 0.2


class Locked(UsageError):
    """Another live process holds the lock."""


class DirLock:
    """`with DirLock(path, what="run dir runs/x"):` holds an exclusive lock on `path` (a lock file)."""

    def __init__(self, path: str | os.PathLike, what: str, wait_s: float = 0.0):
        self.path, self.what, self.wait_s = Path(path), what, wait_s
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        deadline = time.monotonic() + self.wait_s
        while True:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if _same_file(fd, self.path):
                    break
                os.close(fd)  # its holder removed the lock file (`remove`) while we waited: lock the new one
                continue
            except OSError as e:
                if e.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                    os.close(fd)
                    raise
                holder = _read_holder(fd)
                os.close(fd)
                if time.monotonic() >= deadline:
                    waited = f" after waiting {self.wait_s:g} s" if self.wait_s else ""
                    raise Locked(f"{self.what} is in use by {holder}{waited} (lock file {self.path}); "
                                 "wait for it to finish or stop it") from None
                time.sleep(POLL_S)
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} on host {socket.gethostname()}\n".encode())
        self._fd = fd

    def remove(self) -> None:
        """Delete the lock file while holding it, then release (a process waiting on the old file
        sees it gone and locks a new one)."""
        if self._fd is not None:
            self.path.unlink(missing_ok=True)
        self.release()

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "DirLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _same_file(fd: int, path: Path) -> bool:
    try:
        st, fst = os.stat(path), os.fstat(fd)
    except FileNotFoundError:
        return False
    return (st.st_dev, st.st_ino) == (fst.st_dev, fst.st_ino)


def _read_holder(fd: int) -> str:
    try:
        text = os.pread(fd, 200, 0).decode(errors="replace").strip()
    except OSError:
        text = ""
    return text or "another process"
