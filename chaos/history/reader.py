"""Reading a run's history back: Arrow tables, events, Spark DataFrames.

:func:`load_history` prefers ``history/events.parquet``; without it (a run that crashed before closing)
it reads the JSONL segments, skipping and counting a torn last line.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.compute as pc  # type: ignore[import-untyped,unused-ignore]
import pyarrow.json as pa_json  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

from chaos.errors import HistoryError
from chaos.history.schema import (
    ARROW_SCHEMA,
    METADATA_RUN_ID,
    METADATA_SCHEMA_VERSION,
    METADATA_TORN_LINES,
    empty_table,
    schema_metadata,
)
from chaos.history.segments import RunDir, parse_header
from chaos.run.events import COMMON_COLUMNS, SCHEMA_VERSION, Event, check_kinds, kind_columns

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_BLOCK_SIZE: Final = 16 << 20  # pyarrow.json needs every line to fit in one block
_PARSE_OPTIONS: Final = pa_json.ParseOptions(explicit_schema=ARROW_SCHEMA, unexpected_field_behavior="error")

RunDirLike = str | os.PathLike[str] | RunDir


@dataclass(frozen=True)
class SegmentRead:
    """One JSONL segment as read: its events, its header (``None`` if torn), torn lines skipped."""

    path: Path
    table: pa.Table
    header: dict[str, Any] | None
    torn_lines: int


@dataclass(frozen=True)
class LoadedHistory:
    """A history as read, with where it came from."""

    table: pa.Table
    source: Literal["parquet", "jsonl"]
    files: tuple[Path, ...]
    torn_lines: int
    run_id: str | None
    schema_version: int


def read_segment(path: Path) -> SegmentRead:
    """Read one JSONL segment. A last line without a newline is kept if it parses, else skipped and
    counted as torn; any other bad line raises :class:`HistoryError` (that is corruption, not a crash)."""
    data = path.read_bytes()
    first_newline = data.find(b"\n")
    if first_newline < 0:  # killed while writing the header: no events yet
        return SegmentRead(path, empty_table(), None, 1 if data else 0)
    header = parse_header(data[:first_newline], path)
    body = data[first_newline + 1 :]
    torn = 0
    last_newline = body.rfind(b"\n")
    tail = body[last_newline + 1 :]
    if tail.strip():
        body = body[: last_newline + 1]
        try:
            obj = json.loads(tail)
        except ValueError:
            obj = None
        if isinstance(obj, dict) and "kind" in obj:
            body += tail + b"\n"
        else:
            torn = 1
    return SegmentRead(path, _parse_body(body, path), header, torn)


def _parse_body(body: bytes, path: Path) -> pa.Table:
    if not body:
        return empty_table()
    try:
        table = pa_json.read_json(
            io.BytesIO(body),
            read_options=pa_json.ReadOptions(block_size=_BLOCK_SIZE),
            parse_options=_PARSE_OPTIONS,
        )
    except pa.ArrowInvalid as exc:
        raise HistoryError(f"{path}: {_locate_bad_line(body)} ({exc})") from exc
    return table.select(ARROW_SCHEMA.names).cast(ARROW_SCHEMA)


def _locate_bad_line(body: bytes) -> str:
    known = set(ARROW_SCHEMA.names)
    for number, line in enumerate(body.splitlines(), start=2):  # line 1 is the header
        try:
            obj = json.loads(line)
        except ValueError:
            return f"line {number} is not valid JSON: {line[:120]!r}"
        if not isinstance(obj, dict):
            return f"line {number} is not a JSON object"
        unknown = set(obj) - known
        if unknown:
            return f"line {number} has columns this schema does not know: {sorted(unknown)}"
    return "a line does not match the history schema"


def load_history(run_dir: RunDirLike) -> LoadedHistory:
    """Read a run's history: the Parquet file if present, else the JSONL segments (torn tail tolerated).

    Raises :class:`HistoryError` if there is no history, or it was written by a newer schema version.
    """
    rd = RunDir.of(run_dir)
    if rd.parquet_path.exists():
        return _load_parquet(rd.parquet_path)
    segments = rd.segment_paths()
    if not segments:
        raise HistoryError(
            f"no history under {rd.path}: expected {rd.parquet_path} or {rd.history_dir}/events-*.jsonl"
        )
    parts = [read_segment(p) for p in segments]
    run_ids = {part.header["run_id"] for part in parts if part.header is not None}
    if len(run_ids) > 1:
        raise HistoryError(f"{rd.history_dir}: segments of different runs {sorted(run_ids)}; one run per dir")
    run_id = run_ids.pop() if run_ids else None
    torn = sum(part.torn_lines for part in parts)
    table = pa.concat_tables([part.table for part in parts])
    table = table.replace_schema_metadata(schema_metadata(run_id, torn, "jsonl"))
    return LoadedHistory(table, "jsonl", tuple(segments), torn, run_id, SCHEMA_VERSION)


def _load_parquet(path: Path) -> LoadedHistory:
    meta, version = _parquet_version(path)
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise HistoryError(f"{path}: cannot read the Parquet history: {exc}") from exc
    table = _upgraded(table)
    if table.schema.remove_metadata() != ARROW_SCHEMA:
        raise HistoryError(f"{path}: columns differ from the version-{SCHEMA_VERSION} history schema")
    torn = int(meta.get(METADATA_TORN_LINES, "0") or 0)
    run_id = meta.get(METADATA_RUN_ID) or None
    table = table.replace_schema_metadata(schema_metadata(run_id, torn, "parquet"))
    return LoadedHistory(table, "parquet", (path,), torn, run_id, version)


def _upgraded(table: pa.Table) -> pa.Table:
    """An older version's table with the columns later versions added, all null (versions only add)."""
    missing = [f for f in ARROW_SCHEMA if f.name not in table.schema.names]
    if not missing:
        return table
    for f in missing:
        table = table.append_column(f, pa.nulls(table.num_rows, f.type))
    return table.select(ARROW_SCHEMA.names)


