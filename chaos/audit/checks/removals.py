"""The log-policy check (docs/audit.md, "What Kafka removes on purpose"): which acknowledged values the log
no longer holds because the topic's policy removed them — ``expired`` or ``compacted``, totals, not
anomalies, with ``expired_unread`` beside an expired value the group never read — by the rule of
:mod:`chaos.audit.logpolicy`, on both engines.

Spark: :func:`log_policies` builds each run's policies on the driver; :func:`removed` renames the
``lost_acked`` instances the rule explains. Reference: :func:`policies_of` and :func:`placements`, read by
the per-value check (:func:`chaos.audit.checks.values.judge_values`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from chaos.audit.checks.frames import local_frame
from chaos.audit.checks.transactions import Position, Transactions
from chaos.audit.checks.values import Send
from chaos.audit.logpolicy import REMOVAL_KINDS, LogPolicies
from chaos.run.events import Delivery, DrainEnd, LogStart, TopicPolicy

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


# Spark


def log_policies(rows: list[Any]) -> dict[str, LogPolicies]:
    """Each run's topic policies and partitions' log starts (:class:`~chaos.audit.logpolicy.LogPolicies`,
    built by the reference's function from the few rows that say them:
    :func:`~chaos.audit.checks.frames.driver_rows`)."""
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


def removed(
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
    ends = local_frame(
        spark,
        [
            (run, topic, partition, end.log_start, end.deleted_to, p.tombstones_gone_after(topic, partition))
            for run, p in active.items()
            for (topic, partition), end in p.partitions.items()
        ],
        "run_id string, topic string, partition int, log_start long, deleted_to long, gone_after double",
    )
    rules = local_frame(
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


def removal_counts(F: Any, instances: DataFrame) -> DataFrame:
    """Part ``removal``: per run, partition and kind the instances :func:`removed` named ``expired`` or
    ``compacted`` and the ``expired_unread`` ones, counted."""
    return (
        instances.where(F.col("anomaly").isin(*REMOVAL_KINDS, "expired_unread"))
        .groupBy(
            "run_id", F.col("topic").alias("rm_topic"), F.col("partition").alias("rm_partition"), "anomaly"
        )
        .agg(F.count(F.lit(1)).alias("n"))
        .withColumn("part", F.lit("removal"))
    )


def removed_of(rows: list[Any]) -> dict[str, dict[tuple[str, int, str], int]]:
    """Per run, the collected ``removal`` part's counts: ``(topic, partition, kind) -> n``."""
    removed: dict[str, dict[tuple[str, int, str], int]] = defaultdict(dict)
    for e in rows:
        removed[e.run_id][(e.rm_topic, e.rm_partition, e.anomaly)] = e.n
    return removed


# both engines


def removed_totals(counts: Mapping[tuple[str, int, str], int]) -> tuple[int, int]:
    """``(expired, compacted)``: a run's totals of what the log policy removed, from its counts per
    ``(topic, partition, kind)``."""
    return (
        sum(n for (_, _, why), n in counts.items() if why == "expired"),
        sum(n for (_, _, why), n in counts.items() if why == "compacted"),
    )


# reference


def policies_of(
    policies: list[TopicPolicy], starts: list[LogStart], drain_ends: list[DrainEnd]
) -> LogPolicies:
    """The run's topic policies and partitions' log starts, from its ``topic_policy``, ``log_start`` and
    ``drain_end`` events."""
    return LogPolicies.build(
        (
            (p.topic, p.cleanup_policy, p.retention_ms, p.retention_bytes, p.delete_retention_ms)
            for p in policies
        ),
        ((s.topic, s.partition, s.offset, s.action) for s in starts),
        ((d.topic, d.partition, d.outcome, d.low_offset, d.ts) for d in drain_ends),
    )


def placements(
    txn: Transactions,
    deliveries: list[tuple[int, Delivery]],
    invokes: dict[str, Send],
    log_policies: LogPolicies,
) -> tuple[dict[tuple[str, str, int], int], dict[tuple[str, int, str | None], str]]:
    """What the log policy's rule reads besides the policies: ``(read_at, latest)`` — where the group first
    read each value acked without an offset (:func:`first_reads`; empty when nothing can have been removed),
    and per key the value compaction keeps (:func:`latest_of_keys`; empty when no topic is compacted)."""
    read_at = first_reads(deliveries, acked_without_offset(txn)) if log_policies.active() else {}
    latest = latest_of_keys(placed_acks(txn, read_at), invokes) if log_policies.compacting() else {}
    return read_at, latest


def acked_without_offset(txn: Transactions) -> set[str]:
    """The values whose first ack names no offset — librdkafka acknowledges a retried batch the broker
    already held (``DUPLICATE_SEQUENCE_NUMBER``) without one."""
    return {v for v, (_, ack) in txn.first_ack.items() if ack.offset is None}


def first_reads(deliveries: list[tuple[int, Delivery]], values: set[str]) -> dict[tuple[str, str, int], int]:
    """Per (value, topic, partition) of ``values`` the lowest offset the group read it at."""
    first: dict[tuple[str, str, int], int] = {}
    for _, d in deliveries:
        if d.value_id not in values or d.partition is None or d.offset is None:
            continue
        slot = (d.value_id, d.topic, d.partition)
        first[slot] = min(first.get(slot, d.offset), d.offset)
    return first


def placed_acks(txn: Transactions, read_at: Mapping[tuple[str, str, int], int]) -> list[tuple[str, Position]]:
    """Every acknowledged position (:attr:`~chaos.audit.checks.transactions.Transactions.acked_at`), and
    for a value whose first ack names no offset (:func:`acked_without_offset`) the offset the group first
    read it at there, when it did."""
    placed = list(txn.acked_at)
    for v, (topic, ack) in txn.first_ack.items():
        if ack.offset is None and ack.partition is not None:
            offset = read_at.get((v, topic, ack.partition))
            if offset is not None:
                placed.append((v, (topic, ack.partition, offset)))
    return placed


def latest_of_keys(
    acked_at: list[tuple[str, Position]], invokes: dict[str, Send]
) -> dict[tuple[str, int, str | None], str]:
    """Per (topic, partition, key) the value whose acknowledged record there has the highest offset (ties:
    the greatest value id): what compaction keeps of that key."""
    best: dict[tuple[str, int, str | None], tuple[int, str]] = {}
    for v, (topic, partition, offset) in acked_at:
        key = invokes[v].key
        if key is None:
            continue
        slot = (topic, partition, key)
        if slot not in best or (offset, v) > best[slot]:
            best[slot] = (offset, v)
    return {slot: v for slot, (_, v) in best.items()}
