"""Where a history lives under a run directory, and the JSON Lines segment format.

Layout (``<run_dir>/history/``):

- ``events-000000.jsonl``, ``events-000001.jsonl``, … — segments written while the run is live. The first
  line of each is a header ``{"chaos_history": {"schema_version": 1, "run_id": …, "segment": n, …}}``;
  every further line is one event (:meth:`Event.to_row` plus ``index``, ``null`` fields omitted).
- ``events.parquet`` — the whole history, written on close (or by :func:`compact_history` after a crash)
  through ``events.parquet.tmp`` and an atomic rename; the segments are deleted only after that.
- ``.writer.lock`` — ``flock``-ed by the one live writer (the kernel releases it when the writer dies);
  the file itself stays after close.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from chaos.errors import HistoryError
from chaos.run.events import SCHEMA_VERSION
from chaos.run.layout import HISTORY_DIR, LOCK_NAME, PARQUET_NAME, SEGMENT_PREFIX, SEGMENT_SUFFIX
from chaos.run.locks import FileLock

HEADER_KEY: Final = "chaos_history"


@dataclass(frozen=True)
class RunDir:
    """Paths of the history files under one run directory."""

    path: Path

    @classmethod
    def of(cls, run_dir: str | os.PathLike[str] | RunDir) -> RunDir:
        """Wrap a path (or return a RunDir unchanged)."""
        return run_dir if isinstance(run_dir, RunDir) else cls(Path(run_dir))

    @property
    def history_dir(self) -> Path:
        """``<run_dir>/history``."""
        return self.path / HISTORY_DIR

    @property
    def parquet_path(self) -> Path:
        """The compacted history, present once the run closed (or was compacted)."""
        return self.history_dir / PARQUET_NAME

    @property
    def parquet_tmp_path(self) -> Path:
        """Where the Parquet file is written before its atomic rename."""
        return self.history_dir / (PARQUET_NAME + ".tmp")

    @property
    def lock_path(self) -> Path:
        """The writer's lock file."""
        return self.history_dir / LOCK_NAME

    def segment_path(self, number: int) -> Path:
        """The path of JSONL segment ``number``."""
        return self.history_dir / f"{SEGMENT_PREFIX}{number:06d}{SEGMENT_SUFFIX}"

    def segment_paths(self) -> list[Path]:
        """Existing JSONL segments, in write order."""
        if not self.history_dir.is_dir():
            return []
        return sorted(
            p
            for p in self.history_dir.iterdir()
            if p.name.startswith(SEGMENT_PREFIX) and p.name.endswith(SEGMENT_SUFFIX)
        )

    def has_history(self) -> bool:
        """True if a Parquet file or any JSONL segment exists."""
        return self.parquet_path.exists() or bool(self.segment_paths())

    def size_bytes(self) -> int:
        """Bytes on disk of the history files (Parquet and segments)."""
        paths = [*self.segment_paths(), self.parquet_path]
        return sum(p.stat().st_size for p in paths if p.exists())


class WriterLock:
    """An exclusive, non-blocking ``flock`` on ``history/.writer.lock``: one writer per run dir
    (a :class:`chaos.run.locks.FileLock`)."""

    def __init__(self, run_dir: RunDir) -> None:
        self._lock = FileLock(run_dir.lock_path)
        try:
            taken = self._lock.try_acquire()
        except OSError as exc:
            raise HistoryError(f"cannot lock {run_dir.lock_path}: {exc}") from exc
        if not taken:
            raise HistoryError(
                f"another process or recorder is writing the history under {run_dir.history_dir} "
                f"(lock {run_dir.lock_path} is held); close it first, or use another run dir"
            )

    def release(self) -> None:
        """Drop the lock (idempotent). The file stays: unlinking it could let two later writers lock two
        different inodes of the same path."""
        self._lock.release()


def header_line(run_id: str, segment: int, created_ts: float) -> bytes:
    """The first line of a segment."""
    header = {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "segment": segment,
        "pid": os.getpid(),
        "created_ts": created_ts,
    }
    return (json.dumps({HEADER_KEY: header}, separators=(",", ":")) + "\n").encode()


def parse_header(line: bytes, path: Path) -> dict[str, Any]:
    """Parse and check a segment header; raises :class:`HistoryError` on a foreign or newer file."""
    try:
        obj = json.loads(line)
        header = obj[HEADER_KEY]
        version = header["schema_version"]
    except (ValueError, KeyError, TypeError):
        raise HistoryError(
            f"{path}: first line is not a chaos history header; is this a history segment?"
        ) from None
    if not isinstance(header, dict):
        raise HistoryError(f"{path}: malformed header {obj!r}")
    if type(version) is not int or version > SCHEMA_VERSION or version < 1:
        raise HistoryError(
            f"{path}: history schema version {version!r}; this harness reads versions 1..{SCHEMA_VERSION}. "
            f"Read it with the harness version that wrote it, or upgrade."
        )
    return header


def fsync_dir(path: Path) -> None:
    """fsync a directory so a rename or a new file in it survives a power loss."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
