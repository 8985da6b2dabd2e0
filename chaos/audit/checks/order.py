"""The order checks (docs/audit.md, "Order checks"): ``reordered`` and Jepsen's ``nonmonotonic_send``,
``poll_skip`` and ``nonmonotonic_poll``, on both engines.

Spark: the reorder chains and each producer's acks per partition share one window (:func:`send_chains`),
read from the per-value rows (:mod:`chaos.audit.checks.values`); the poll checks (:func:`poll_order`) walk
each consumer's deliveries of a partition and read the log only for the few pairs more than one offset
apart.

Reference: :func:`reordered`, :func:`send_order`, :func:`reference_poll_order`.
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from chaos.audit.checks.frames import broadcast_if_few
from chaos.audit.checks.transactions import Position
from chaos.audit.checks.values import Send
from chaos.audit.facts import AuditOptions, Example
from chaos.run.events import Delivery, SendInvoke, SendOutcome

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


# Spark


def send_chains(F: Any, Window: Any, per_value: DataFrame) -> DataFrame:
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


def poll_order(
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
    probe: bool = True,
) -> DataFrame:
    """``poll_skip`` and ``nonmonotonic_poll`` instances (docs/audit.md, "Order checks"). ``spans``: some
    attempt has a ``begin`` (without one no delivery is rolled back, and they are not looked for).

    First each consumer's (process, member) deliveries of a partition, the rolled-back ones left out, in
    record order (one shuffle of the deliveries): a delivery whose predecessor is at or above its offset,
    with no rebalance callback or seek of its process between them, is nonmonotonic; one whose predecessor
    is more than one offset below is a candidate skip. These few rows are materialised and counted. Only if
    there are candidates, the log at the group's isolation level — of the partitions that hold one — is
    sorted with each candidate's two ends: the running count of distinct visible offsets at its ends says
    whether a visible record lies strictly between them. ``probe``: count the rolled-back deliveries and
    the candidates (an action each) to skip what finds nothing; else every step runs (on no rows, none)."""
    rolled_back = per_value.where(F.col("rb_index").isNotNull()).select(
        "run_id", F.col("rb_index").alias("index")
    )
    n_rolled_back = rolled_back.count() if spans and probe else 0
    if n_rolled_back or (spans and not probe):
        deliveries = deliveries.join(
            broadcast_if_few(F, rolled_back, n_rolled_back), ["run_id", "index"], "left_anti"
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
    if probe and gaps.count() == 0:
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


# reference


def reordered(
    positions: dict[str, list[Position]], invokes: dict[str, Send], send_ts: Callable[[str], float]
) -> list[Example]:
    """``reordered``: per producer, key and partition, walk the values by (first) offset; a value whose seq
    is below its predecessor's is reordered."""
    found: list[Example] = []
    chains: dict[tuple[str, str | None, str, int], list[tuple[int, int, str]]] = defaultdict(list)
    for v, where in positions.items():
        send_info = invokes.get(v)
        if send_info is None:
            continue
        seen_partitions: set[tuple[str, int]] = set()
        for topic, partition, offset in where:
            if (topic, partition) not in seen_partitions:  # first offset of v in that partition
                seen_partitions.add((topic, partition))
                chains[(send_info.producer, send_info.key, topic, partition)].append(
                    (offset, send_info.seq, v)
                )
    for (_, _, topic, partition), chain in chains.items():
        chain.sort()
        for (_, prev_seq, _), (offset, seq, v) in itertools.pairwise(chain):
            if seq < prev_seq:
                found.append(Example(v, topic, partition, offset, send_ts(v)))
    return found


def reference_poll_order(
    deliveries: list[tuple[int, Delivery]],
    rolled_back: set[int],
    resets: dict[str, list[int]],
    visible: set[Position],
) -> tuple[list[Example], list[Example]]:
    """``poll_skip`` and ``nonmonotonic_poll``: each consumer's (``process``, ``member``) successive
    deliveries of one partition, rolled-back ones left out, unless a rebalance callback or a seek of its
    process was recorded between them. The later one is an instance when its offset is at or below the
    previous one's (nonmonotonic), or when a record visible at the group's isolation level lies strictly
    between the two (a skip)."""
    offsets: dict[tuple[str, int], list[int]] = defaultdict(list)
    for topic, partition, offset in sorted(visible):
        offsets[(topic, partition)].append(offset)
    last: dict[tuple[str, str | None, str, int], tuple[int, int]] = {}  # -> (index, offset)
    skips: list[Example] = []
    back: list[Example] = []
    for index, d in deliveries:
        if index in rolled_back:
            continue
        consumer = (d.process, d.member, d.topic, d.partition)
        previous = last.get(consumer)
        last[consumer] = (index, d.offset)
        if previous is None:
            continue
        p_index, p_offset = previous
        marks = resets.get(d.process, [])
        at = bisect.bisect_right(marks, p_index)
        if at < len(marks) and marks[at] < index:
            continue  # its position moved legitimately in between
        example = Example(d.value_id, d.topic, d.partition, d.offset, d.ts)
        if d.offset <= p_offset:
            back.append(example)
            continue
        of_partition = offsets.get((d.topic, d.partition), [])
        after = bisect.bisect_right(of_partition, p_offset)
        if after < len(of_partition) and of_partition[after] < d.offset:
            skips.append(example)
    return skips, back


def send_order(
    sends: dict[str, list[tuple[int, SendInvoke]]], answers: dict[str, list[tuple[int, SendOutcome]]]
) -> list[Example]:
    """``nonmonotonic_send``: per producer and partition, its sends acknowledged with an offset, in invoke
    order (the k-th outcome of a value answers its k-th invoke); a send acked at or below the previous
    one's offset is an instance (its value, ack position and outcome ts)."""
    acked: dict[tuple[str, str, int], list[tuple[int, int, str, float]]] = defaultdict(list)
    for v, made in sends.items():
        given = answers.get(v, [])
        for (index, e), (_, out) in zip(made, given, strict=False):
            if out.outcome == "ok" and out.partition is not None and out.offset is not None:
                acked[(e.producer, e.topic, out.partition)].append((index, out.offset, v, out.ts))
    found = []
    for (_, topic, partition), of_partition in acked.items():
        of_partition.sort()
        for (_, previous, _, _), (_, offset, v, ts) in itertools.pairwise(of_partition):
            if offset <= previous:
                found.append(Example(v, topic, partition, offset, ts))
    return found