def parquet_metadata(path: Path) -> dict[str, str]:
    """The chaos key/value metadata of a Parquet history file."""
    try:
        raw = pq.read_metadata(path).metadata or {}
    except (OSError, pa.ArrowException) as exc:
        raise HistoryError(f"{path}: not a readable Parquet file: {exc}") from exc
    return {k.decode(): v.decode() for k, v in raw.items() if k.startswith(b"chaos.")}


def read_history(run_dir: RunDirLike, *, kinds: Iterable[str] | None = None) -> pa.Table:
    """The run's history as one wide Arrow table (:data:`ARROW_SCHEMA`), in record order (``index``).

    ``kinds`` keeps only those kinds (all columns kept; see :func:`filter_kinds` to narrow them).
    The table's schema metadata holds the schema version, run id, source and torn-line count.
    """
    table = load_history(run_dir).table
    return filter_kinds(table, *kinds) if kinds is not None else table


def filter_kinds(table: pa.Table, *kinds: str, narrow: bool = False) -> pa.Table:
    """Rows of the given kinds. ``narrow=True`` also drops the columns those kinds never use."""
    wanted = check_kinds(kinds)
    mask = pc.is_in(table["kind"], value_set=pa.array(wanted, pa.string()))
    result = table.filter(mask)
    if narrow:
        used = {"index", *COMMON_COLUMNS}
        for kind in wanted:
            used.update(kind_columns(kind))
        result = result.select([name for name in table.column_names if name in used])
    return result


def kind_counts(table: pa.Table) -> dict[str, int]:
    """Number of events of each kind present."""
    counts = pc.value_counts(table["kind"]).to_pylist()
    return {item["values"]: item["counts"] for item in counts}


def events_from_table(table: pa.Table) -> Iterator[Event]:
    """Rebuild the typed events of a history table, in table order (for pure-Python checkers)."""
    for batch in table.to_batches():
        for row in batch.to_pylist():
            yield Event.from_row(row)


def read_events(run_dir: RunDirLike, *, kinds: Iterable[str] | None = None) -> list[Event]:
    """The run's history as typed events (small runs and tests; use the table for large ones)."""
    return list(events_from_table(read_history(run_dir, kinds=kinds)))


def arrow_to_spark(spark: SparkSession, table: pa.Table) -> DataFrame:
    """An Arrow table as a DataFrame (through Arrow, without per-row Python objects). Its chunks are
    combined first: pyspark 4.1's ``createDataFrame`` silently drops every record batch after an empty one
    (a history whose JSONL segment is empty, a run with an empty log)."""
    return spark.createDataFrame(table.combine_chunks())


def to_spark(spark: SparkSession, run_dir: RunDirLike, *, kinds: Iterable[str] | None = None) -> DataFrame:
    """The run's history as a Spark DataFrame with the columns of :data:`ARROW_SCHEMA`.

    Reads the Parquet file with Spark directly (scales with the cluster); a history that only has JSONL
    segments is read through Arrow on the driver — run :func:`compact_history` first for big ones.
    """
    rd = RunDir.of(run_dir)
    if rd.parquet_path.exists():
        _parquet_version(rd.parquet_path)
        # absolute: a Spark Connect server or a cluster resolves a relative path against its own cwd
        df = spark.read.parquet(str(rd.parquet_path.absolute()))
        missing = [f for f in ARROW_SCHEMA if f.name not in df.columns]  # an older version's file
        if missing:
            from pyspark.sql import functions as F

            df = df.withColumns({f.name: F.lit(None).cast(_spark_type(f.type)) for f in missing}).select(
                *ARROW_SCHEMA.names
            )
    else:
        df = arrow_to_spark(spark, load_history(rd).table)
    if kinds is not None:
        df = df.where(df["kind"].isin(list(check_kinds(kinds))))
    return df


def _spark_type(arrow_type: pa.DataType) -> str:
    """The Spark SQL type name of one of the columns versions added (scalars only)."""
    names = {pa.bool_(): "boolean", pa.string(): "string", pa.int64(): "bigint", pa.int32(): "int"}
    return names[arrow_type]


def _parquet_version(path: Path) -> tuple[dict[str, str], int]:
    meta = parquet_metadata(path)
    version = meta.get(METADATA_SCHEMA_VERSION, "")
    if not version.isdigit() or not 1 <= int(version) <= SCHEMA_VERSION:
        raise HistoryError(
            f"{path}: history schema version {version!r}; this harness reads versions 1..{SCHEMA_VERSION}. "
            f"Read it with the harness version that wrote it, or upgrade."
        )
    return meta, int(version)
