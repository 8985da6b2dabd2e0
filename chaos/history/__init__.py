"""The run's history: every operation, fault and cluster-state sample, recorded durably as it happens.

- the event model (one frozen, validated dataclass per kind) and :data:`SCHEMA_VERSION`, defined in
  :mod:`chaos.run.events` and re-exported here;
- :mod:`chaos.history.schema` — the stored wide table (:data:`ARROW_SCHEMA`);
- :class:`Recorder` — thread-safe writer: JSON Lines flushed continuously, Parquet on close;
- :func:`read_history` / :func:`to_spark` — readers. docs/history.md describes the format.
"""

from chaos.history.compact import compact_history
from chaos.history.reader import (
    LoadedHistory,
    events_from_table,
    filter_kinds,
    kind_counts,
    load_history,
    read_events,
    read_history,
    to_spark,
)
from chaos.history.recorder import Recorder, RecorderStats
from chaos.history.schema import ARROW_SCHEMA, COLUMN_KINDS
from chaos.history.segments import RunDir
from chaos.run.events import (
    EVENT_TYPES,
    SCHEMA_VERSION,
    ClientLog,
    ClusterSample,
    Commit,
    Delivery,
    DrainEnd,
    DrainRead,
    Event,
    FaultEvent,
    InvalidEvent,
    LogStart,
    PartitionOffset,
    PartitionState,
    ProbeCall,
    Rebalance,
    SendInvoke,
    SendOutcome,
    TopicPolicy,
    TxnMarker,
    json_text,
    kind_columns,
    parse_value_id,
    syslog_level,
    value_id_for,
)

__all__ = [
    "ARROW_SCHEMA",
    "COLUMN_KINDS",
    "EVENT_TYPES",
    "SCHEMA_VERSION",
    "ClientLog",
    "ClusterSample",
    "Commit",
    "Delivery",
    "DrainEnd",
    "DrainRead",
    "Event",
    "FaultEvent",
    "InvalidEvent",
    "LoadedHistory",
    "LogStart",
    "PartitionOffset",
    "PartitionState",
    "ProbeCall",
    "Rebalance",
    "Recorder",
    "RecorderStats",
    "RunDir",
    "SendInvoke",
    "SendOutcome",
    "TopicPolicy",
    "TxnMarker",
    "compact_history",
    "events_from_table",
    "filter_kinds",
    "json_text",
    "kind_columns",
    "kind_counts",
    "load_history",
    "parse_value_id",
    "read_events",
    "read_history",
    "syslog_level",
    "to_spark",
    "value_id_for",
]
