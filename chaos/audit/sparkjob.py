"""The audit as a PySpark job over DataFrames; returns exactly what
:func:`~chaos.audit.reference.reference_audit` returns.

Inputs are grouped by ``run_id``, so one job audits any number of runs (the property tests audit hundreds
of generated runs in one job; a real audit has one):

- ``history``: the wide history table (:func:`chaos.history.to_spark`, or ``createDataFrame`` of the Arrow
  table) — columns of :data:`HISTORY_COLUMNS` at least;
- ``log``: the topic's real contents, columns :data:`LOG_COLUMNS` (see :mod:`chaos.audit.source`), or
  ``None`` when the topic could not be read.

This module composes the checks of :mod:`chaos.audit.checks` (one module per family, each with its
reference part beside it) and gathers what they collect into facts. How it runs — the history's count (its
sizing, :mod:`chaos.audit.sizing`), one ``collect`` of the control facts the driver decides on (transaction
markers, topic policies, log starts, drain ends, the fault events, the group's first and last events, one
row per run; each run's send bounds; the revoke / lost callbacks:
:func:`~chaos.audit.checks.frames.collected`), then the parts' ``collect`` (and, when a transaction has a
``begin``, one row per attempt); each count that decides a branch and each local checkpoint is an action
too, except on a history below :data:`~chaos.audit.sizing.SMALL_HISTORY_BELOW_ROWS` events (the small
job's shape: 3 actions). No Python UDFs:

1. **Per value** (:func:`chaos.audit.checks.values.per_value`): about one row per value — its counts, its
   per-value anomaly instances, an observed position, a reorder-chain link, a readable record — the clean
   values from a hash aggregate alone, the others through a sort per value; the transactions' attempts
   (:mod:`chaos.audit.checks.transactions`) join them. That table is materialised as a local checkpoint
   (below). The anomaly instances (those decided per value, with the log policy's removals
   (:mod:`chaos.audit.checks.removals`), the send chains', the inconsistent offsets, the poll checks') are
   materialised once too (:func:`_instances`): two parts read them.
2. **Per check** (:func:`_parts`). The order checks (:mod:`chaos.audit.checks.order`) and the observed
   positions (inconsistent offsets: a distinct and a count, both hash aggregates) each shuffle only their
   rows; totals are summed with map-side partial aggregation; instances are counted and the first N kept
   per anomaly.
3. **Availability** (:mod:`chaos.audit.checks.availability`) reads the acks (scanned once and kept in
   memory, as are the history's few control events: rebalances, faults, drain ends, transaction markers):
   the longest outage, the fault windows and the latency percentiles.
4. **Consumer side** (:mod:`chaos.audit.checks.consumer_side`; docs/audit.md, "Consumer side") reads each
   send's readable record from the per-value rows and the deliveries (scanned once, kept in memory):
   stalls, owner changes, the lag series; handovers are paired on the driver.

Every frame that several parts read (the history's control events, acks and deliveries, the value
summary, the per-value rows, the instances, the fault windows) is a *local checkpoint*
(:mod:`chaos.audit.checks.frames`): its rows are computed once and kept by the executors (memory, then
disk), and what reads them is planned over those rows instead of over the plan that made them — the plans
Spark analyses, optimises and matches stay small (docs/audit.md, "Local checkpoints"). Below
:data:`~chaos.audit.sizing.SMALL_HISTORY_BELOW_ROWS` events they are lazy: the first job that reads one
computes it. They are released when the audit ends, whatever happens.

Only small per-run parts — counts, the first N examples per anomaly, availability figures, per partition
its longest stall and owner changes, the lag points — reach the driver, in one ``collect``. Jobs still
running after ``timeout_s`` (:data:`SPARK_AUDIT_TIMEOUT_S`) are cancelled and the audit raises
:class:`~chaos.errors.AuditError`.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final

from chaos.audit.checks import availability, consumer_side, frames, order, removals, transactions, values
from chaos.audit.facts import (
    ANOMALIES,
    DEFAULT_OPTIONS,
    AuditFacts,
    AuditOptions,
    Availability,
    Example,
    Mark,
    PartitionRange,
    Totals,
    make_report,
)
from chaos.audit.logpolicy import NO_POLICIES, LogPolicies
from chaos.audit.sizing import sized, small_history
from chaos.audit.spark import is_connect_session
from chaos.errors import AuditError
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
        log = frames.local_frame(
            spark,
            [],
            "run_id string, topic string, partition int, offset long, "
            "key string, value_id string, isolation string",
        )
    log = log.select(*LOG_COLUMNS)

    # materialised frames (local checkpoints: what reads them plans over their rows, not over the plan
    # that made them), released at the end whatever happens
    held: list[DataFrame] = []

    with _cancelled_after(spark, timeout_s), sized(h) as rows:
        small = small_history(rows)

        def hold(df: DataFrame) -> DataFrame:
            kept = frames.materialised(df, eager=not small)
            held.append(kept)
            return kept

        try:
            control, acks, deliveries = frames.scanned(F, h, hold)
            found = frames.collected(
                {
                    "driver": frames.driver_query(F, control),
                    "fault": availability.fault_query(F, control),
                    "bounds": consumer_side.bounds_query(F, control, deliveries),
                    "run": availability.run_ends_query(F, h),
                    "leave": consumer_side.leaves_query(F, control),
                }
            )
            driver_rows = frames.driver_rows(found["driver"])
            attempts, commits = transactions.attempts_by_run(driver_rows)
            # about one row per value; four consumers read it, each shuffling only what it needs
            per_value, scratch = values.per_value(
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
                probe=not small,
            )
            per_value = hold(per_value)  # materialised now, so what it was built from can go
            if not small:  # a lazy checkpoint still needs them: they go at the end
                for df in scratch:
                    frames.release(df)
            windows = hold(availability.windows_frame(spark, found["fault"]))  # small; read by three parts
            bounds, owners = consumer_side.group_bounds(found["bounds"])
            runs = availability.run_ends(found["run"])
            by_part: dict[str, list[Any]] = defaultdict(list)
            spans = any(a.begin is not None for of_run in attempts.values() for a in of_run)
            polls = order.poll_order(
                F, Window, control, deliveries, log, per_value, options, hold, spans=spans, probe=not small
            )
            policies = removals.log_policies(driver_rows)
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
            leaves = consumer_side.leaves(found["leave"])
        finally:
            for df in held:
                frames.release(df)
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
    owners: consumer_side.Owners,
    runs: dict[str, tuple[float | None, float | None]],
    options: AuditOptions,
    instances: DataFrame,
) -> DataFrame:
    """The union of every small per-run part the driver collects (column ``part`` names each);
    ``instances``: every anomaly instance (:func:`_instances`); ``bounds``, ``owners``:
    :func:`~chaos.audit.checks.consumer_side.group_bounds`; ``runs``:
    :func:`~chaos.audit.checks.availability.run_ends`."""
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
    parts = [
        examples.select(F.lit("example").alias("part"), "run_id", "anomaly", "n", "rn", *_EXAMPLE_COLUMNS),
        removals.removal_counts(F, instances),
        by_producer.withColumn("part", F.lit("by_producer")),
        ranges,
        per_value.groupBy("run_id")
        .agg(*(F.sum(c).alias(c) for c in values.COUNTS))
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
        *availability.availability_parts(F, Window, acks, deliveries, per_value, windows, runs),
        *consumer_side.consumer_parts(F, Window, deliveries, per_value, bounds, owners),
    ]
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part, allowMissingColumns=True)
    return union


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
    """Every anomaly instance: those decided per value (with the log policy's removals,
    :func:`~chaos.audit.checks.removals.removed`), the send chains'
    (:func:`~chaos.audit.checks.order.send_chains`), the inconsistent offsets
    (:func:`~chaos.audit.checks.values.inconsistent_instances`) and ``polls``
    (:func:`~chaos.audit.checks.order.poll_order`), held (``hold``) and materialised. Two parts read them
    (the examples and the counts per producer) and prune different columns, so Spark would not share the
    work between them."""
    per_value_instances = per_value.where(F.col("instances").isNotNull()).select(
        "run_id", F.inline("instances")
    )
    instances = (
        removals.removed(F, per_value_instances, per_value, policies, deliveries)
        .unionByName(order.send_chains(F, Window, per_value))
        .unionByName(values.inconsistent_instances(F, h, per_value))
    )
    return hold(instances.unionByName(polls))


def _facts(
    by_part: dict[str, list[Any]],
    runs: list[str],
    options: AuditOptions,
    *,
    log_missing: bool,
    bounds: dict[str, tuple[float, float]],
    owners: consumer_side.Owners,
    leaves: dict[tuple[str, str, int], list[Mark]],
    policies: dict[str, LogPolicies],
) -> dict[str, AuditFacts]:
    """The collected parts as one :class:`AuditFacts` per run (``runs``, sorted)."""
    removed = removals.removed_of(by_part["removal"])
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
    available = availability.availability_of(
        by_part, consumer_side.consumption_of(by_part, bounds, owners, leaves)
    )
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
        of_run = removed.get(run, {})
        expired, compacted = removals.removed_totals(of_run)
        totals = Totals(
            sends,
            acked,
            failed,
            sends - acked - failed,
            t.c_log if t else 0,
            t.c_deliveries if t else 0,
            expired=expired,
            compacted=compacted,
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
            available.get(run, Availability(None, None, None)),
            totals,
            tuple(sorted(problems[run])),
            policies.get(run, NO_POLICIES).removals(of_run),
        )
    return result
