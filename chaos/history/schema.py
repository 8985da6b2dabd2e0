"""The stored form of a history: one wide Arrow table, one row per event, ``null`` where a kind has no value.

The schema is written out explicitly (not derived from the dataclasses) so that a change to the model
cannot silently change the stored format; a unit test checks that the two agree.
"""

from __future__ import annotations

from typing import Final

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

from chaos.run.events import COMMON_COLUMNS, EVENT_TYPES, SCHEMA_VERSION

PARTITION_OFFSET_TYPE: Final = pa.struct(
    [
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("error", pa.string()),
    ]
)

PARTITION_STATE_TYPE: Final = pa.struct(
    [
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("leader", pa.int32()),
        pa.field("isr", pa.list_(pa.int32())),
        pa.field("replicas", pa.list_(pa.int32())),
        pa.field("error", pa.string()),
    ]
)

ARROW_SCHEMA: Final = pa.schema(
    [
        # common to every kind
        pa.field("index", pa.int64(), nullable=False),  # recorder-assigned, 0.. in record() order
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("ts", pa.float64(), nullable=False),
        pa.field("mono", pa.float64(), nullable=False),
        pa.field("process", pa.string(), nullable=False),
        # sends, deliveries, drain
        pa.field("value_id", pa.string()),
        pa.field("producer", pa.string()),
        pa.field("seq", pa.int64()),
        pa.field("key", pa.string()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("outcome", pa.string()),
        pa.field("latency_ms", pa.float64()),
        pa.field("error", pa.string()),
        pa.field("retriable", pa.bool_()),
        pa.field("fatal", pa.bool_()),
        pa.field("message", pa.string()),
        # consumer group
        pa.field("member", pa.string()),
        pa.field("group", pa.string()),
        pa.field("generation", pa.int32()),
        pa.field("action", pa.string()),
        pa.field("offsets", pa.list_(PARTITION_OFFSET_TYPE)),
        pa.field("partitions", pa.list_(PARTITION_OFFSET_TYPE)),
        # final drain, watermarks
        pa.field("isolation", pa.string()),
        pa.field("low_offset", pa.int64()),
        pa.field("high_offset", pa.int64()),
        # faults
        pa.field("fault", pa.string()),
        pa.field("target", pa.string()),
        pa.field("params", pa.string()),
        # cluster-state samples
        pa.field("controller", pa.int32()),
        pa.field("brokers", pa.list_(pa.int32())),
        pa.field("partition_states", pa.list_(PARTITION_STATE_TYPE)),
        pa.field("offline_partitions", pa.int32()),
        pa.field("under_replicated", pa.int32()),
        pa.field("group_state", pa.string()),
        pa.field("group_members", pa.list_(pa.string())),
        # client logs
        pa.field("level", pa.string()),
        pa.field("facility", pa.string()),
        # probe calls
        pa.field("operation", pa.string()),
        pa.field("duration_ms", pa.float64()),
        pa.field("timeout_ms", pa.float64()),
        pa.field("result", pa.string()),
        # transactions
        pa.field("transactional_id", pa.string()),
        pa.field("value_ids", pa.list_(pa.string())),
        # version 2: tombstones and log policies
        pa.field("tombstone", pa.bool_()),
        pa.field("cleanup_policy", pa.string()),
        pa.field("retention_ms", pa.int64()),
        pa.field("retention_bytes", pa.int64()),
        pa.field("delete_retention_ms", pa.int64()),
    ]
)
"""The wide table every reader returns (schema version :data:`SCHEMA_VERSION`)."""

COLUMNS: Final[tuple[str, ...]] = tuple(ARROW_SCHEMA.names)

COLUMN_KINDS: Final[dict[str, tuple[str, ...]]] = {
    name: (
        tuple(EVENT_TYPES)
        if name in COMMON_COLUMNS or name == "index"
        else tuple(kind for kind, cls in EVENT_TYPES.items() if name in cls._columns)
    )
    for name in COLUMNS
}
"""Column -> the kinds that may fill it (every kind for the common columns)."""

METADATA_SCHEMA_VERSION: Final = "chaos.history.schema_version"
METADATA_RUN_ID: Final = "chaos.history.run_id"
METADATA_TORN_LINES: Final = "chaos.history.torn_lines"
METADATA_SOURCE: Final = "chaos.history.source"


def empty_table() -> pa.Table:
    """A zero-row table with the history schema."""
    return ARROW_SCHEMA.empty_table()


def schema_metadata(run_id: str | None, torn_lines: int, source: str) -> dict[str, str]:
    """The key/value metadata attached to a table or Parquet file holding a history."""
    return {
        METADATA_SCHEMA_VERSION: str(SCHEMA_VERSION),
        METADATA_RUN_ID: run_id or "",
        METADATA_TORN_LINES: str(torn_lines),
        METADATA_SOURCE: source,
    }
