"""Rolling a run's JSONL segments into one Parquet file (on close, or after a crash)."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

from chaos.errors import HistoryError
from chaos.history.reader import RunDirLike, read_segment
from chaos.history.schema import ARROW_SCHEMA, schema_metadata
from chaos.history.segments import RunDir, WriterLock, fsync_dir


def compact_history(run_dir: RunDirLike, *, keep_jsonl: bool = False) -> Path:
    """Write ``history/events.parquet`` from the JSONL segments of a run that did not close (crashed).

    Takes the writer lock, so it refuses while a recorder is still live. Idempotent: a history that is
    already compacted is returned as is. Returns the Parquet path.
    """
    rd = RunDir.of(run_dir)
    if not rd.history_dir.is_dir():
        raise HistoryError(f"no history under {rd.path}: {rd.history_dir} does not exist")
    lock = WriterLock(rd)
    try:
        return compact_locked(rd, keep_jsonl=keep_jsonl)
    finally:
        lock.release()


def compact_locked(rd: RunDir, *, keep_jsonl: bool) -> Path:
    """:func:`compact_history` for a caller that holds the writer lock.

    The Parquet file is written to a temporary name, fsynced and renamed into place; the segments are
    deleted (unless ``keep_jsonl``) only after that, so a crash at any point leaves a readable history.
    """
    segments = rd.segment_paths()
    target = rd.parquet_path
    if target.exists():  # a previous compaction finished its rename; segments may be left over
        if not keep_jsonl:
            _remove(segments)
        return target
    if not segments:
        raise HistoryError(f"no history under {rd.path}: no {target.name} and no JSONL segments")
    tmp = rd.parquet_tmp_path
    run_ids: set[str] = set()
    torn = 0
    try:
        with pq.ParquetWriter(tmp, ARROW_SCHEMA, compression="zstd") as writer:
            for segment in segments:
                part = read_segment(segment)
                torn += part.torn_lines
                if part.header is not None:
                    run_ids.add(part.header["run_id"])
                writer.write_table(part.table)
            if len(run_ids) > 1:
                raise HistoryError(f"{rd.history_dir}: segments of different runs {sorted(run_ids)}")
            run_id = next(iter(run_ids)) if run_ids else None
            writer.add_key_value_metadata(schema_metadata(run_id, torn, "parquet"))
        _fsync_file(tmp)
        os.replace(tmp, target)
        fsync_dir(rd.history_dir)
    except HistoryError:
        tmp.unlink(missing_ok=True)
        raise
    except (OSError, pa.ArrowException) as exc:
        tmp.unlink(missing_ok=True)
        raise HistoryError(f"could not write {target} (the JSONL segments are kept): {exc}") from exc
    if not keep_jsonl:
        _remove(segments)
    return target


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove(paths: list[Path]) -> None:
    for path in paths:
        path.unlink(missing_ok=True)
