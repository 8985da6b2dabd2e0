"""The audit as a PySpark job over DataFrames; returns exactly what :func:`reference_audit` returns.

Inputs are grouped by ``run_id``, so one job audits any number of runs (the property tests audit hundreds
of generated runs in one job; a real audit has one):

- ``history``: the wide history table (:func:`chaos.history.to_spark`, or ``createDataFrame`` of the Arrow
  table) — columns of :data:`HISTORY_COLUMNS` at least;
- ``log``: the topic's real contents, columns :data:`LOG_COLUMNS` (see :mod:`chaos.audit.source`), or
  ``None`` when the topic could not be read.

How it runs — three Spark actions (and small ``collect``s: the fault events, the transaction markers and,
when a transaction has a ``begin``, one row per attempt; the group's first and last events, one row per
run; the revoke / lost callbacks), no Python UDFs:

1. **Per value** (:func:`_per_value`). First a hash aggregate per ``(run_id, value_id)`` over the
   history's value events and the log records — fixed-width counters and minima/maxima only, so Spark
   combines rows before the shuffle and never sorts — finds the **clean** values: one invoke, one ``ok``
   outcome with its position, no transaction marker, one delivery, log records only at that position.
   Their one output row comes from that summary alone, which carries their invoke's numbers and the
   hashes of its strings, looked up in a small table (:func:`_strings`, :func:`_clean_values`). Only the
   rows of the other values (none in a clean run; a count decides, so there is nothing to scan when there
   are none) take the general path, :func:`_traced`: shuffled by a hash of ``(run_id, value_id)`` and
   sorted by it (a long: the sort compares prefixes, not strings), then by source and position; two window
   passes over each value give every row its predecessor and the value's summary (first invoke and
   outcome, transaction status, deliveries, distinct log positions); each row then emits only what it
   adds — the value's counts and per-value anomaly instances (lost, unseen, duplicated, aborted reads,
   duplicate deliveries, unexpected records) on its first row, an observed position, a reorder-chain link.
   Both paths give a clean value the same single row. That table is materialised as a local checkpoint
   (below). The anomaly instances (those decided per value, the send chains', the inconsistent offsets,
   the poll checks') are materialised once too (:func:`_instances`): two parts read them.
   Transactions (docs/audit.md, "Transactions"): the attempts are paired on the driver
   (:func:`chaos.audit.facts.txn_attempts`, the reference's function); the invokes of processes that
   began one are sorted per process to find their span (:func:`_in_attempts`); the general path pairs each
   invoke with its outcome and looks its ack position up in the value's log reads; what the log shows of
   each attempt is collected (:func:`_attempt_states`, one row per attempt) and joins back before the
   statuses and aborted reads are decided (:func:`_emitted`, same sort).
2. **Per check** (:func:`_parts`). The reorder chains and each producer's acks per partition
   (``reordered`` and ``nonmonotonic_send``: one window, :func:`_send_chains`) and the observed positions
   (inconsistent offsets: a distinct and a count, both hash aggregates) each shuffle only their rows; the
   poll checks (:func:`_poll_order`) walk each consumer's deliveries of a partition and read the log only
   for the few pairs more than one offset apart; totals are summed with map-side partial aggregation;
   instances are counted and the first N kept per anomaly.
3. **Availability** (:func:`_availability`) reads the acks (scanned once and kept in memory, as are the
   history's few control events: rebalances, faults, drain ends, transaction markers): the longest gap
   between acks is found inside one-second buckets and across bucket edges (no single-task sort of every
   ack), and the nearest-rank latency percentiles through a histogram of log-scaled buckets, so only the
   distinct latencies (counted) of the buckets that hold a wanted rank are sorted. The fault windows are
   paired on the driver by :func:`chaos.history.windows.fault_windows`, the reference's rule
   (:func:`_fault_windows`). The end-to-end latencies (each value's, on its first per-value row) go through
   the same histogram.
4. **Consumer side** (:func:`_consumer`; docs/audit.md, "Consumer side") reads each send's readable record
   from the per-value rows and the deliveries (scanned once, kept in memory): one window per partition
   finds its stalls and owner changes, one aggregate per partition keeps its longest stall; the lag is
   bucketed by point (hash aggregate) with a running maximum over at most 120 points per partition. The
   group's first and last events are collected first (:func:`_group_bounds`, one row per run), so the
   series' points are laid out on the driver by :func:`chaos.audit.facts.lag_grid`; handovers are paired
   there by :func:`chaos.audit.facts.longest_handover`, with the revoke / lost callbacks (few).

Every frame that several parts read (the history's control events, acks and deliveries, the value
summary, the per-value rows, the instances, the fault windows) is a *local checkpoint*: its rows are
computed once and kept by the executors (memory, then disk), and what reads them is planned over those
rows instead of over the plan that made them — the plans Spark analyses, optimises and matches stay
small (docs/audit.md, "Local checkpoints"). They are released when the audit ends, whatever happens.

Only small per-run parts — counts, the first N examples per anomaly, availability figures, per partition
its longest stall and owner changes, the lag points — reach the driver, in one ``collect``. Jobs still
running after ``timeout_s`` (:data:`SPARK_AUDIT_TIMEOUT_S`) are cancelled and the audit raises
:class:`~chaos.errors.AuditError`.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final

from chaos.audit.facts import (
    ANOMALIES,
    DEFAULT_OPTIONS,
    PERCENTILES,
    RESET_OPERATIONS,
    AuditFacts,
    AuditOptions,
    Availability,
    ConsumeGap,
    Consumption,
    Example,
    FaultWindow,
    Handover,
    LagPoint,
    LatencyStats,
    Mark,
    PartitionRange,
    Totals,
    TxnAttempt,
    TxnMarkerRow,
    attempt_state,
    lag_grid,
    longest_handover,
    make_report,
    txn_attempts,
)
from chaos.audit.logpolicy import NO_POLICIES, REMOVAL_KINDS, LogPolicies
from chaos.audit.sizing import sized
from chaos.audit.spark import is_connect_session
from chaos.errors import AuditError
from chaos.history.windows import fault_windows
from chaos.run.events import VALUE_ID_PRODUCER

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

HISTORY_COLUMNS: Final[tuple[str, ...]] = (
    "index",
    "run_id",
    "kind",
    "ts",
    "mono",
    "process",
    "value_id",
    "producer",
    "seq",
    "key",
    "topic",
    "partition",
    "offset",
    "outcome",
    "latency_ms",
    "error",
    "action",
    "isolation",
    "low_offset",
    "high_offset",
    "fault",
    "target",
    "params",
    "transactional_id",
    "value_ids",
    "member",
    "partitions",
    "operation",
    "tombstone",
    "cleanup_policy",
    "retention_ms",
    "retention_bytes",
    "delete_retention_ms",
)
"""The history columns the job reads."""

LOG_COLUMNS: Final[tuple[str, ...]] = (
    "run_id",
    "topic",
    "partition",
    "offset",
    "key",
    "value_id",
    "isolation",
)
"""The topic-contents columns the job reads."""

_EXAMPLE_COLUMNS: Final = ("value_id", "topic", "partition", "offset", "ts")

# a per-value row's source, in the order a value's rows are sorted: send events (invokes, outcomes,
# transaction markers), deliveries, log records
_SEND, _DELIVERY, _LOG = 0, 1, 2
_VALUE_KEY: Final = ("vh", "run_id", "value_id")
_VALUE_ORDER: Final = ("src", "di", "lt", "lp", "lo", "isolation", "index")
_RC: Final = "read_committed"
_INSTANCE_TYPE: Final = (
    "array<struct<anomaly:string, value_id:string, topic:string, partition:int, offset:bigint, ts:double>>"
)
_COUNTS: Final = ("c_sent", "c_acked", "c_failed", "c_log", "c_deliveries")

# latency histogram: 64 buckets per power of two (~1.1 % wide); latencies <= 0 share the lowest bucket
_BUCKETS_PER_OCTAVE: Final = 64
_LOWEST_BUCKET: Final = -(1 << 40)
_OUTAGE_BUCKET_S: Final = 1.0
# the history's few events that several parts read: one scan, kept in memory
_CONTROL_KINDS: Final = ("rebalance", "fault", "drain_end", "txn", "commit", "topic_policy", "log_start")
# up to this many values that are not clean, their keys are broadcast to pick their rows out
_BROADCAST_KEYS: Final = 500_000
SPARK_AUDIT_TIMEOUT_S: Final = 3600.0
"""How long the audit's Spark jobs may run (10M records: about 5 min on 2 cores) before they are cancelled."""
_CANCEL_EVERY_S: Final = 1.0


