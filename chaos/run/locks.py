"""Locks between processes on one machine, and the per-session run directories they guard.

A lock is an ``fcntl.flock`` on a file beside what it guards. The kernel drops it when its holder exits, even
by kill -9, so a lock is never stale and there is nothing to clean up. Lock files are never deleted: deleting
one while another process opens it would let two processes hold the lock at once. Two :class:`FileLock`
objects on one path exclude each other in one process too (each opens the file itself).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from chaos.errors import ChaosError

_POLL_S = 0.2
MAX_CONCURRENT_DIRS = 1000
"""Upper bound on ``<test>~N`` directories tried: far above the sessions one machine runs at once."""


class LockTimeout(ChaosError):
    """Another process held a lock for longer than the caller would wait."""


class FileLock:
    """An exclusive lock on ``path`` (created if missing), held until :meth:`release` or process exit.

    While held, the file holds the holder's pid, for the messages of those who wait.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def try_acquire(self) -> bool:
        """Take the lock if it is free; ``False`` when another holder has it (raises OSError when the file
        cannot be created)."""
        if self._fd is not None:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by child processes
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        with contextlib.suppress(OSError):  # the pid is only for messages
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return True

    def acquire(self, timeout_s: float, waiting: Callable[[str], None] | None = None) -> None:
        """Wait up to ``timeout_s`` for the lock; ``waiting(holder)`` is called once if it is taken.

        Raises :class:`LockTimeout` naming the holder and the file."""
        if self.try_acquire():
            return
        holder = self.holder()
        if waiting is not None:
            waiting(holder)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            time.sleep(_POLL_S)
            if self.try_acquire():
                return
        raise LockTimeout(
            f"{self.path} is still held by {self.holder()} after {timeout_s:.0f} s\n"
            f"  fix: wait for that process to finish (or stop it), then retry"
        )

    def holder(self) -> str:
        """Who holds the lock, as far as the file says (``process <pid>``)."""
        try:
            pid = self.path.read_text(encoding="utf-8").strip()
        except OSError:
            pid = ""
        return f"process {pid}" if pid.isdigit() else "another process"

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the only descriptor drops the flock


@contextlib.contextmanager
def locked(path: Path, timeout_s: float, waiting: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold the lock on ``path`` for the block (see :meth:`FileLock.acquire`)."""
    lock = FileLock(path)
    lock.acquire(timeout_s, waiting)
    try:
        yield
    finally:
        lock.release()


class RunDirs:
    """One session's run directories under ``root`` (``<report dir>/tests``), each locked for the session.

    :meth:`claim` gives a test the directory ``<name>``, replacing the previous run's, unless another live
    session holds it: then the first free ``<name>~2``, ``<name>~3``… A directory whose lock is free belongs
    to a session that ended, and only such directories are deleted, so no session deletes or writes into
    another live session's run. Locks: ``root/.<dir>.lock``. :meth:`release` at session end.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._held: dict[str, tuple[Path, FileLock]] = {}

    def claim(self, name: str) -> Path:
        """An empty directory for a run of test ``name``, held until :meth:`release`."""
        if name in self._held:  # this session runs the test again: replace its own previous run
            path = self._held[name][0]
            shutil.rmtree(path, ignore_errors=True)
            path.mkdir(parents=True)
            return path
        for n in range(1, MAX_CONCURRENT_DIRS + 1):
            candidate = name if n == 1 else f"{name}~{n}"
            lock = FileLock(self._lock_path(candidate))
            if lock.try_acquire():
                break
        else:
            raise LockTimeout(f"{self.root}: {MAX_CONCURRENT_DIRS} sessions hold a run directory of {name}")
        path = self.root / candidate
        try:
            if path.exists():
                shutil.rmtree(path)
            path.mkdir(parents=True)
        except BaseException:
            lock.release()
            raise
        self._held[name] = (path, lock)
        self._prune(name)
        return path

    def release(self) -> None:
        """Drop every lock: the directories stay, for a later session to replace."""
        for _path, lock in self._held.values():
            lock.release()
        self._held.clear()

    def _lock_path(self, directory: str) -> Path:
        return self.root / f".{directory}.lock"

    def _prune(self, name: str) -> None:
        """Delete the ``<name>~N`` directories of sessions that ended (their lock is free)."""
        sibling = re.compile(re.escape(name) + r"~\d+")
        for path in self.root.iterdir():
            if not sibling.fullmatch(path.name) or not path.is_dir():
                continue
            lock = FileLock(self._lock_path(path.name))
            if lock.try_acquire():
                try:
                    shutil.rmtree(path, ignore_errors=True)
                finally:
                    lock.release()
