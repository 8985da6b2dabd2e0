"""The Spark frames several checks read, and the helpers that build and hold the audit's frames.

:func:`scanned` scans the history once for each frame several checks read (control events, acks,
deliveries); :func:`driver_query` selects the few control rows the driver decides on, and :func:`collected`
collects several such small queries in one action. :func:`materialised` makes a local checkpoint and
:func:`release` drops it; :func:`local_frame` ships a small driver-built table to the JVM. A per-value
row's ``src`` (:data:`SEND`, :data:`DELIVERY`, :data:`LOG`) is read by the value and transaction checks
alike.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from chaos.audit.facts import RESET_OPERATIONS
from chaos.audit.spark import is_connect_session

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# a per-value row's source, in the order a value's rows are sorted: send events (invokes, outcomes,
# transaction markers), deliveries, log records
SEND, DELIVERY, LOG = 0, 1, 2
# the history's few events that several parts read: one scan, kept in memory
CONTROL_KINDS: Final = ("rebalance", "fault", "drain_end", "txn", "commit", "topic_policy", "log_start")
# up to this many values that are not clean, their keys are broadcast to pick their rows out
BROADCAST_KEYS: Final = 500_000


def scanned(
    F: Any, h: DataFrame, hold: Callable[[DataFrame], DataFrame]
) -> tuple[DataFrame, DataFrame, DataFrame]:
    """``(control, acks, deliveries)``: each one scan of the history, held (``hold``) for the parts that
    read it. ``control``: the few control events, and the seeks that move a consumer."""
    kind = F.col("kind")
    seek = (kind == "probe_call") & F.col("operation").isin(*sorted(RESET_OPERATIONS))
    control = hold(h.where(kind.isin(*CONTROL_KINDS) | seek))
    acks = hold(
        h.where((kind == "send_outcome") & (F.col("outcome") == "ok")).select("run_id", "mono", "latency_ms")
    )
    delivery_columns = ("run_id", "topic", "partition", "offset", "mono", "index", "process")
    deliveries = hold(h.where(kind == "delivery").select(*delivery_columns, "member", "value_id", "ts"))
    return control, acks, deliveries


def materialised(df: DataFrame, *, eager: bool = True) -> DataFrame:
    """``df`` as a local checkpoint (its rows kept by the executors, in memory, then on disk): what reads it
    is planned over those rows. ``eager``: computed now, in a job of its own; else by the first job that
    reads it. :func:`release` drops them."""
    from pyspark import StorageLevel

    return df.localCheckpoint(eager=eager, storageLevel=StorageLevel.MEMORY_AND_DISK)


def release(df: DataFrame) -> None:
    """Drop the rows of ``df``, a local checkpoint :func:`materialised` made. A Spark Connect server drops
    them itself once the client lets go of the frame."""
    if is_connect_session(df.sparkSession):
        return
    with contextlib.suppress(Exception):  # a JVM that died must not hide why
        df._jdf.queryExecution().logical().rdd().unpersist(False)


def local_frame(spark: Any, rows: list[tuple[Any, ...]], ddl: str) -> DataFrame:
    """A small driver-built table (``rows`` of the ``ddl`` schema) shipped to the JVM as Arrow.

    ``createDataFrame`` of a Python list makes a Python RDD: each of its tasks waits for a Python worker to
    unpickle the rows, on every audit; an Arrow table is read by the JVM alone.
    """
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType, _parse_datatype_string

    schema = _parse_datatype_string(ddl)
    assert isinstance(schema, StructType)
    arrow = to_arrow_schema(schema)
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in schema.fields]
    table = pa.Table.from_arrays(
        [pa.array(list(c), type=f.type) for c, f in zip(columns, arrow, strict=True)], schema=arrow
    )
    frame: DataFrame = spark.createDataFrame(table, schema)
    return frame


def driver_query(F: Any, control: DataFrame) -> DataFrame:
    """The few control rows the driver decides on — transaction markers, topic policies, log starts and
    drain ends; the index is column ``i`` (a Row's ``index`` is the tuple method). :func:`driver_rows`
    orders them once collected."""
    return control.where(F.col("kind").isin("txn", "topic_policy", "log_start", "drain_end")).select(
        "run_id", F.col("index").alias("i"), "kind", "ts", "mono", "process", "transactional_id",
        "action", "outcome", "error", "topic", "partition", "offset", "low_offset", "cleanup_policy",
        "retention_ms", "retention_bytes", "delete_retention_ms",
    )  # fmt: skip


def driver_rows(rows: list[Any]) -> list[Any]:
    """The collected rows of :func:`driver_query`, ordered by ``(run_id, index)``."""
    return sorted(rows, key=lambda r: (r.run_id, r.i))


def collected(queries: dict[str, DataFrame]) -> dict[str, list[Any]]:
    """The rows of each of several small ``queries`` (name -> frame), in one ``collect`` of their union:
    one Spark action instead of one each. A row holds every query's columns (null where not its own)."""
    if not queries:
        return {}
    from pyspark.sql import functions as F

    union = None
    for name, query in queries.items():
        part = query.withColumn("collected_part", F.lit(name))
        union = part if union is None else union.unionByName(part, allowMissingColumns=True)
    assert union is not None
    found: dict[str, list[Any]] = {name: [] for name in queries}
    for row in union.collect():
        found[row.collected_part].append(row)
    return found


def broadcast_if_few(F: Any, df: DataFrame, rows: int) -> DataFrame:
    """``df`` (of ``rows`` rows) marked for broadcast when it has at most :data:`BROADCAST_KEYS` rows;
    a larger one is left to a shuffle join."""
    return F.broadcast(df) if rows <= BROADCAST_KEYS else df