def spark_audit(
    history: DataFrame,
    log: DataFrame | None,
    options: AuditOptions = DEFAULT_OPTIONS,
    *,
    timeout_s: float = SPARK_AUDIT_TIMEOUT_S,
) -> dict[str, AuditFacts]:
    """Audit every run in ``history``; returns run_id -> facts. ``log`` ``None``: topic unreadable.

    :raises AuditError: the jobs did not finish within ``timeout_s`` (they are cancelled).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    spark = history.sparkSession
    h = history.select(*HISTORY_COLUMNS)
    log_missing = log is None
    if log is None:
        log = _local_frame(
            spark,
            [],
            "run_id string, topic string, partition int, offset long, "
            "key string, value_id string, isolation string",
        )
    log = log.select(*LOG_COLUMNS)

    # materialised frames (local checkpoints: what reads them plans over their rows, not over the plan
    # that made them), released at the end whatever happens
    held: list[DataFrame] = []

    def hold(df: DataFrame) -> DataFrame:
        kept = _materialised(df)
        held.append(kept)
        return kept

    with _cancelled_after(spark, timeout_s), sized(h):
        try:
            control, acks, deliveries = _scanned(F, h, hold)
            # about one row per value; four consumers read it, each shuffling only what it needs
            driver_rows = _driver_rows(F, control)
            attempts, commits = _txn_attempts(driver_rows)
            per_value, scratch = _per_value(
                F,
                Window,
                h,
                control,
                log,
                options,
                hold,
                attempts,
                fast_path=not log_missing,
                commits=commits,
            )
            per_value = hold(per_value)  # materialised now, so what it was built from can go
            for df in scratch:
                _release(df)
            windows = hold(_fault_windows(F, control))  # small; read by three parts
            bounds, owners = _group_bounds(F, control, deliveries)
            runs = _runs(F, h)
            by_part: dict[str, list[Any]] = defaultdict(list)
            spans = any(a.begin is not None for of_run in attempts.values() for a in of_run)
            polls = _poll_order(F, Window, control, deliveries, log, per_value, options, hold, spans=spans)
            policies = _log_policies(driver_rows)
            instances = _instances(F, Window, h, per_value, polls, hold, policies, deliveries)
            parts = _parts(
                F,
                Window,
                control,
                acks,
                deliveries,
                per_value,
                windows,
                bounds,
                owners,
                runs,
                options,
                instances,
            )
            for row in parts.collect():
                by_part[row.part].append(row)
            leaves = _leaves(F, control)
        finally:
            for df in held:
                _release(df)
    return _facts(
        by_part,
        sorted(runs),
        options,
        log_missing=log_missing,
        bounds=bounds,
        owners=owners,
        leaves=leaves,
        policies=policies,
    )


def _scanned(
    F: Any, h: DataFrame, hold: Callable[[DataFrame], DataFrame]
) -> tuple[DataFrame, DataFrame, DataFrame]:
    """``(control, acks, deliveries)``: each one scan of the history, held (``hold``) for the parts that
    read it. ``control``: the few control events, and the seeks that move a consumer."""
    kind = F.col("kind")
    seek = (kind == "probe_call") & F.col("operation").isin(*sorted(RESET_OPERATIONS))
    control = hold(h.where(kind.isin(*_CONTROL_KINDS) | seek))
    acks = hold(
        h.where((kind == "send_outcome") & (F.col("outcome") == "ok")).select("run_id", "mono", "latency_ms")
    )
    delivery_columns = ("run_id", "topic", "partition", "offset", "mono", "index", "process")
    deliveries = hold(h.where(kind == "delivery").select(*delivery_columns, "member", "value_id", "ts"))
    return control, acks, deliveries


def _materialised(df: DataFrame) -> DataFrame:
    """``df`` computed now, as a local checkpoint (its rows kept by the executors, in memory, then on disk):
    what reads it is planned over those rows. :func:`_release` drops them."""
    from pyspark import StorageLevel

    return df.localCheckpoint(eager=True, storageLevel=StorageLevel.MEMORY_AND_DISK)


def _release(df: DataFrame) -> None:
    """Drop the rows of ``df``, a local checkpoint :func:`spark_audit` made. A Spark Connect server drops
    them itself once the client lets go of the frame."""
    if is_connect_session(df.sparkSession):
        return
    with contextlib.suppress(Exception):  # a JVM that died must not hide why
        df._jdf.queryExecution().logical().rdd().unpersist(False)


def _local_frame(spark: Any, rows: list[tuple[Any, ...]], ddl: str) -> DataFrame:
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


@contextlib.contextmanager
def _cancelled_after(spark: Any, timeout_s: float) -> Iterator[None]:
    """Cancel the Spark jobs this thread starts in the block once ``timeout_s`` has passed (again every
    second, for jobs started after), and turn the failure that follows into an :class:`AuditError`."""
    tag = f"chaos-audit-{uuid.uuid4().hex[:12]}"
    expired, done = threading.Event(), threading.Event()
    add, interrupt, remove = _job_tags(spark)

    def cancel() -> None:
        expired.set()
        while not done.is_set():
            try:
                interrupt(tag)
            except Exception:  # the JVM (or the server) is gone: nothing left to cancel
                return
            done.wait(_CANCEL_EVERY_S)

    timer = threading.Timer(timeout_s, cancel)
    timer.daemon = True
    add(tag)
    timer.start()
    try:
        yield
    except Exception as exc:
        if expired.is_set():
            raise AuditError(
                f"the Spark audit did not finish within {timeout_s:.0f} s; its jobs were cancelled\n"
                f"  fix: check the machine's free memory and CPU (a JVM short of heap crawls in GC), "
                f"or audit with `chaos audit --engine reference`"
            ) from exc
        raise
    finally:
        done.set()
        timer.cancel()
        with contextlib.suppress(Exception):  # a JVM that died must not hide why
            remove(tag)


def _job_tags(spark: Any) -> tuple[Callable[[str], Any], Callable[[str], Any], Callable[[str], Any]]:
    """``(add, interrupt, remove)`` of job tags for ``spark``. A Spark Connect session has only its
    session's operation tags (the server's, seen from any thread); a JVM driver's session tags are
    thread-local there — the timer's thread would find none to interrupt — so it uses the SparkContext's."""
    if is_connect_session(spark):
        return spark.addTag, spark.interruptTag, spark.removeTag
    sc = spark.sparkContext
    return sc.addJobTag, sc.cancelJobsWithTag, sc.removeJobTag


def _parts(
    F: Any,
    Window: Any,
    control: DataFrame,
    acks: DataFrame,
    deliveries: DataFrame,
    per_value: DataFrame,
    windows: DataFrame,
    bounds: dict[str, tuple[float, float]],
    owners: Owners,
    runs: dict[str, tuple[float | None, float | None]],
    options: AuditOptions,
    instances: DataFrame,
) -> DataFrame:
    """The union of every small per-run part the driver collects (column ``part`` names each);
    ``instances``: every anomaly instance (:func:`_instances`); ``bounds``, ``owners``: :func:`_group_bounds`;
    ``runs``: :func:`_runs`."""
    kind = F.col("kind")
    per_anomaly = Window.partitionBy("run_id", "anomaly")
    ordered = per_anomaly.orderBy(*(F.col(c).asc_nulls_first() for c in _EXAMPLE_COLUMNS))
    examples = (
        instances.withColumn("n", F.count(F.lit(1)).over(per_anomaly))
        .withColumn("rn", F.row_number().over(ordered))
        .where(F.col("rn") <= max(options.max_examples, 1))
    )
    producer = F.regexp_extract("value_id", VALUE_ID_PRODUCER, 1)
    by_producer = (
        instances.where(producer != "")
        .groupBy("run_id", "anomaly", producer.alias("producer"))
        .agg(F.count(F.lit(1)).alias("n"))
    )
    ranges = (
        instances.groupBy(
            "run_id", "anomaly", F.col("topic").alias("rg_topic"), F.col("partition").alias("rg_partition")
        )
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.min("offset").alias("rg_first_offset"),
            F.max("offset").alias("rg_last_offset"),
            F.min("ts").alias("rg_first_ts"),
            F.max("ts").alias("rg_last_ts"),
        )
        .withColumn("part", F.lit("range"))
    )
    removals = (
        instances.where(F.col("anomaly").isin(*REMOVAL_KINDS, "expired_unread"))
        .groupBy(
            "run_id", F.col("topic").alias("rm_topic"), F.col("partition").alias("rm_partition"), "anomaly"
        )
        .agg(F.count(F.lit(1)).alias("n"))
        .withColumn("part", F.lit("removal"))
    )
    parts = [
        examples.select(F.lit("example").alias("part"), "run_id", "anomaly", "n", "rn", *_EXAMPLE_COLUMNS),
        removals,
        by_producer.withColumn("part", F.lit("by_producer")),
        ranges,
        per_value.groupBy("run_id")
        .agg(*(F.sum(c).alias(c) for c in _COUNTS))
        .withColumn("part", F.lit("totals")),
        control.where(kind == "drain_end")
        .groupBy(
            "run_id",
            F.col("topic").alias("end_topic"),
            F.col("partition").alias("end_partition"),
            F.col("isolation").alias("end_isolation"),
        )
        .agg(F.max_by("outcome", "index").alias("end_outcome"), F.max_by("error", "index").alias("end_error"))
        .withColumn("part", F.lit("end")),
        *_availability(F, Window, acks, deliveries, per_value, windows, runs),
        *_consumer(F, Window, deliveries, per_value, bounds, owners),
    ]
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part, allowMissingColumns=True)
    return union


def _log_policies(rows: list[Any]) -> dict[str, LogPolicies]:
    """Each run's topic policies and partitions' log starts (:class:`~chaos.audit.logpolicy.LogPolicies`,
    built by the reference's function from the few rows that say them: :func:`_driver_rows`)."""
    by_run: dict[str, list[Any]] = defaultdict(list)
    for r in rows:
        by_run[r.run_id].append(r)
    return {
        run: LogPolicies.build(
            ((r.topic, r.cleanup_policy, r.retention_ms, r.retention_bytes, r.delete_retention_ms)
             for r in of_run if r.kind == "topic_policy"),
            ((r.topic, r.partition, r.offset, r.action) for r in of_run if r.kind == "log_start"),
            ((r.topic, r.partition, r.outcome, r.low_offset, r.ts) for r in of_run if r.kind == "drain_end"),
        )
        for run, of_run in by_run.items()
    }  # fmt: skip


def _removed(
    F: Any,
    instances: DataFrame,
    per_value: DataFrame,
    policies: dict[str, LogPolicies],
    deliveries: DataFrame,
) -> DataFrame:
    """``instances`` with each ``lost_acked`` one the log policy explains renamed ``expired`` or
    ``compacted`` (:mod:`chaos.audit.logpolicy`; totals, not anomalies), and an ``expired_unread``
    instance beside each expired value the group never read. Nothing changes for runs where nothing can
    have been removed. A value whose first ack names no offset (a retried batch the broker already held)
    is placed where the group first read it in that partition, as the reference does."""
    active = {run: p for run, p in policies.items() if p.active()}
    if not active:
        return instances
    spark = per_value.sparkSession
    ends = _local_frame(
        spark,
        [
            (run, topic, partition, end.log_start, end.deleted_to, p.tombstones_gone_after(topic, partition))
            for run, p in active.items()
            for (topic, partition), end in p.partitions.items()
        ],
        "run_id string, topic string, partition int, log_start long, deleted_to long, gone_after double",
    )
    rules = _local_frame(
        spark,
        [
            (run, topic, p.deletes(topic), p.compacts(topic))
            for run, p in active.items()
            for topic in p.topics
        ],
        "run_id string, topic string, deletes boolean, compacts boolean",
    )
    anomaly = F.col("anomaly")
    lost = instances.where(anomaly == "lost_acked").drop("anomaly")
    first = per_value.where(F.col("c_sent").isNotNull()).select(
        "run_id", "value_id", "key", "tombstone", "delivered"
    )
    read_at = (
        deliveries.where(F.col("value_id").isNotNull() & F.col("offset").isNotNull())
        .groupBy("run_id", "value_id", "topic", "partition")
        .agg(F.min("offset").alias("read_offset"))
    )
    lost = (
        lost.join(read_at, ["run_id", "value_id", "topic", "partition"], "left")
        .join(first, ["run_id", "value_id"], "left")
        .join(F.broadcast(ends), ["run_id", "topic", "partition"], "left")
        .join(F.broadcast(rules), ["run_id", "topic"], "left")
    )
    compacting = any(p.compacting() for p in active.values())
    if compacting:
        keyed = per_value.where(F.col("key").isNotNull())
        acked = keyed.where(F.col("sd_acked") & F.col("sd_topic").isNotNull()).select(
            "run_id",
            "value_id",
            "key",
            F.col("sd_topic").alias("topic"),
            F.col("sd_partition").alias("partition"),
            F.col("sd_offset").alias("o"),
        )
        unplaced = keyed.where(F.col("na_topic").isNotNull()).select(
            "run_id",
            "value_id",
            "key",
            F.col("na_topic").alias("topic"),
            F.col("na_partition").alias("partition"),
        )
        placed = unplaced.join(read_at, ["run_id", "value_id", "topic", "partition"]).select(
            "run_id", "value_id", "key", "topic", "partition", F.col("read_offset").alias("o")
        )
        latest = (
            acked.unionByName(placed)
            .groupBy("run_id", "topic", "partition", "key")
            .agg(F.max(F.struct(F.col("o"), F.col("value_id").alias("v"))).alias("latest"))
        )
        lost = lost.join(latest, ["run_id", "topic", "partition", "key"], "left")
    else:
        lost = lost.withColumn("latest", F.lit(None).cast("struct<o:bigint,v:string>"))
    offset = F.coalesce(F.col("offset"), F.col("read_offset"))
    no = F.lit(False)
    expired = F.coalesce(
        offset.isNotNull() & (offset < F.col("log_start"))
        & (F.coalesce(F.col("deletes"), no) | F.coalesce(offset < F.col("deleted_to"), no)),
        no,
    )  # fmt: skip
    own = F.col("latest.v") == F.col("value_id")
    compacted = F.coalesce(
        offset.isNotNull() & F.col("compacts") & F.col("key").isNotNull() & F.col("latest").isNotNull()
        & (~own | (F.col("tombstone") & (F.col("ts") <= F.col("gone_after")))),
        F.lit(False),
    )  # fmt: skip
    columns = ("run_id", "value_id", "topic", "partition", "offset", "ts")
    named = lost.select(
        F.when(expired, "expired").when(compacted, "compacted").otherwise("lost_acked").alias("anomaly"),
        *columns,
    )
    unread = lost.where(expired & ~F.coalesce(F.col("delivered"), F.lit(False))).select(
        F.lit("expired_unread").alias("anomaly"), *columns
    )
    return instances.where(anomaly != "lost_acked").unionByName(named).unionByName(unread)


def _instances(
    F: Any,
    Window: Any,
    h: DataFrame,
    per_value: DataFrame,
    polls: DataFrame,
    hold: Callable[[DataFrame], DataFrame],
    policies: dict[str, LogPolicies],
    deliveries: DataFrame,
) -> DataFrame:
    """Every anomaly instance: those decided per value (with the log policy's removals, :func:`_removed`),
    the send chains' (:func:`_send_chains`), the inconsistent offsets and ``polls`` (:func:`_poll_order`),
    held (``hold``) and materialised. Two parts read them (the examples and the counts per producer) and
    prune different columns, so Spark would not share the work between them."""
    kind = F.col("kind")
    ordered_sends = _send_chains(F, Window, per_value)
    # inconsistent offsets: a position observed holding two or more values (a foreign payload is one)
    place = ["place", "run_id", "topic", "partition", "offset"]
    observed = per_value.where(F.col("pos_topic").isNotNull()).select(
        "run_id", "value_id", F.col("pos_topic").alias("topic"), F.col("pos_partition").alias("partition"),
        F.col("pos_offset").alias("offset"),
    ).unionByName(
        h.where(kind == "drain_read").select("run_id", "value_id", "topic", "partition", "offset")
    )  # fmt: skip
    # positions holding two or more distinct values: one shuffle, hash aggregates only (a window here
    # pays per position); the few such positions then pick their smallest value id out of a second,
    # map-side pass over the observations
    observed = observed.withColumn("place", F.xxhash64(*place[1:]))
    shared = (
        observed.repartition("place")  # the distinct and the count share this shuffle
        .distinct()
        .groupBy(*place)
        .agg(F.count(F.lit(1)).alias("n"))
        .where(F.col("n") > 1)
        .drop("n")
    )
    inconsistent = (
        observed.join(F.broadcast(shared), place)
        .groupBy(*place)
        .agg(F.min("value_id").alias("value_id"))
        .select(F.lit("inconsistent_offsets").alias("anomaly"), "run_id", "value_id", *place[2:],
                F.lit(None).cast("double").alias("ts"))
    )  # fmt: skip
    per_value_instances = per_value.where(F.col("instances").isNotNull()).select(
        "run_id", F.inline("instances")
    )
    instances = (
        _removed(F, per_value_instances, per_value, policies, deliveries)
        .unionByName(ordered_sends)
        .unionByName(inconsistent)
    )
    return hold(instances.unionByName(polls))


def _send_chains(F: Any, Window: Any, per_value: DataFrame) -> DataFrame:
    """``reordered`` and ``nonmonotonic_send`` instances, from one shuffle and one sort: the reorder chains
    (per producer, key, topic and partition, the values by their first offset there: a ``seq`` below its
    predecessor's) and the acked sends (per producer, topic and partition, in invoke order: an ack offset at
    or below its predecessor's) share a window whose partition key tells them apart (``what``)."""
    chains = per_value.where(F.col("ch_topic").isNotNull()).select(
        "run_id", "value_id", "producer", F.lit(0).alias("what"), F.col("key").alias("kk"),
        F.col("ch_topic").alias("t"), F.col("ch_partition").alias("p"), F.col("ch_offset").alias("o1"),
        F.col("seq").cast("long").alias("o2"), F.col("value_id").alias("o3"),
        F.col("seq").cast("long").alias("x"), F.col("ch_offset").alias("offset"),
        F.col("send_ts").alias("ts"),
    )  # fmt: skip
    acked = per_value.where(F.col("sd_topic").isNotNull()).select(
        "run_id", "value_id", "producer", F.lit(1).alias("what"), F.lit(None).cast("string").alias("kk"),
        F.col("sd_topic").alias("t"), F.col("sd_partition").alias("p"), F.col("sd_index").alias("o1"),
        F.lit(0).cast("long").alias("o2"), F.lit("").alias("o3"),
        F.col("sd_offset").alias("x"), F.col("sd_offset").alias("offset"), F.col("sd_ts").alias("ts"),
    )  # fmt: skip
    # a link is named by two independent 64-bit hashes of its columns (xxhash64 under two seeds): the
    # window's partitions by the first, each sorted by the second, so the sort compares longs where it
    # compared four equal strings (measured at 20M rows: 22 -> 13 s), and the producer and key strings
    # stay out of the shuffle. A link's predecessor is the previous row with both hashes equal: two links
    # are merged only if both hashes collide (for a million links, odds below 1e-26)
    link = ("run_id", "producer", "what", "kk", "t", "p")
    chain = Window.partitionBy("chain").orderBy("link", "o1", "o2", "o3")
    previous = F.col("previous")
    broken = F.when(F.col("what") == 0, F.col("x") < previous).otherwise(F.col("x") <= previous)
    return (
        chains.unionByName(acked)
        .select(_link_hash(F, *link).alias("chain"), F.xxhash64(F.lit(_SECOND_SEED), *link).alias("link"),
                "run_id", "value_id", "what", "t", "p", "o1", "o2", "o3", "x", "offset", "ts")
        .withColumn("previous",
                    F.when(F.lag("link").over(chain) == F.col("link"), F.lag("x").over(chain)))
        .where(F.coalesce(broken, F.lit(False)))
        .select(F.when(F.col("what") == 0, "reordered").otherwise("nonmonotonic_send").alias("anomaly"),
                "run_id", "value_id", F.col("t").alias("topic"), F.col("p").alias("partition"), "offset",
                "ts")
    )  # fmt: skip


_SECOND_SEED = 0x5EED
"""Hashed ahead of a key's columns, it makes ``xxhash64`` a second hash independent of the first."""


def _link_hash(F: Any, *columns: Any) -> Any:
    """The first of a send chain's two hashes, which partitions the window (tests make it collide)."""
    return F.xxhash64(*columns)


def _poll_order(
    F: Any,
    Window: Any,
    control: DataFrame,
    deliveries: DataFrame,
    log: DataFrame,
    per_value: DataFrame,
    options: AuditOptions,
    hold: Callable[[DataFrame], DataFrame],
    *,
    spans: bool = True,
) -> DataFrame:
    """``poll_skip`` and ``nonmonotonic_poll`` instances (docs/audit.md, "Order checks"). ``spans``: some
    attempt has a ``begin`` (without one no delivery is rolled back, and they are not looked for).

    First each consumer's (process, member) deliveries of a partition, the rolled-back ones left out, in
    record order (one shuffle of the deliveries): a delivery whose predecessor is at or above its offset,
    with no rebalance callback or seek of its process between them, is nonmonotonic; one whose predecessor
    is more than one offset below is a candidate skip. These few rows are materialised and counted. Only if
    there are candidates, the log at the group's isolation level — of the partitions that hold one — is
    sorted with each candidate's two ends: the running count of distinct visible offsets at its ends says
    whether a visible record lies strictly between them."""
    rolled_back = per_value.where(F.col("rb_index").isNotNull()).select(
        "run_id", F.col("rb_index").alias("index")
    )
    n_rolled_back = rolled_back.count() if spans else 0
    if n_rolled_back:
        deliveries = deliveries.join(
            _broadcast_if_few(F, rolled_back, n_rolled_back), ["run_id", "index"], "left_anti"
        )
    consumer = ("run_id", "topic", "partition", "process", "member")
    walk = Window.partitionBy("wk", *consumer).orderBy("index")
    resets = (
        control.where(F.col("kind").isin("rebalance", "probe_call"))
        .groupBy("run_id", "process")
        .agg(F.collect_list("index").alias("marks"))
    )
    offset, previous = F.col("offset"), F.col("prev_offset")
    reset = F.coalesce(
        F.exists("marks", lambda m: (m > F.col("prev_index")) & (m < F.col("index"))), F.lit(False)
    )
    judged = hold(
        deliveries.withColumn("wk", F.xxhash64(*consumer))
        .select("run_id", "topic", "partition", "process", "offset", "index", "value_id", "ts",
                F.lag("offset").over(walk).alias("prev_offset"),
                F.lag("index").over(walk).alias("prev_index"))
        .where(F.col("prev_index").isNotNull() & ((offset <= previous) | (offset > previous + 1)))
        .join(F.broadcast(resets), ["run_id", "process"], "left")
        .where(~reset)
        .select("run_id", "topic", "partition", "offset", "index", "value_id", "ts", "prev_offset",
                (offset <= previous).alias("back"))
    )  # fmt: skip
    example = ("run_id", "value_id", "topic", "partition", "offset", "ts")
    back = judged.where(F.col("back")).select(F.lit("nonmonotonic_poll").alias("anomaly"), *example)
    gaps = judged.where(~F.col("back"))
    if gaps.count() == 0:
        return back
    where = ["run_id", "topic", "partition"]
    # a candidate's ends: its previous offset after the log records there (count <= a), its own before
    # them (count < b)
    ends = gaps.select(*where, F.col("index").alias("gid"), F.col("prev_offset").alias("offset"),
                       F.lit(2).alias("k")).unionByName(
        gaps.select(*where, F.col("index").alias("gid"), "offset", F.lit(0).alias("k"))
    )  # fmt: skip
    records = (
        log.where(F.col("isolation") == options.group_isolation)
        .select(*where, "offset", F.lit(1).alias("k"))
        .join(F.broadcast(gaps.select(*where).distinct()), where, "left_semi")
    )
    ordered = Window.partitionBy(*where).orderBy("offset", "k")
    before = F.last(F.when(F.col("k") == 1, offset), ignorenulls=True).over(
        ordered.rowsBetween(Window.unboundedPreceding, -1)
    )
    first_here = (F.col("k") == 1) & ~F.coalesce(before == offset, F.lit(False))  # distinct offsets
    upto = ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    counted = (
        records.unionByName(ends, allowMissingColumns=True)
        .withColumn("new", first_here.cast("long"))
        .withColumn("seen", F.sum("new").over(upto))
        .where(F.col("k") != 1)
        .groupBy("run_id", "gid")
        .agg(F.max(F.when(F.col("k") == 0, F.col("seen"))).alias("below"),
             F.max(F.when(F.col("k") == 2, F.col("seen"))).alias("upto"))
        .where(F.col("below") > F.col("upto"))
    )  # fmt: skip
    skips = gaps.join(counted.withColumnRenamed("gid", "index"), ["run_id", "index"], "left_semi").select(
        F.lit("poll_skip").alias("anomaly"), *example
    )
    return back.unionByName(skips)


def _per_value(
    F: Any,
    Window: Any,
    h: DataFrame,
    control: DataFrame,
    log: DataFrame,
    options: AuditOptions,
    hold: Callable[[DataFrame], DataFrame],
    attempts: dict[str, list[TxnAttempt]],
    *,
    fast_path: bool = True,
    commits: dict[tuple[str, int], float] | None = None,
) -> tuple[DataFrame, list[DataFrame]]:
    """Step 1 (see the module doc): the rows the per-value pass emits, about one per value.

    Columns: ``run_id``, ``value_id``; the value's counts (``c_*``, on its first row only); an observed
    position (``pos_*``); a reorder-chain link (``ch_*``, ``producer``, ``key``, ``seq``, ``send_ts``); a
    send's record becoming readable by the group (``av_*``: position, mono, index); on the value's first
    row its end-to-end latency (``e2e_mono``: when it became readable, ``e2e_ms``); on a readable row its
    value's first delivery (``fd_mono``, ``fd_index``); a send acked with an
    offset (``sd_*``: its ack position, invoke index and outcome ts); a rolled-back delivery's index
    (``rb_index``); anomaly ``instances`` decided per value (null when none).

    ``fast_path``: values whose events are those of one clean send (:func:`_clean_values`) skip the sort;
    only the rows of the others go through :func:`_traced` — none at all when every value is clean. Both
    give a clean value the same single row. Returns the rows and the frames held (through ``hold``)
    to build them, which can go once the rows are materialised.
    """
    rows = _value_rows(F, h, control, log, attempts)
    scratch: list[DataFrame] = []
    commits = commits or {}
    if not fast_path:
        return _traced(F, Window, control, rows, options, attempts, commits, hold, scratch), scratch
    strings = hold(_strings(F, h, log))
    summary = hold(_value_summary(F, rows, strings))
    scratch += [strings, summary]
    clean = _clean_values(F, summary, strings)
    other = summary.where(~F.col("clean")).select(
        F.col("run_id").alias("o_run"), F.col("value_id").alias("o_id")
    )
    n_other = other.count()
    if n_other == 0:
        return clean, scratch
    others = rows.join(
        _broadcast_if_few(F, other, n_other),
        (F.col("run_id") == F.col("o_run")) & F.col("value_id").eqNullSafe(F.col("o_id")),
        "left_semi",
    )
    traced = _traced(F, Window, control, others, options, attempts, commits, hold, scratch)
    return clean.unionByName(traced), scratch


def _driver_rows(F: Any, control: DataFrame) -> list[Any]:
    """The few control rows the driver decides on — transaction markers, topic policies, log starts and
    drain ends — in one collect, ordered by ``(run_id, index)``; the index is column ``i`` (a Row's
    ``index`` is the tuple method)."""
    return (
        control.where(F.col("kind").isin("txn", "topic_policy", "log_start", "drain_end"))
        .select(
            "run_id", F.col("index").alias("i"), "kind", "ts", "mono", "process", "transactional_id",
            "action", "outcome", "error", "topic", "partition", "offset", "low_offset", "cleanup_policy",
            "retention_ms", "retention_bytes", "delete_retention_ms",
        )
        .orderBy("run_id", "index")
        .collect()
    )  # fmt: skip


def _txn_attempts(rows: list[Any]) -> tuple[dict[str, list[TxnAttempt]], dict[tuple[str, int], float]]:
    """Each run's transaction attempts, paired on the driver by the reference's function (markers are few:
    :func:`_driver_rows`), and the mono of every end marker: ``(run_id, index) -> mono``."""
    markers = [r for r in rows if r.kind == "txn"]
    by_run: dict[str, list[TxnMarkerRow]] = defaultdict(list)
    for m in markers:
        by_run[m.run_id].append((m.i, m.process, m.transactional_id, m.action, m.outcome, m.error))
    monos = {(m.run_id, m.i): m.mono for m in markers if m.action != "begin"}
    return {run: txn_attempts(of_run) for run, of_run in by_run.items()}, monos


def _value_rows(
    F: Any,
    h: DataFrame,
    control: DataFrame,
    log: DataFrame,
    attempts: dict[str, list[TxnAttempt]] | None = None,
) -> DataFrame:
    """Every row that belongs to a value: send events, transaction markers (one per value they name),
    deliveries and log records; ``src`` says which, ``di``/``lt``/``lp``/``lo`` hold a delivery's or log
    record's index and position. ``att``: the attempt an invoke or a delivery was made in (its process's
    span), a marker's own (its index); ``covered``: a log record read at read_uncommitted whose partition's
    read_committed drain completed past it."""
    kind = F.col("kind")
    delivery = kind == "delivery"
    sends_and_deliveries = h.where(
        kind.isin("send_invoke", "send_outcome") & F.col("value_id").isNotNull() | delivery
    ).select(
        "run_id", "value_id",
        F.when(delivery, _DELIVERY).otherwise(_SEND).alias("src"),
        F.when(delivery, F.col("index")).alias("di"),
        F.when(delivery, F.col("topic")).alias("lt"),
        F.when(delivery, F.col("partition")).alias("lp"),
        F.when(delivery, F.col("offset")).alias("lo"),
        "ts",
        "mono",
        "process",  # dropped once the invokes and deliveries have their attempts
        # a delivery's own fields are in di/lt/lp/lo: do not shuffle them twice
        *(F.when(~delivery, F.col(c)).alias(c) for c in (
            "kind", "index", "producer", "seq", "key", "topic", "partition", "offset", "outcome",
            "tombstone")),
    )  # fmt: skip
    sends_and_deliveries = _in_attempts(F, h.sparkSession, sends_and_deliveries, attempts or {})
    txn_markers = control.where((kind == "txn") & (F.col("action") != "begin")).select(
        "run_id", F.explode(F.array_distinct("value_ids")).alias("value_id"), F.lit(_SEND).alias("src"),
        "kind", "index", "outcome", "action", F.col("index").alias("att"),
    )  # fmt: skip
    last_rc_drain = (
        control.where((kind == "drain_end") & (F.col("isolation") == _RC))
        .groupBy("run_id", F.col("topic").alias("lt"), F.col("partition").alias("lp"))
        .agg(F.max_by(F.struct("outcome", "low_offset", "high_offset"), "index").alias("drain"))
    )
    drain = F.col("drain")
    log_records = log.select(
        "run_id", "value_id", F.lit(_LOG).alias("src"), F.col("topic").alias("lt"),
        F.col("partition").alias("lp"), F.col("offset").alias("lo"), "isolation",
    ).join(F.broadcast(last_rc_drain), ["run_id", "lt", "lp"], "left").select(
        "*",
        F.coalesce(
            (F.col("isolation") != _RC) & (drain.outcome == "ok") & (drain.low_offset <= F.col("lo"))
            & (F.col("lo") < drain.high_offset),
            F.lit(False),
        ).alias("covered"),
    ).drop("drain")  # fmt: skip
    return (
        sends_and_deliveries.drop("process")
        .unionByName(txn_markers, allowMissingColumns=True)
        .unionByName(log_records, allowMissingColumns=True)
    )


def _in_attempts(F: Any, spark: Any, rows: DataFrame, attempts: dict[str, list[TxnAttempt]]) -> DataFrame:
    """``rows`` with ``att``: for a ``send_invoke`` or a delivery the attempt whose span holds it (the latest
    ``begin`` of its process before it, if the row comes before that attempt's ``close``), else null. Only
    the invokes and deliveries of processes that began a transaction are sorted, per process."""
    spans = [
        (run, a.process, a.begin, a.close, a.att)
        for run, of_run in attempts.items()
        for a in of_run
        if a.begin is not None
    ]
    if not spans:
        return rows.withColumn("att", F.lit(None).cast("long"))
    from pyspark.sql import Window

    begins = _local_frame(spark, spans, "run_id string, process string, index long, close long, att long")
    processes = F.broadcast(begins.select("run_id", "process").distinct().withColumn("tp", F.lit(True)))
    flagged = rows.join(processes, ["run_id", "process"], "left")
    candidate = ((F.col("kind") == "send_invoke") | (F.col("src") == _DELIVERY)) & F.col("tp")
    at = F.coalesce(F.col("index"), F.col("di"))  # a delivery's index is in di
    plain = (
        flagged.where(~F.coalesce(candidate, F.lit(False)))
        .drop("tp")
        .withColumn("att", F.lit(None).cast("long"))
    )
    span = F.struct(F.col("close"), F.col("att"))
    ordered = Window.partitionBy("run_id", "process").orderBy(at)
    latest = F.last(F.col("span"), ignorenulls=True).over(
        ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    assigned = (
        flagged.where(candidate)
        .drop("tp")
        .withColumn("span", F.lit(None).cast("struct<close:bigint,att:bigint>"))
        .unionByName(
            begins.select("run_id", "process", "index", span.alias("span")), allowMissingColumns=True
        )
        .withColumn("open", latest)
        .where(F.col("span").isNull())  # the invokes, each with the span it falls in
        .withColumn(
            "att",
            F.when(F.col("open.close").isNull() | (at < F.col("open.close")), F.col("open.att")),
        )
        .drop("span", "open")
    )
    return plain.unionByName(assigned)


def _strings(F: Any, h: DataFrame, log: DataFrame) -> DataFrame:
    """The few strings a clean value's row needs from its invoke, distinct per run, each with its 64-bit
    hash (:func:`_string_hash`): ``(run_id, f, hash, s)``, ``f`` ``t`` for a topic (of an invoke, a
    delivery or a log record), ``p`` for an invoke's producer, ``k`` for its key. The value summary
    carries hashes, and a clean value's strings are looked up here (:func:`_clean_values`); a run where
    two strings of one kind share a hash has no clean values, so the lookup stays exact."""
    kind = F.col("kind")
    invoke = kind == "send_invoke"

    def named(f: str, s: Any) -> Any:
        return F.struct(F.lit(f).alias("f"), s.alias("s"))

    # one scan of the history: each invoke names its topic, producer and key, a delivery its topic
    of_history = h.where(invoke | (kind == "delivery")).select(
        "run_id",
        F.explode(
            F.array(
                named("t", F.col("topic")),
                named("p", F.when(invoke, F.col("producer"))),
                named("k", F.when(invoke, F.col("key"))),
            )
        ).alias("n"),
    )
    return (
        of_history.select("run_id", "n.f", "n.s")
        .unionByName(log.select("run_id", F.lit("t").alias("f"), F.col("topic").alias("s")))
        .where(F.col("s").isNotNull())
        .distinct()
        .withColumn("hash", _string_hash(F, F.col("s")))
    )


def _value_summary(F: Any, rows: DataFrame, strings: DataFrame) -> DataFrame:
    """Per ``(run_id, value_id)``: whether the value is *clean* — one invoke made in no transaction, one
    ``ok`` outcome with its position, no transaction marker, one delivery, log records only at that
    position and none observed aborted — and, for clean values the outcome's numbers (``partition``,
    ``offset``, ``send_ts``, the outcome's ``mono`` and index and the delivery's: ``out_mono``,
    ``out_index``, ``dl_mono``, ``dl_index``) and the invoke's (``seq``, ``sd_index``, and the hashes of
    its topic, producer and key: ``th``, ``ph``, ``kh``, null when the string is).

    Only fixed-width aggregates, so Spark hash-aggregates (partially, before the shuffle) instead of
    sorting. Strings are compared and carried through their 64-bit hashes; a run where two of its strings
    of one kind share a hash (``strings``, :func:`_strings`) has no clean values, so this stays exact.
    """
    kind, src = F.col("kind"), F.col("src")
    invoke, outcome = kind == "send_invoke", kind == "send_outcome"
    positioned = outcome | (src != _SEND)  # rows that carry a partition and offset
    topic_hash = _string_hash(F, F.when(invoke, F.col("topic")).when(src != _SEND, F.col("lt")))

    def on_invoke(column: str) -> Any:
        return F.when(invoke & F.col(column).isNotNull(), _string_hash(F, F.col(column)))

    narrow = rows.select(
        "run_id", "value_id",
        invoke.cast("int").alias("n_inv"),
        outcome.cast("int").alias("n_out"),
        (outcome & (F.col("outcome") == "ok") & F.col("partition").isNotNull() & F.col("offset").isNotNull())
        .cast("int").alias("n_ok"),
        F.col("att").isNotNull().cast("int").alias("n_txn"),  # a marker, or an invoke made in an attempt
        (src == _DELIVERY).cast("int").alias("n_dl"),
        (src == _LOG).cast("int").alias("n_log"),
        ((src == _LOG) & (F.col("isolation") == _RC)).cast("int").alias("n_rc"),
        F.coalesce(F.col("covered"), F.lit(False)).cast("int").alias("n_cov"),
        F.when(positioned, F.coalesce("lp", "partition")).alias("p"),
        F.when(positioned, F.coalesce("lo", "offset")).alias("o"),
        F.when(invoke | (src != _SEND), topic_hash).alias("th"),
        F.when(outcome, F.col("ts")).alias("out_ts"),
        F.when(outcome, F.col("mono")).alias("out_mono"),
        F.when(outcome, F.col("index")).alias("out_index"),
        F.when(src == _DELIVERY, F.col("mono")).alias("dl_mono"),
        F.when(src == _DELIVERY, F.col("di")).alias("dl_index"),
        F.when(invoke, F.col("seq")).alias("inv_seq"),
        F.when(invoke, F.col("index")).alias("inv_index"),
        on_invoke("producer").alias("inv_ph"),
        on_invoke("key").alias("inv_kh"),
    )  # fmt: skip
    collided = (
        strings.groupBy("run_id", "f", "hash")
        .count()
        .where(F.col("count") > 1)
        .select("run_id", F.lit(True).alias("collided"))
        .distinct()
    )
    summary = narrow.groupBy("run_id", "value_id").agg(
        *(F.sum(c).alias(c) for c in ("n_inv", "n_out", "n_ok", "n_txn", "n_dl", "n_log", "n_rc", "n_cov")),
        *(f(c).alias(f"{f.__name__}_{c}") for c in ("p", "o", "th") for f in (F.min, F.max)),
        F.min("out_ts").alias("send_ts"),
        *(F.min(c).alias(c) for c in ("out_mono", "out_index", "dl_mono", "dl_index", "inv_seq", "inv_index",
                                      "inv_ph", "inv_kh")),
    )  # fmt: skip
    one = F.lit(1)
    # its one position was read at read_committed, or no read of it can be observed aborted
    not_aborted = (F.col("n_rc") >= one) | (F.col("n_cov") == 0)
    clean = (
        F.col("value_id").isNotNull()
        & (F.col("n_inv") == one) & (F.col("n_out") == one) & (F.col("n_ok") == one)
        & (F.col("n_txn") == 0) & (F.col("n_dl") == one) & (F.col("n_log") >= one) & not_aborted
        & (F.col("min_p") == F.col("max_p")) & (F.col("min_o") == F.col("max_o"))
        & (F.col("min_th") == F.col("max_th")) & F.col("collided").isNull()
    )  # fmt: skip
    return summary.join(F.broadcast(collided), "run_id", "left").select(
        "run_id", "value_id", F.coalesce(clean, F.lit(False)).alias("clean"),
        F.col("min_p").cast("int").alias("partition"), F.col("min_o").alias("offset"), "send_ts",
        "out_mono", "out_index", "dl_mono", "dl_index", F.col("inv_seq").alias("seq"),
        F.col("inv_index").alias("sd_index"), F.col("min_th").alias("th"), F.col("inv_ph").alias("ph"),
        F.col("inv_kh").alias("kh"),
    )  # fmt: skip


def _string_hash(F: Any, s: Any) -> Any:
    return F.xxhash64(s)


def _broadcast_if_few(F: Any, df: DataFrame, rows: int) -> DataFrame:
    """``df`` (of ``rows`` rows) marked for broadcast when it has at most :data:`_BROADCAST_KEYS` rows;
    a larger one is left to a shuffle join."""
    return F.broadcast(df) if rows <= _BROADCAST_KEYS else df


def _clean_values(F: Any, summary: DataFrame, strings: DataFrame) -> DataFrame:
    """The one row :func:`_traced` emits for a clean value, built from its summary, whose invoke's topic,
    producer and key are looked up by hash in ``strings`` (:func:`_strings`; few: broadcast, unless a
    workload's keys are many): counts 1/1/0/1/1, the ack as observed position, chain link and readable
    record (made in no transaction: readable at its ack), and the end-to-end latency from the ack to the
    one delivery."""

    def lookup(f: str, hash_column: str, column: str) -> DataFrame:
        return strings.where(F.col("f") == f).select(
            "run_id", F.col("hash").alias(hash_column), F.col("s").alias(column)
        )

    keys = lookup("k", "kh", "key")
    clean = (
        summary.where(F.col("clean"))
        .join(F.broadcast(lookup("t", "th", "topic")), ["run_id", "th"], "left")
        .join(F.broadcast(lookup("p", "ph", "producer")), ["run_id", "ph"], "left")
        .join(_broadcast_if_few(F, keys, keys.count()), ["run_id", "kh"], "left")
    )
    return clean.select(
        "run_id", "value_id",
        *(F.lit(n).cast("long").alias(c) for c, n in zip(_COUNTS, (1, 1, 0, 1, 1), strict=True)),
        F.col("topic").alias("pos_topic"), F.col("partition").alias("pos_partition"),
        F.col("offset").alias("pos_offset"),
        F.col("topic").alias("ch_topic"), F.col("partition").alias("ch_partition"),
        F.col("offset").alias("ch_offset"),
        "producer", "key", "seq", "send_ts",
        F.lit(None).cast(_INSTANCE_TYPE).alias("instances"),
        F.col("topic").alias("av_topic"), F.col("partition").alias("av_partition"),
        F.col("offset").alias("av_offset"), F.col("out_mono").alias("av_mono"),
        F.col("out_index").alias("av_index"),
        F.col("out_mono").alias("e2e_mono"),
        ((F.col("dl_mono") - F.col("out_mono")) * F.lit(1000.0)).alias("e2e_ms"),
        F.col("dl_mono").alias("fd_mono"), F.col("dl_index").alias("fd_index"),
        F.col("topic").alias("sd_topic"), F.col("partition").alias("sd_partition"),
        F.col("offset").alias("sd_offset"), "sd_index", F.col("send_ts").alias("sd_ts"),
        F.lit(None).cast("long").alias("rb_index"),
        F.lit(None).cast("boolean").alias("tombstone"),  # never lost, so never asked
        F.lit(True).alias("delivered"),
        F.lit(True).alias("sd_acked"),
        F.lit(None).cast("string").alias("na_topic"),
        F.lit(None).cast("int").alias("na_partition"),
    )  # fmt: skip


def _here(F: Any) -> Any:
    """A delivery's or log record's position."""
    return F.struct(F.col("lt").alias("topic"), F.col("lp").alias("partition"), F.col("lo").alias("offset"))


def _traced(
    F: Any,
    Window: Any,
    control: DataFrame,
    rows: DataFrame,
    options: AuditOptions,
    attempts: dict[str, list[TxnAttempt]],
    commits: dict[tuple[str, int], float],
    hold: Callable[[DataFrame], DataFrame],
    scratch: list[DataFrame],
) -> DataFrame:
    """The general per-value pass: rows sorted per value, window passes over that one sort, what each row
    adds. Between the passes, the attempts' outcomes (:func:`_attempt_states`) join the rows."""
    view = _value_view(F, Window, rows)
    if any(a.begin is not None for of_run in attempts.values() for a in of_run):
        view = hold(view)  # read twice: for what the log shows of each attempt, then for the emission
        scratch.append(view)
    states = _attempt_states(F, view, attempts, commits)
    if states is None:
        view = view.withColumns(
            {
                "state": F.lit(None).cast("string"),
                "commit_mono": F.lit(None).cast("double"),
                "commit_index": F.lit(None).cast("long"),
                "last_send_mono": F.lit(None).cast("double"),
            }
        )
    else:
        view = view.join(F.broadcast(states), ["run_id", "att"], "left")
    return _emitted(F, Window, control, view, options)


def _value_view(F: Any, Window: Any, rows: DataFrame) -> DataFrame:
    """Passes 1 and 2 over the value's sorted rows: each row's predecessor, the value's first invoke and
    outcome, its positions (all, visible, observed aborted, read at read_committed), and on each invoke
    its send's outcome (the k-th outcome answers the k-th invoke) and where that was acked."""
    kind = F.col("kind")
    rows = rows.withColumn("vh", F.xxhash64("run_id", "value_id"))
    src = F.col("src")
    value = Window.partitionBy(*_VALUE_KEY).orderBy(*_VALUE_ORDER)
    whole = value.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    upto = value.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    here = _here(F)
    # pass 1 (row-wise): the previous row; log rows of one position (one per isolation level, the
    # read_committed one first) are adjacent
    linked = rows.select(
        "*",
        F.row_number().over(value).alias("rn"),
        F.lag("src").over(value).alias("prev_src"),
        F.lag("lt").over(value).alias("prev_lt"),
        F.lag("lp").over(value).alias("prev_lp"),
        F.lag("lo").over(value).alias("prev_lo"),
        F.count(F.when(kind == "send_invoke", 1)).over(upto).alias("k_inv"),
        F.count(F.when(kind == "send_outcome", 1)).over(upto).alias("k_out"),
    )
    prev_log = F.coalesce(F.col("prev_src") == _LOG, F.lit(False))
    same_partition = prev_log & (F.col("prev_lt") == F.col("lt")) & (F.col("prev_lp") == F.col("lp"))
    new_position = (src == _LOG) & ~(same_partition & (F.col("prev_lo") == F.col("lo")))
    # a position's first row is read_uncommitted: the value was not read there at read_committed
    aborted_here = new_position & (F.col("isolation") != _RC) & F.col("covered")
    visible = new_position & ~aborted_here
    seen_before = F.last(F.when(visible, here), ignorenulls=True).over(
        value.rowsBetween(Window.unboundedPreceding, -1)
    )
    seen_after = F.first(F.when(visible, here), ignorenulls=True).over(
        value.rowsBetween(1, Window.unboundedFollowing)
    )
    # pass 2 (the whole value; same window, so no new sort): the value's summary
    v = linked.select(
        "vh", "run_id", "value_id", "src", "kind", "index", "att", "topic", "isolation",
        "di", "lt", "lp", "lo", "ts", "mono", "rn", "prev_src", "k_inv",
        same_partition.alias("same_partition"), new_position.alias("new_position"), visible.alias("visible"),
        seen_before.alias("seen_before"), seen_after.alias("seen_after"),
        F.first(F.when(kind == "send_invoke", F.struct("producer", "seq", "key", "topic", "ts", "tombstone")),
                ignorenulls=True).over(whole).alias("inv"),
        F.first(F.when(kind == "send_outcome", F.struct("outcome", "partition", "offset", "ts")),
                ignorenulls=True).over(whole).alias("out"),
        F.collect_list(F.when(kind == "send_outcome", F.struct(
            F.col("k_out").alias("k"), "index", "outcome", "partition", "offset", "ts", "mono")))
        .over(whole).alias("outs"),
        F.collect_set(F.when(aborted_here, here)).over(whole).alias("aborted_set"),
        F.collect_set(F.when((src == _LOG) & (F.col("isolation") == _RC), here)).over(whole).alias("rc_set"),
        F.count(F.when(src == _DELIVERY, 1)).over(whole).alias("n_deliveries"),
        F.count(F.when(new_position, 1)).over(whole).alias("n_pos"),
        F.count(F.when(visible, 1)).over(whole).alias("n_visible"),
        F.min(F.when(visible, here)).over(whole).alias("first"),
    )  # fmt: skip
    paired = F.get(F.filter("outs", lambda o: o.k == F.col("k_inv")), 0)
    sent_ok = (kind == "send_invoke") & (paired.outcome == "ok")
    ack = F.when(
        sent_ok & paired.partition.isNotNull() & paired.offset.isNotNull(),
        F.struct(F.col("topic").alias("topic"), paired.partition.alias("partition"),
                 paired.offset.alias("offset")),
    )  # fmt: skip
    return v.select(
        "*",
        F.when(kind == "send_invoke", paired).alias("paired"),
        ack.alias("ack"),
        F.coalesce(F.array_contains("rc_set", ack), F.lit(False)).alias("seen_committed"),
        F.coalesce(F.array_contains("aborted_set", ack), F.lit(False)).alias("seen_aborted"),
    ).drop("outs")


def _attempt_states(
    F: Any,
    view: DataFrame,
    attempts: dict[str, list[TxnAttempt]],
    commits: dict[tuple[str, int], float],
) -> DataFrame | None:
    """``(run_id, att, state, commit_mono, commit_index, last_send_mono)`` of every attempt: its recorded end
    and what the log shows of its sends (collected on the driver; one row per attempt), its recorded commit
    marker (null unless it ended with a commit ``ok``) and the mono of its last ``send_invoke`` (null: no
    send), or ``None`` when there is no attempt."""
    if not attempts:
        return None
    seen: dict[tuple[str, int], tuple[bool, bool, float | None]] = {}
    if any(a.begin is not None for of_run in attempts.values() for a in of_run):
        acked = F.col("ack").isNotNull()
        observed = (
            view.where(F.col("att").isNotNull() & (F.col("kind") == "send_invoke"))
            .groupBy("run_id", "att")
            .agg(F.max(F.when(acked, F.col("seen_committed"))).alias("c"),
                 F.max(F.when(acked, F.col("seen_aborted"))).alias("a"), F.max("mono").alias("last"))
            .collect()
        )  # fmt: skip
        seen = {(r.run_id, r.att): (bool(r.c), bool(r.a), r.last) for r in observed}
    rows = []
    for run, of_run in attempts.items():
        for a in of_run:
            committed, aborted, last = seen.get((run, a.att), (False, False, None))
            rows.append(
                (
                    run,
                    a.att,
                    attempt_state(a.recorded, committed, aborted),
                    commits[(run, a.att)] if a.recorded == "committed" else None,
                    a.att if a.recorded == "committed" else None,
                    last,
                )
            )
    return _local_frame(
        view.sparkSession,
        rows,
        "run_id string, att long, state string, commit_mono double, commit_index long, last_send_mono double",
    )


def _emitted(F: Any, Window: Any, control: DataFrame, v: DataFrame, options: AuditOptions) -> DataFrame:
    """Passes 3 and 4 (same window as :func:`_value_view`): the value's status from its sends and the
    attempts that carried it, which of its reads were aborted reads; then what each row adds."""
    kind = F.col("kind")
    src = F.col("src")
    value = Window.partitionBy(*_VALUE_KEY).orderBy(*_VALUE_ORDER)
    whole = value.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    here = _here(F)
    is_invoke = kind == "send_invoke"
    state = F.col("state")
    paired = F.col("paired")
    send_acked = F.coalesce(
        (paired.outcome == "ok") & (F.col("att").isNull() | (state == "committed")), F.lit(False)
    )
    send_failed = F.coalesce(paired.outcome == "fail", F.lit(False)) | F.coalesce(
        state == "aborted", F.lit(False)
    )
    # when the send's record became readable by the group: at its ack; at read_committed a send made in an
    # attempt at the later of its ack and the attempt's recorded commit (never without one)
    acked_at = F.struct(paired.mono.alias("mono"), paired.index.alias("index"))
    commit_mono, commit_index = F.col("commit_mono"), F.col("commit_index")
    committed_at = F.struct(commit_mono.alias("mono"), commit_index.alias("index"))
    commit_later = (commit_mono > paired.mono) | (
        (commit_mono == paired.mono) & (commit_index > paired.index)
    )
    plain = F.col("att").isNull() if options.group_isolation == _RC else F.lit(True)
    has_ack = is_invoke & F.col("ack").isNotNull()
    readable = F.when(has_ack & plain, acked_at).when(
        has_ack & commit_mono.isNotNull(), F.when(commit_later, committed_at).otherwise(acked_at)
    )
    v = v.withColumn("readable", readable)
    # a delivery inside an aborted attempt of its own process was rolled back: no consumption, no duplicate
    counted = (src == _DELIVERY) & ~F.coalesce(state == "aborted", F.lit(False))
    # a redelivery is one from the same topic: a copy read from another (consume-transform-produce's
    # input and output) is another record, like duplicate_in_log's copies
    in_topic = Window.partitionBy(*_VALUE_KEY, "lt").orderBy(*_VALUE_ORDER)
    v = v.select(
        "*",
        F.last(F.when(counted, F.col("di")), ignorenulls=True)
        .over(in_topic.rowsBetween(Window.unboundedPreceding, -1)).alias("prev_counted_di"),
        F.count(F.when(counted, 1)).over(whole).alias("n_counted"),
        F.min(F.col("readable.mono")).over(whole).alias("first_readable"),
        F.min(F.when(src == _DELIVERY, F.struct(F.col("mono").alias("mono"), F.col("di").alias("di"))))
        .over(whole).alias("first_d"),
        F.max(F.when(is_invoke, send_acked)).over(whole).alias("any_acked"),
        F.min(F.when(is_invoke, send_failed)).over(whole).alias("all_failed"),
        F.min(F.when(is_invoke, F.coalesce(paired.outcome == "fail", F.lit(False)))).over(whole)
        .alias("all_unwritten"),
        F.max(F.when(is_invoke & ~send_acked & ~send_failed, state == "indeterminate")).over(whole)
        .alias("open_txn"),
        F.min(F.when(is_invoke & send_acked, F.struct(paired.index.alias("i"), F.col("topic").alias("topic"),
              paired.partition.alias("partition"), paired.offset.alias("offset"), paired.ts.alias("ts"))))
        .over(whole).alias("first_ack"),
        F.collect_set(F.when(is_invoke & (state == "aborted"), F.col("ack"))).over(whole)
        .alias("aborted_acks"),
        F.max(F.when(kind == "txn", state == "committed")).over(whole).alias("listed_committed"),
        F.max(F.when(kind == "txn", F.struct("index", (state == "aborted").alias("aborted")))).over(whole)
        .alias("last_listed"),
        F.collect_list(F.when(is_invoke & F.col("ack").isNotNull() & F.col("last_send_mono").isNotNull(),
                              F.struct(F.col("ack").alias("at"), F.col("last_send_mono").alias("until"))))
        .over(whole).alias("uncommitted"),
    )  # fmt: skip
    rebalances = (
        control.where(kind == "rebalance").groupBy("run_id").agg(F.collect_list("index").alias("rebalances"))
    )
    v = v.join(F.broadcast(rebalances), "run_id", "left")

    out = F.col("out")
    sent = F.col("inv").isNotNull()
    named = F.col("value_id").isNotNull()
    acked = F.coalesce(F.col("any_acked"), F.lit(False))
    failed = ~acked & F.coalesce(F.col("all_failed"), F.lit(False))
    pending = ~acked & ~failed & F.coalesce(F.col("open_txn"), F.lit(False))
    unwritten = F.coalesce(F.col("all_unwritten"), F.lit(False))
    carried_aborted = ~F.coalesce(F.col("listed_committed"), F.lit(False)) & F.coalesce(
        F.col("last_listed.aborted"), F.lit(False)
    )
    # aborted reads (G1a): per read, what a reader at its level must not see
    read_level = F.when(src == _DELIVERY, F.lit(options.group_isolation)).otherwise(F.col("isolation"))
    sent_here = F.coalesce(F.col("lt") == F.col("inv.topic"), F.lit(False))
    committed_read = (read_level == _RC) & (
        F.coalesce(F.array_contains("aborted_set", here), F.lit(False))
        | (sent_here & (failed | F.coalesce(F.array_contains("aborted_acks", here), F.lit(False))))
        | (~sent_here & carried_aborted)
    )
    bad_read = ((src == _DELIVERY) | (src == _LOG)) & (unwritten | committed_read)
    v = v.select("*", F.min(F.when(bad_read, here)).over(whole).alias("bad"))

    send_ts = F.coalesce(out.ts, F.col("inv.ts"))
    ack_at = F.when(
        sent & (out.outcome == "ok") & out.offset.isNotNull() & out.partition.isNotNull(),
        F.struct(F.col("inv.topic").alias("topic"), out.partition.alias("partition"),
                 out.offset.alias("offset")),
    )  # fmt: skip
    first_row = F.col("rn") == 1
    summary = first_row & sent  # a sent value's first row is one of its send events
    bad = F.col("bad")
    redelivery = counted & named & F.col("prev_counted_di").isNotNull()
    # a read_committed delivery at the ack position of a send made in an attempt, before that attempt's
    # last send_invoke: its producer had not asked to commit yet
    precommitted = (src == _DELIVERY) & F.lit(options.group_isolation == _RC) & F.coalesce(
        F.exists("uncommitted", lambda u: (u.at.topic == F.col("lt")) & (u.at.partition == F.col("lp"))
                 & (u.at.offset == F.col("lo")) & (u.until > F.col("mono"))),
        F.lit(False),
    )  # fmt: skip
    after_rebalance = F.coalesce(
        F.exists("rebalances", lambda r: (r > F.col("prev_counted_di")) & (r < F.col("di"))), F.lit(False)
    )
    lost = summary & (F.col("n_visible") == 0)
    seen = summary & (F.col("n_visible") > 0)
    expected = ~failed & ~pending if options.group_isolation == _RC else ~failed
    # a topic's first visible position of the value, when another follows in that topic
    topic_first = F.col("visible") & ~F.coalesce(F.col("seen_before.topic") == F.col("lt"), F.lit(False))
    duplicated = sent & topic_first & F.coalesce(F.col("seen_after.topic") == F.col("lt"), F.lit(False))
    first_at = (F.col("first.topic"), F.col("first.partition"), F.col("first.offset"))
    row_at = (F.col("lt"), F.col("lp"), F.col("lo"))
    first_ack = (F.col("first_ack.topic"), F.col("first_ack.partition"), F.col("first_ack.offset"))
    null_ts = F.lit(None).cast("double")
    found = [
        (lost & acked, "lost_acked", first_ack, F.col("first_ack.ts")),
        (lost & ~acked & ~failed, "lost_indeterminate",
         (F.col("inv.topic"), out.partition, F.lit(None).cast("long")), send_ts),
        (seen & expected & (F.col("n_counted") == 0), "unseen_by_group", first_at, send_ts),
        (duplicated, "duplicate_in_log", row_at, send_ts),
        (summary & bad.isNotNull(), "aborted_read", (bad.topic, bad.partition, bad.offset), send_ts),
        (redelivery & after_rebalance, "duplicate_delivery_after_rebalance", row_at, F.col("ts")),
        (redelivery & ~after_rebalance, "duplicate_delivery_other", row_at, F.col("ts")),
        (F.col("new_position") & (~named | ~sent), "unexpected", row_at, null_ts),
        (precommitted, "precommitted_read", row_at, F.col("ts")),
    ]  # fmt: skip
    any_found = F.lit(False)
    for cond, *_ in found:
        any_found = any_found | F.coalesce(cond, F.lit(False))

    def instance(name: str, at: tuple[Any, Any, Any], ts: Any) -> Any:
        topic, partition, offset = at
        return F.struct(
            F.lit(name).alias("anomaly"), F.col("value_id"), topic.alias("topic"),
            partition.alias("partition"), offset.alias("offset"), ts.alias("ts"),
        )  # fmt: skip

    instances = F.when(
        any_found,
        F.array_compact(F.array(*(F.when(cond, instance(name, at, ts)) for cond, name, at, ts in found))),
    ).cast(_INSTANCE_TYPE)
    # the observed position: a sent value's ack on its first row, each delivery and distinct log position
    # (skipped when equal to the ack's: the same observation)
    not_ack = ~F.coalesce(here == ack_at, F.lit(False))
    position = (
        F.when(summary, ack_at)
        .when((src == _DELIVERY) & not_ack, here)
        .when(F.col("new_position") & not_ack, here)
    )
    # a chain link per partition the value is (visibly) in: its first offset there; the first partition's
    # link rides on the value's first row
    new_partition = ~F.coalesce(
        (F.col("seen_before.topic") == F.col("lt")) & (F.col("seen_before.partition") == F.col("lp")),
        F.lit(False),
    )
    link = F.when(summary, F.col("first")).when(
        F.col("visible") & named & sent & F.col("seen_before").isNotNull() & new_partition, here
    )
    emitted = v.select(
        "run_id", "value_id",
        *(F.when(first_row, c).cast("long").alias(n) for c, n in (
            (sent, "c_sent"), (sent & acked, "c_acked"), (sent & failed, "c_failed"),
            (F.col("n_pos"), "c_log"), (F.col("n_deliveries"), "c_deliveries"))),
        position.topic.alias("pos_topic"), position.partition.alias("pos_partition"),
        position.offset.alias("pos_offset"),
        link.topic.alias("ch_topic"), link.partition.alias("ch_partition"), link.offset.alias("ch_offset"),
        F.col("inv.producer").alias("producer"), F.col("inv.key").alias("key"), F.col("inv.seq").alias("seq"),
        send_ts.alias("send_ts"),
        instances.alias("instances"),
        *(F.when(F.col("readable").isNotNull(), c).alias(n) for c, n in (
            (F.col("ack.topic"), "av_topic"), (F.col("ack.partition"), "av_partition"),
            (F.col("ack.offset"), "av_offset"), (F.col("readable.mono"), "av_mono"),
            (F.col("readable.index"), "av_index"), (F.col("first_d.mono"), "fd_mono"),
            (F.col("first_d.di"), "fd_index"))),
        F.when(first_row & F.col("first_d").isNotNull(), F.col("first_readable")).alias("e2e_mono"),
        F.when(first_row, (F.col("first_d.mono") - F.col("first_readable")) * F.lit(1000.0))
        .alias("e2e_ms"),
        *(F.when(is_invoke & F.col("ack").isNotNull(), c).alias(n) for c, n in (
            (F.col("ack.topic"), "sd_topic"), (F.col("ack.partition"), "sd_partition"),
            (F.col("ack.offset"), "sd_offset"), (F.col("index"), "sd_index"), (paired.ts, "sd_ts"))),
        F.when((src == _DELIVERY) & ~counted, F.col("di")).alias("rb_index"),
        F.when(first_row, F.coalesce(F.col("inv.tombstone"), F.lit(False))).alias("tombstone"),
        F.when(first_row, F.col("n_counted") > 0).alias("delivered"),
        F.when(is_invoke & F.col("ack").isNotNull(), send_acked).alias("sd_acked"),
        # acknowledged without an offset (a retried batch the broker already held): where, for the log
        # policy to place it where the group read it (:func:`_removed`)
        *(F.when(is_invoke & send_acked & paired.offset.isNull() & paired.partition.isNotNull(), c).alias(n)
          for c, n in ((F.col("topic"), "na_topic"), (paired.partition, "na_partition"))),
    )  # fmt: skip
    return emitted.where(
        first_row
        | F.col("pos_topic").isNotNull()
        | F.col("ch_topic").isNotNull()
        | F.col("instances").isNotNull()
        | F.col("av_topic").isNotNull()
        | F.col("sd_topic").isNotNull()
        | F.col("na_topic").isNotNull()
        | F.col("rb_index").isNotNull()
    )


def _fault_windows(F: Any, control: DataFrame) -> DataFrame:
    """One row per fault inject: ``(run_id, wid, fault, target, start, end)``, ``wid`` the inject's index,
    ``end`` the mono of the heal that :func:`~chaos.history.windows.fault_windows` pairs it with (null:
    never healed). The fault events are few and ``control`` is in memory: they are paired on the driver, by
    the same function as the reference's, and the windows go back as a small frame."""
    faults = (
        control.where(F.col("kind") == "fault")
        .select("run_id", F.col("index").alias("wid"), "action", "fault", "target", "params", "mono")
        .collect()
    )  # "wid", not "index": a Row is a tuple, whose .index is a method
    faults.sort(key=lambda r: (r.run_id, r.wid))
    rows = []
    for run, of_run in itertools.groupby(faults, key=lambda r: r.run_id):
        for w in fault_windows(of_run):
            end = w.heal.mono if w.heal is not None else None
            rows.append((run, w.inject.wid, w.inject.fault, w.inject.target, w.inject.mono, end))
    return _local_frame(
        control.sparkSession,
        rows,
        "run_id string, wid long, fault string, target string, start double, end double",
    )


def _availability(
    F: Any,
    Window: Any,
    acks: DataFrame,
    deliveries: DataFrame,
    per_value: DataFrame,
    windows: DataFrame,
    runs: dict[str, tuple[float | None, float | None]],
) -> list[DataFrame]:
    """Parts (see :func:`spark_audit`): the longest outage per run; the fault windows; per window and phase
    the ack count and the latencies at the wanted ranks, and the same for the end-to-end latencies (phases
    ``e2e_*``; ``e2e_all`` over the whole run, window ``-1``); the first ack / delivery after each heal.
    ``runs``: each run's first invoke and last send event (:func:`_runs`)."""
    # the longest gap between consecutive distinct points: inside one-second buckets, and from each
    # non-empty bucket's last point to the next one's first; ties go to the earliest gap
    ends = [(run, mono) for run, of_run in runs.items() for mono in of_run if mono is not None]
    points = (
        acks.select("run_id", "mono")
        .unionByName(_local_frame(acks.sparkSession, ends, "run_id string, mono double"))
        .withColumn("b", F.floor(F.col("mono") / _OUTAGE_BUCKET_S))
    )
    gap = F.struct(
        (F.col("mono") - F.col("gap_start")).alias("gap"),
        (-F.col("gap_start")).alias("neg_start"),
        "gap_start",
        F.col("mono").alias("gap_end"),
    )
    inside = (
        points.withColumn("gap_start", F.lag("mono").over(Window.partitionBy("run_id", "b").orderBy("mono")))
        .where(F.col("mono") > F.col("gap_start"))
        .groupBy("run_id", "b")
        .agg(F.max(gap).alias("o"))
    )
    across = (
        points.groupBy("run_id", "b")
        .agg(F.min("mono").alias("mono"), F.max("mono").alias("last"))
        .withColumn("gap_start", F.lag("last").over(Window.partitionBy("run_id").orderBy("b")))
        .where(F.col("gap_start").isNotNull())
        .select("run_id", "b", gap.alias("o"))
    )
    outage = (
        inside.unionByName(across)
        .groupBy("run_id")
        .agg(F.max("o").alias("o"))
        .select(
            F.lit("outage").alias("part"),
            "run_id",
            F.col("o.gap").alias("gap"),
            F.col("o.gap_start").alias("gap_start"),
            F.col("o.gap_end").alias("gap_end"),
        )
    )

    # per (window, phase): the ack latencies by the outcome's mono, the end-to-end latencies by when the
    # value became readable
    phase = (
        F.when(F.col("mono") < F.col("start"), "before")
        .when(F.col("end").isNull() | (F.col("mono") <= F.col("end")), "during")
        .otherwise("after")
    )
    in_window = F.broadcast(windows.select("run_id", "wid", "start", "end"))
    e2e = per_value.where(F.col("e2e_ms").isNotNull()).select(
        "run_id", F.col("e2e_mono").alias("mono"), F.col("e2e_ms").alias("latency_ms")
    )
    phased = (
        acks.where(F.col("latency_ms").isNotNull())
        .join(in_window, "run_id")
        .select("run_id", "wid", "latency_ms", phase.alias("phase"))
        .unionByName(
            e2e.join(in_window, "run_id").select(
                "run_id", "wid", "latency_ms", F.concat(F.lit("e2e_"), phase).alias("phase")
            )
        )
        .unionByName(e2e.select("run_id", F.lit(-1).cast("long").alias("wid"), "latency_ms",
                                F.lit("e2e_all").alias("phase")))
    )  # fmt: skip
    stats = _percentiles(F, Window, acks.sparkSession, phased)
    # the first ack / delivery strictly after each heal
    healed = F.broadcast(windows.where(F.col("end").isNotNull()).select("run_id", "wid", "end"))
    after = F.col("mono") > F.col("end")
    resumed = (
        acks.select("run_id", "mono", F.lit(True).alias("is_ack"))
        .unionByName(deliveries.select("run_id", "mono", F.lit(False).alias("is_ack")))
        .join(healed, "run_id")
        .where(after)
        .groupBy("run_id", "wid")
        .agg(
            (F.min(F.when(F.col("is_ack"), F.col("mono"))) - F.first("end")).alias("to_ack"),
            (F.min(F.when(~F.col("is_ack"), F.col("mono"))) - F.first("end")).alias("to_delivery"),
        )
        .withColumn("part", F.lit("resume"))
    )
    return [
        outage,
        windows.select(F.lit("window").alias("part"), "run_id", "wid", "fault", "target", "start", "end"),
        stats,
        resumed,
    ]


def _percentiles(F: Any, Window: Any, spark: Any, phased: DataFrame) -> DataFrame:
    """Part ``stat``: per ``(run_id, wid, phase)`` of ``phased`` the count and the nearest-rank latencies
    (:data:`PERCENTILES`): count the latencies per log-scaled bucket, find the bucket holding each wanted
    rank; in those buckets only, count each distinct latency and number them by a running count.

    Counting before numbering matters when latencies repeat (a clock's granularity, a synthetic run's
    constant delay): numbering every row put a bucket that held all of a 10M-record run's latencies — once
    per wanted rank — in one task's sort."""
    latency = F.col("latency_ms")
    bucket = F.when(
        latency > 0, F.floor(F.log2(latency) * _BUCKETS_PER_OCTAVE)
    ).otherwise(F.lit(_LOWEST_BUCKET)).cast("long")  # fmt: skip
    phased = phased.withColumn("b", bucket)
    in_phase = ["run_id", "wid", "phase"]
    upto = (
        Window.partitionBy(*in_phase).orderBy("b").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    histogram = (
        phased.groupBy(*in_phase, "b")
        .agg(F.count(F.lit(1)).alias("k"))
        .withColumn("cum", F.sum("k").over(upto))
        .withColumn("n", F.sum("k").over(Window.partitionBy(*in_phase)))
    )
    wanted = histogram.crossJoin(
        F.broadcast(_local_frame(spark, [(p,) for p in PERCENTILES], "p int"))
    ).withColumn("rank", F.expr("greatest(1, (n * p + 99) div 100)"))
    targets = F.broadcast(
        wanted.where((F.col("cum") - F.col("k") < F.col("rank")) & (F.col("rank") <= F.col("cum"))).select(
            *in_phase, "b", "p", "n", (F.col("rank") - F.col("cum") + F.col("k")).alias("local")
        )
    )
    in_bucket = (
        Window.partitionBy(*in_phase, "b")
        .orderBy("latency_ms")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    values = (
        phased.join(targets, [*in_phase, "b"], "left_semi")
        .groupBy(*in_phase, "b", "latency_ms")
        .agg(F.count(F.lit(1)).alias("k"))
        .withColumn("upto", F.sum("k").over(in_bucket))
    )
    return (
        values.join(targets, [*in_phase, "b"])
        .where((F.col("upto") - F.col("k") < F.col("local")) & (F.col("local") <= F.col("upto")))
        .select(F.lit("stat").alias("part"), *in_phase, "p", "n", "latency_ms")
    )


def _runs(F: Any, h: DataFrame) -> dict[str, tuple[float | None, float | None]]:
    """Every run of the history, with its first invoke's and last send event's (invoke or outcome) mono —
    the ends of its outage search — collected (one scan of the history, one row per run)."""
    kind, mono = F.col("kind"), F.col("mono")
    rows = (
        h.groupBy("run_id")
        .agg(
            F.min(F.when(kind == "send_invoke", mono)).alias("first"),
            F.max(F.when(kind.isin("send_invoke", "send_outcome"), mono)).alias("last"),
        )
        .collect()
    )
    return {r.run_id: (r.first, r.last) for r in rows}


Owners = dict[str, tuple[tuple[str, str | None], ...]]
"""Per run, every ``(process, member)`` that delivered, sorted: a delivery's owner id is its position."""


def _group_bounds(
    F: Any, control: DataFrame, deliveries: DataFrame
) -> tuple[dict[str, tuple[float, float]], Owners]:
    """Per run with deliveries: the group's first delivery and its last event (a delivery, commit or
    rebalance: the end of every stall still open), and its :data:`Owners`; collected (one row per run)."""
    kind, is_d = F.col("kind"), F.col("is_d")
    rows = (
        deliveries.select("run_id", "mono", "process", "member", F.lit(True).alias("is_d"))
        .unionByName(
            control.where(kind.isin("commit", "rebalance")).select(
                "run_id", "mono", "process", "member", F.lit(False).alias("is_d")
            )
        )
        .groupBy("run_id")
        .agg(
            F.min(F.when(is_d, F.col("mono"))).alias("first"),
            F.max("mono").alias("last"),
            F.collect_set(F.when(is_d, F.struct("process", "member"))).alias("owners"),
        )
        .where(F.col("first").isNotNull())
        .collect()
    )
    owners = {
        r.run_id: tuple(
            sorted(((o.process, o.member) for o in r.owners), key=lambda o: (o[0], o[1] is None, o[1] or ""))
        )
        for r in rows
    }
    return {r.run_id: (r.first, r.last) for r in rows}, owners


def _leaves(F: Any, control: DataFrame) -> dict[tuple[str, str, int], list[Mark]]:
    """The revoke / lost callbacks per ``(run_id, topic, partition)`` they list (few; collected)."""
    rows = (
        control.where((F.col("kind") == "rebalance") & (F.col("action") != "assign"))
        .select("run_id", F.col("index").alias("i"), "mono", "process", "member",
                F.explode("partitions").alias("tp"))
        .collect()
    )  # fmt: skip
    found: dict[tuple[str, str, int], list[Mark]] = defaultdict(list)
    for r in rows:
        found[(r.run_id, r.tp.topic, r.tp.partition)].append((r.mono, r.i, r.process, r.member))
    return found


def _consumer(
    F: Any,
    Window: Any,
    deliveries: DataFrame,
    per_value: DataFrame,
    bounds: dict[str, tuple[float, float]],
    owners: Owners,
) -> list[DataFrame]:
    """Parts (docs/audit.md, "Consumer side"): ``consumer``, per partition the group delivered from, its
    longest stall and the deliveries where its owner changed (paired into handovers on the driver; an
    owner is its id in ``owners``); ``lag``, the group's offset lag per point of the series.

    One window per partition over its readable records and deliveries in ``(mono, index)`` order gives
    each row the highest offset readable and delivered up to it and before it, the next delivery and the
    previous one: a stall starts at a row where records wait (readable beyond delivered) and did not just
    before, or at a delivery after which records still wait, and ends at the next delivery (or the group's
    last event)."""
    if not bounds:
        return []
    spark = deliveries.sparkSession
    grid = _local_frame(
        spark,
        [(run, first, last, *lag_grid(first, last)) for run, (first, last) in bounds.items()],
        "run_id string, first double, horizon double, n int, step double",
    )
    where = ["run_id", "topic", "partition"]
    delivered = deliveries.select(*where).distinct()
    # every readable record; on a service's input partitions (read by no recorded group: ``read`` null) each
    # is also processed at its value's first delivery, walked like a delivery under the owner id -1
    available = (
        per_value.where(F.col("av_topic").isNotNull())
        .select("run_id", F.col("av_topic").alias("topic"), F.col("av_partition").alias("partition"),
                F.col("av_offset").alias("offset"), F.col("av_mono").alias("mono"),
                F.col("av_index").alias("index"), "fd_mono", "fd_index")
        .join(F.broadcast(delivered.withColumn("read", F.lit(True))), where, "left")
    )  # fmt: skip
    readable = available.select(*where, "offset", "mono", "index", F.lit(False).alias("is_d"))
    processed = available.where(F.col("read").isNull() & F.col("fd_mono").isNotNull()).select(
        *where, "offset", F.col("fd_mono").alias("mono"), F.col("fd_index").alias("index"),
        F.lit(-1).alias("oid"), F.lit(True).alias("is_d"),
    )  # fmt: skip
    # deliveries carry their owner's id, not its two strings, into the walk's shuffle and sort (measured
    # at 10M records: the strings, and a window aggregate over a struct, cost a third of the walk)
    ids = _local_frame(
        spark,
        [(run, process, member, oid) for run, of_run in owners.items()
         for oid, (process, member) in enumerate(of_run)],
        "o_run string, o_process string, o_member string, oid int",
    )  # fmt: skip
    owned = deliveries.join(
        F.broadcast(ids),
        (F.col("run_id") == F.col("o_run"))
        & (F.col("process") == F.col("o_process"))
        & F.col("member").eqNullSafe(F.col("o_member")),
    ).select(*where, "offset", "mono", "index", "oid", F.lit(True).alias("is_d"))
    # the grid's columns join after the walk's sort, not before: its shuffle carries only the rows' own
    rows = readable.unionByName(owned, allowMissingColumns=True).unionByName(processed)
    horizons = F.broadcast(grid.select("run_id", "horizon"))
    is_d, offset, mono = F.col("is_d"), F.col("offset"), F.col("mono")
    order = ("mono", "index", "is_d", "offset")  # a total order: an index or an offset tells rows apart
    ordered = Window.partitionBy(*where).orderBy(*order)
    upto = ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    before = ordered.rowsBetween(Window.unboundedPreceding, -1)
    # "the first delivery after this row": the next non-null delivery mono, in the same sort as the rest.
    # (A frame that ends at unboundedFollowing is evaluated again for every row — quadratic per partition:
    # 205 of a 100k-record audit's 267 task-seconds; a reversed window costs a second sort.) Python's lead
    # has no IGNORE NULLS, hence SQL, over the spec of ``ordered``
    next_delivery = F.expr(
        "lead(CASE WHEN is_d THEN mono END) IGNORE NULLS OVER "
        f"(PARTITION BY {', '.join(f'`{c}`' for c in where)} ORDER BY {', '.join(f'`{c}`' for c in order)})"
    )

    def highest(frame: Any, delivery: bool) -> Any:
        return F.coalesce(F.max(F.when(is_d if delivery else ~is_d, offset)).over(frame), F.lit(-1))

    read_upto, read_before = highest(upto, False), highest(before, False)
    done_upto, done_before = highest(upto, True), highest(before, True)

    def previous(column: str) -> Any:  # the previous delivery's, one column at a time: a struct costs more
        return F.last(F.when(is_d, F.col(column)), ignorenulls=True).over(before).alias(f"prev_{column}")

    walked = rows.select(
        *where, "is_d", "mono", "index", "oid",
        ((done_upto >= 0) & (read_upto > done_upto)).alias("waits"),
        ((done_before >= 0) & (read_before > done_before)).alias("waited"),
        next_delivery.alias("next_d"),
        previous("mono"), previous("index"), previous("oid"),
    ).join(horizons, "run_id")  # fmt: skip
    next_d, horizon = F.col("next_d"), F.col("horizon")
    starts = F.col("waits") & (is_d | ~F.col("waited")) & (mono <= horizon)
    end = F.coalesce(next_d, horizon)
    stall = F.when(
        starts,
        F.struct((end - mono).alias("gap"), (-mono).alias("neg_start"), mono.alias("start"), end.alias("end"),
                 next_d.isNotNull().alias("resumed")),
    )  # fmt: skip
    prev_oid = F.col("prev_oid")
    moved = is_d & prev_oid.isNotNull() & (prev_oid != F.col("oid"))
    move = F.when(
        moved,
        F.struct(
            F.struct(
                F.col("prev_mono").alias("mono"), F.col("prev_index").alias("index"), prev_oid.alias("oid")
            ).alias("a"),
            F.struct("mono", "index", "oid").alias("b"),
        ),
    )
    consumer = (
        # only the rows that start a stall or change the owner count, and each partition's first delivery
        # (so that every partition has its row): the aggregate then reads a few rows, not every row
        walked.where(starts | moved | (is_d & prev_oid.isNull()))
        .groupBy(*where)
        .agg(F.max(stall).alias("s"), F.collect_list(move).alias("moves"), F.min("oid").alias("min_oid"))
        .select(F.lit("consumer").alias("part"), *where, F.col("s.gap").alias("c_gap"),
                F.col("s.start").alias("c_start"), F.col("s.end").alias("c_end"),
                F.col("s.resumed").alias("c_resumed"), "moves", (F.col("min_oid") < 0).alias("c_service"))
    )  # fmt: skip

    # the lag series: an event counts from point ceil((mono - first) / step) on (model.lag_point)
    step, n = F.col("step"), F.col("n")
    point = F.when(step == 0.0, F.lit(0).cast("long")).otherwise(
        F.least(
            F.greatest(F.ceil((mono - F.col("first")) / F.when(step > 0.0, step)), F.lit(0).cast("long")),
            (n - 1).cast("long"),
        )
    )
    per_point = (
        rows.join(F.broadcast(grid), "run_id")
        .where(mono <= horizon)
        .select(*where, point.alias("point"), F.when(is_d, offset).alias("d"),
                F.when(~is_d, offset).alias("r"))
        .groupBy(*where, "point")
        .agg(F.max("r").alias("r"), F.max("d").alias("d"))
    )  # fmt: skip
    every_point = delivered.join(F.broadcast(grid), "run_id").select(
        *where, F.explode(F.sequence(F.lit(0).cast("long"), (n - 1).cast("long"))).alias("point")
    )
    running = (
        Window.partitionBy(*where).orderBy("point").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    read = F.coalesce(F.max("r").over(running), F.lit(-1))
    done = F.coalesce(F.max("d").over(running), F.lit(-1))
    lag = (
        every_point.join(per_point, [*where, "point"], "left")
        .select("run_id", "point",
                F.when(done >= 0, F.greatest(read - done, F.lit(0))).otherwise(0).alias("l"))
        .groupBy("run_id", "point")
        .agg(F.sum("l").alias("lag"))
        .select(F.lit("lag").alias("part"), "run_id", "point", "lag")
    )  # fmt: skip
    return [consumer, lag]


def _facts(
    by_part: dict[str, list[Any]],
    runs: list[str],
    options: AuditOptions,
    *,
    log_missing: bool,
    bounds: dict[str, tuple[float, float]],
    owners: Owners,
    leaves: dict[tuple[str, str, int], list[Mark]],
    policies: dict[str, LogPolicies],
) -> dict[str, AuditFacts]:
    """The collected parts as one :class:`AuditFacts` per run (``runs``, sorted)."""
    removed: dict[str, dict[tuple[str, int, str], int]] = defaultdict(dict)
    for e in by_part["removal"]:
        removed[e.run_id][(e.rm_topic, e.rm_partition, e.anomaly)] = e.n
    counts: dict[tuple[str, str], int] = {}
    found_examples: dict[tuple[str, str], list[Example]] = defaultdict(list)
    per_producer: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
    for e in by_part["by_producer"]:
        per_producer[(e.run_id, e.anomaly)][e.producer] = e.n
    ranges: dict[tuple[str, str], list[PartitionRange]] = defaultdict(list)
    for e in by_part["range"]:
        ranges[(e.run_id, e.anomaly)].append(
            PartitionRange(
                e.rg_topic,
                e.rg_partition,
                e.n,
                e.rg_first_offset,
                e.rg_last_offset,
                e.rg_first_ts,
                e.rg_last_ts,
            )
        )
    for e in by_part["example"]:
        counts[(e.run_id, e.anomaly)] = e.n
        if e.rn <= options.max_examples:
            found_examples[(e.run_id, e.anomaly)].append(
                Example(e.value_id, e.topic, e.partition, e.offset, e.ts)
            )
    totals_of = {r.run_id: r for r in by_part["totals"]}
    problems: dict[str, set[str]] = {run: set() for run in runs}
    drained: set[str] = set()
    for e in by_part["end"]:
        drained.add(e.run_id)
        if e.end_outcome != "ok":
            problems[e.run_id].add(
                f"drain incomplete: {e.end_topic}[{e.end_partition}] {e.end_isolation} ({e.end_error})"
            )
    availability = _availability_of(by_part, _consumption_of(by_part, bounds, owners, leaves))
    result: dict[str, AuditFacts] = {}
    for run in runs:
        anomalies = tuple(
            (
                name,
                make_report(
                    found_examples[(run, name)],
                    counts.get((run, name), 0),
                    options.max_examples,
                    per_producer[(run, name)],
                    ranges[(run, name)],
                ),
            )
            for name in ANOMALIES
        )
        t = totals_of.get(run)
        sends = t.c_sent if t else 0
        acked = t.c_acked if t else 0
        failed = t.c_failed if t else 0
        of_run = removed[run]
        totals = Totals(
            sends,
            acked,
            failed,
            sends - acked - failed,
            t.c_log if t else 0,
            t.c_deliveries if t else 0,
            expired=sum(n for (_, _, why), n in of_run.items() if why == "expired"),
            compacted=sum(n for (_, _, why), n in of_run.items() if why == "compacted"),
        )
        if not sends:
            problems[run].add("history has no send_invoke events")
        if log_missing:
            problems[run].add("topic contents unavailable")
        if run not in drained:
            problems[run].add("no drain_end events: the final drain did not run or was not recorded")
        result[run] = AuditFacts(
            run,
            anomalies,
            availability.get(run, Availability(None, None, None)),
            totals,
            tuple(sorted(problems[run])),
            policies.get(run, NO_POLICIES).removals(of_run),
        )
    return result


def _mark(row: Any, owners: tuple[tuple[str, str | None], ...]) -> Mark:
    return (row.mono, row.index, *owners[row.oid])


def _consumption_of(
    by_part: dict[str, list[Any]],
    bounds: dict[str, tuple[float, float]],
    owners: Owners,
    leaves: dict[tuple[str, str, int], list[Mark]],
) -> dict[str, Consumption]:
    """The consumer side per run from the ``consumer`` and ``lag`` parts (and the e2e ``stat``s): stalls as
    collected, handovers paired by the reference's :func:`~chaos.audit.facts.longest_handover`."""
    gaps: dict[str, list[ConsumeGap]] = defaultdict(list)
    service_gaps: dict[str, list[ConsumeGap]] = defaultdict(list)
    handovers: dict[str, list[Handover]] = defaultdict(list)
    for r in sorted(by_part["consumer"], key=lambda r: (r.run_id, r.topic, r.partition)):
        if r.c_gap is not None:
            gap = ConsumeGap(r.topic, r.partition, r.c_gap, r.c_start, r.c_end, r.c_resumed)
            (service_gaps if r.c_service else gaps)[r.run_id].append(gap)
        if r.c_service:
            continue
        moves = [(_mark(m.a, owners[r.run_id]), _mark(m.b, owners[r.run_id])) for m in r.moves]
        found = longest_handover(
            r.topic, r.partition, moves, leaves.get((r.run_id, r.topic, r.partition), ())
        )
        if found is not None:
            handovers[r.run_id].append(found)
    lags: dict[str, dict[int, int]] = defaultdict(dict)
    for r in by_part["lag"]:
        lags[r.run_id][r.point] = r.lag
    e2e: dict[str, dict[str, Any]] = defaultdict(dict)
    for r in by_part["stat"]:
        if r.phase == "e2e_all":
            e2e[r.run_id]["n"] = r.n
            e2e[r.run_id][f"p{r.p}"] = r.latency_ms
    result: dict[str, Consumption] = {}
    for run in bounds.keys() | e2e.keys():
        series: tuple[LagPoint, ...] = ()
        if run in bounds:
            first, last = bounds[run]
            n, step = lag_grid(first, last)
            series = tuple(LagPoint(first + i * step, lags[run].get(i, 0)) for i in range(n))
        stats = e2e.get(run, {})
        result[run] = Consumption(
            tuple(gaps[run]),
            LatencyStats(stats.get("n", 0), stats.get("p50"), stats.get("p99")),
            series,
            tuple(handovers[run]),
            tuple(service_gaps[run]),
        )
    return result


def _availability_of(
    by_part: dict[str, list[Any]], consumption: dict[str, Consumption]
) -> dict[str, Availability]:
    stats: dict[tuple[str, int, str], dict[str, Any]] = defaultdict(dict)
    for r in by_part["stat"]:
        entry = stats[(r.run_id, r.wid, r.phase)]
        entry["n"] = r.n
        entry[f"p{r.p}"] = r.latency_ms
    resume = {(r.run_id, r.wid): (r.to_ack, r.to_delivery) for r in by_part["resume"]}

    def phase(run: str, wid: int, name: str) -> LatencyStats:
        entry = stats.get((run, wid, name), {})
        return LatencyStats(entry.get("n", 0), entry.get("p50"), entry.get("p99"))

    windows: dict[str, list[FaultWindow]] = defaultdict(list)
    for r in sorted(by_part["window"], key=lambda r: (r.run_id, r.wid)):
        to_ack, to_delivery = resume.get((r.run_id, r.wid), (None, None))
        windows[r.run_id].append(
            FaultWindow(
                fault=r.fault,
                target=r.target,
                inject_mono=r.start,
                heal_mono=r.end,
                before=phase(r.run_id, r.wid, "before"),
                during=phase(r.run_id, r.wid, "during"),
                after=phase(r.run_id, r.wid, "after"),
                heal_to_first_ack_s=to_ack,
                heal_to_first_delivery_s=to_delivery,
                e2e_before=phase(r.run_id, r.wid, "e2e_before"),
                e2e_during=phase(r.run_id, r.wid, "e2e_during"),
                e2e_after=phase(r.run_id, r.wid, "e2e_after"),
            )
        )
    outages = {r.run_id: r for r in by_part["outage"]}
    result: dict[str, Availability] = {}
    for run in outages.keys() | windows.keys() | consumption.keys():
        o = outages.get(run)
        of_run = tuple(windows.get(run, ()))
        consumer = consumption.get(run, Consumption())
        result[run] = (
            Availability(o.gap, o.gap_start, o.gap_end, of_run, consumer)
            if o
            else Availability(None, None, None, of_run, consumer)
        )
    return result
