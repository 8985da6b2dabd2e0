"""Where the audit's inputs come from: the topic (Spark's Kafka source, or the final drain's reads) and the
history (Arrow table / Spark DataFrame).

A record's value starts with its value id (``run:producer:seq``), optionally followed by a space or ``|``
and padding; anything else is a foreign payload (``value_id`` ``None``). A tombstone (null value) carries
its value id in the ``chaos-id`` header (:data:`~chaos.run.events.VALUE_ID_HEADER`) alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Final

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

from chaos.audit.facts import ISOLATION_LEVELS, Isolation, LogRecord
from chaos.audit.sparkjob import HISTORY_COLUMNS, LOG_COLUMNS
from chaos.errors import AuditError
from chaos.history.schema import ARROW_SCHEMA
from chaos.run.events import NAME_PATTERN, VALUE_ID_HEADER, Event

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

VALUE_ID_PATTERN: Final = rf"^((?:{NAME_PATTERN}):(?:{NAME_PATTERN}):(?:0|[1-9][0-9]*))(?:[ |]|$)"
"""A value's leading value id (group 1); the same regex runs in Python and in Spark (Java regex)."""
_VALUE_ID_RE: Final = re.compile(VALUE_ID_PATTERN, re.DOTALL)

LOG_SCHEMA: Final = pa.schema(
    [
        pa.field("run_id", pa.string()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("key", pa.string()),
        pa.field("value_id", pa.string()),
        pa.field("isolation", pa.string()),
    ]
)
"""The topic-contents table (:data:`chaos.audit.sparkjob.LOG_COLUMNS`)."""


class TopicUnreadable(AuditError):
    """The topic could not be read through Spark's Kafka source; the message says what to check."""


def parse_value(value: bytes | None) -> str | None:
    """The value id a record's value starts with, or ``None`` for a foreign payload."""
    if value is None:
        return None
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return None
    match = _VALUE_ID_RE.match(text)
    return match.group(1) if match else None


def read_topic(
    spark: SparkSession,
    bootstrap_servers: str,
    topics: Sequence[str],
    run_id: str,
    isolation_levels: Sequence[Isolation] = ("read_uncommitted", "read_committed"),
) -> DataFrame:
    """The topics' real contents through Spark's Kafka source: every partition, earliest to latest, once
    per isolation level; columns :data:`LOG_COLUMNS`. ``failOnDataLoss`` stays true: a log that shrank
    under the reader must not pass as complete."""
    from pyspark.sql import functions as F

    if not topics or any(level not in ISOLATION_LEVELS for level in isolation_levels):
        raise AuditError(
            f"read_topic: need topics and isolation levels in {ISOLATION_LEVELS}; "
            f"got {list(topics)!r}, {list(isolation_levels)!r}"
        )
    frames = []
    for level in isolation_levels:
        raw = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap_servers)
            .option("subscribe", ",".join(topics))
            .option("startingOffsets", "earliest")
            .option("endingOffsets", "latest")
            .option("kafka.isolation.level", level)
            .option("failOnDataLoss", "true")
            .option("includeHeaders", "true")
            .load()
        )
        # a tombstone's (null value's) id travels in its header alone, and so does the id of a value a
        # service rewrote: the header when the value names no id
        header = F.get(F.filter("headers", lambda h: h.key == VALUE_ID_HEADER), 0).value.cast("string")
        from_value = F.coalesce(
            F.regexp_extract(F.col("value").cast("string"), VALUE_ID_PATTERN, 1), F.lit("")
        )
        from_header = F.coalesce(F.regexp_extract(header, VALUE_ID_PATTERN, 1), F.lit(""))
        value_id = F.when(from_value != "", from_value).otherwise(from_header)
        frames.append(
            raw.select(
                F.lit(run_id).alias("run_id"),
                "topic",
                "partition",
                "offset",
                F.col("key").cast("string").alias("key"),
                F.when(value_id != "", value_id).alias("value_id"),
                F.lit(level).alias("isolation"),
            )
        )
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result


def log_table(records: Iterable[LogRecord], run_id: str) -> pa.Table:
    """Topic records as an Arrow table with :data:`LOG_SCHEMA` (for ``spark.createDataFrame``)."""
    rows = [
        {
            "run_id": run_id,
            "topic": r.topic,
            "partition": r.partition,
            "offset": r.offset,
            "key": r.key,
            "value_id": r.value_id,
            "isolation": r.isolation,
        }
        for r in records
    ]
    return pa.Table.from_pylist(rows, schema=LOG_SCHEMA)


def history_table(events: Iterable[Event]) -> pa.Table:
    """Events (in record order) as the history's wide Arrow table, narrowed to the columns the job reads."""
    rows = []
    for index, event in enumerate(events):
        row = event.to_row()
        row["index"] = index
        rows.append(row)
    table = pa.Table.from_pylist(rows, schema=ARROW_SCHEMA)
    return table.select(list(HISTORY_COLUMNS))


def drain_log(history: DataFrame) -> DataFrame:
    """The topic contents as the final drain read them (``drain_read`` rows), columns :data:`LOG_COLUMNS`:
    the fallback when the topic cannot be read any more."""
    from pyspark.sql import functions as F

    return history.where(F.col("kind") == "drain_read").select(*LOG_COLUMNS)
