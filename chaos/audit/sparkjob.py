"""The audit as a PySpark job over DataFrames; returns exactly what :func:`reference_audit` returns.

Inputs are grouped by ``run_id``, so one job audits any number of runs (the property tests audit hundreds
of generated runs in one job; a real audit has one):

- ``history``: the wide history table (:func:`chaos.history.to_spark`, or ``createDataFrame`` of the Arrow
  table) — columns of :data:`HISTORY_COLUMNS` at least;
- ``log``: the topic's real contents, columns :data:`LOG_COLUMNS` (see :mod:`chaos.audit.source`), or
  ``None`` when the topic could not be read.

Every anomaly becomes rows ``(anomaly, run_id, value_id, topic, partition, offset, ts)``; one window per
(run, anomaly) counts them and keeps the first N in :meth:`Example.sort_key` order.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any, Final

from chaos.audit.model import (
    ANOMALIES,
    DEFAULT_OPTIONS,
    PERCENTILES,
    AuditFacts,
    AuditOptions,
    Availability,
    Example,
    FaultWindow,
    LatencyStats,
    Totals,
    make_report,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

HISTORY_COLUMNS: Final[tuple[str, ...]] = (
    "index",
    "run_id",
    "kind",
    "ts",
    "mono",
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
    "fault",
    "target",
    "value_ids",
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


def spark_audit(
    history: DataFrame, log: DataFrame | None, options: AuditOptions = DEFAULT_OPTIONS
) -> dict[str, AuditFacts]:
    """Audit every run in ``history``; returns run_id -> facts. ``log`` ``None``: topic unreadable."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    h = history.select(*HISTORY_COLUMNS).cache()
    runs = sorted(r.run_id for r in h.select("run_id").distinct().collect())
    if not runs:
        return {}
    spark = history.sparkSession
    log_missing = log is None
    if log is None:
        log = spark.createDataFrame(
            [],
            "run_id string, topic string, partition int, offset long, "
            "key string, value_id string, isolation string",
        )
    log = log.select(*LOG_COLUMNS).cache()

    def kind(name: str) -> DataFrame:
        return h.where(F.col("kind") == name)

    def first_by_index(df: DataFrame, keys: list[str], cols: list[str]) -> DataFrame:
        return df.groupBy(*keys).agg(*(F.min_by(c, "index").alias(c) for c in cols))

    invokes = first_by_index(
        kind("send_invoke"), ["run_id", "value_id"], ["producer", "seq", "key", "topic", "ts", "mono"]
    )
    outcomes = first_by_index(
        kind("send_outcome"), ["run_id", "value_id"], ["outcome", "partition", "offset", "latency_ms", "ts"]
    ).select(
        "run_id",
        "value_id",
        *(F.col(c).alias("o_" + c) for c in ("outcome", "partition", "offset", "latency_ms", "ts")),
    )
    txn = (
        kind("txn")
        .where(F.col("action") != "begin")
        .select("run_id", F.explode("value_ids").alias("value_id"), "action", "outcome")
        .groupBy("run_id", "value_id")
        .agg(
            F.lit(True).alias("in_txn"),
            F.max((F.col("action") == "commit") & (F.col("outcome") == "ok")).alias("committed"),
            F.max((F.col("action") == "abort") & (F.col("outcome") == "ok")).alias("aborted"),
        )
    )
    send_failed = F.coalesce(F.col("o_outcome") == "fail", F.lit(False))
    aborted = F.coalesce(F.col("aborted"), F.lit(False))
    sends = (
        invokes.join(outcomes, ["run_id", "value_id"], "left")
        .join(txn, ["run_id", "value_id"], "left")
        .select(
            "run_id",
            "value_id",
            "producer",
            "seq",
            "key",
            "topic",
            "o_outcome",
            "o_partition",
            "o_offset",
            send_failed.alias("send_failed"),
            aborted.alias("aborted"),
            (send_failed | aborted).alias("failed"),
            F.coalesce(
                (F.col("o_outcome") == "ok")
                & ~aborted
                & (F.col("in_txn").isNull() | F.coalesce(F.col("committed"), F.lit(False))),
                F.lit(False),
            ).alias("acked"),
            F.coalesce(F.col("o_ts"), F.col("ts")).alias("send_ts"),
            F.col("o_ts"),
        )
        .cache()
    )
    records = log.select("run_id", "topic", "partition", "offset", "value_id").distinct().cache()
    first_pos = F.min(F.struct("topic", "partition", "offset"))
    vpos = (
        records.where(F.col("value_id").isNotNull())
        .groupBy("run_id", "value_id")
        .agg(F.count(F.lit(1)).alias("n_pos"), first_pos.alias("first"))
    )
    deliveries = kind("delivery")
    found: list[DataFrame] = []

    def add(
        name: str,
        df: DataFrame,
        value_id: Column | str,
        topic: Column | str,
        partition: Column | str,
        offset: Column | str,
        ts: Column | str,
    ) -> None:
        cols = [value_id, topic, partition, offset, ts]
        found.append(
            df.select(
                F.lit(name).alias("anomaly"),
                "run_id",
                *(
                    F.col(c).alias(n) if isinstance(c, str) else c.alias(n)
                    for c, n in zip(cols, _EXAMPLE_COLUMNS, strict=True)
                ),
            )
        )

    null_ts = F.lit(None).cast("double")
    lost = sends.join(vpos, ["run_id", "value_id"], "left_anti")
    add("lost_acked", lost.where("acked"), "value_id", "topic", "o_partition", "o_offset", "o_ts")
    add(
        "lost_indeterminate",
        lost.where(~F.col("acked") & ~F.col("failed")),
        "value_id",
        "topic",
        "o_partition",
        F.lit(None).cast("long"),
        "send_ts",
    )
    in_log = sends.join(vpos, ["run_id", "value_id"])
    delivered = deliveries.where(F.col("value_id").isNotNull()).select("run_id", "value_id").distinct()
    add(
        "unseen_by_group",
        in_log.where(~F.col("failed")).join(delivered, ["run_id", "value_id"], "left_anti"),
        "value_id",
        "first.topic",
        "first.partition",
        "first.offset",
        "send_ts",
    )
    add(
        "duplicate_in_log",
        in_log.where(F.col("n_pos") > 1),
        "value_id",
        "first.topic",
        "first.partition",
        "first.offset",
        "send_ts",
    )

    by_value = Window.partitionBy("run_id", "value_id").orderBy("index")
    redeliveries = (
        deliveries.where(F.col("value_id").isNotNull())
        .withColumn("prev", F.lag("index").over(by_value))
        .where(F.col("prev").isNotNull())
        .alias("d")
    )
    rebalances = kind("rebalance").select("run_id", F.col("index").alias("r_index")).alias("r")
    between = (
        (F.col("d.run_id") == F.col("r.run_id"))
        & (F.col("r.r_index") > F.col("d.prev"))
        & (F.col("r.r_index") < F.col("d.index"))
    )
    for name, how in (
        ("duplicate_delivery_after_rebalance", "left_semi"),
        ("duplicate_delivery_other", "left_anti"),
    ):
        add(
            name,
            redeliveries.join(F.broadcast(rebalances), between, how),
            "value_id",
            "topic",
            "partition",
            "offset",
            "ts",
        )

    chain = Window.partitionBy("run_id", "producer", "key", "topic", "partition").orderBy(
        "offset", "seq", "value_id"
    )
    firsts = (
        records.where(F.col("value_id").isNotNull())
        .groupBy("run_id", "value_id", "topic", "partition")
        .agg(F.min("offset").alias("offset"))
        .join(sends.select("run_id", "value_id", "producer", "seq", "key", "send_ts"), ["run_id", "value_id"])
        .withColumn("prev_seq", F.lag("seq").over(chain))
    )
    add(
        "reordered",
        firsts.where(F.col("seq") < F.col("prev_seq")),
        "value_id",
        "topic",
        "partition",
        "offset",
        "send_ts",
    )

    position = ["run_id", "topic", "partition", "offset", "value_id"]
    acked_at = (
        kind("send_outcome")
        .where((F.col("outcome") == "ok") & F.col("offset").isNotNull() & F.col("partition").isNotNull())
        .select("run_id", "value_id", "partition", "offset")
        .join(invokes.select("run_id", "value_id", "topic"), ["run_id", "value_id"])
        .select(*position)
    )
    observed = (
        records.select(*position)
        .unionByName(deliveries.select(*position))
        .unionByName(kind("drain_read").select(*position))
        .unionByName(acked_at)
        .groupBy("run_id", "topic", "partition", "offset")
        .agg(
            (F.countDistinct("value_id") + F.max(F.col("value_id").isNull().cast("int"))).alias("n"),
            F.min("value_id").alias("value_id"),
        )
    )
    add(
        "inconsistent_offsets",
        observed.where(F.col("n") > 1),
        "value_id",
        "topic",
        "partition",
        "offset",
        null_ts,
    )

    reads = (
        deliveries.select(*position, F.lit(options.group_isolation).alias("isolation"))
        .unionByName(log.select(*position, "isolation"))
        .join(sends.select("run_id", "value_id", "send_failed", "aborted", "send_ts"), ["run_id", "value_id"])
        .where(F.col("send_failed") | (F.col("aborted") & (F.col("isolation") == "read_committed")))
        .groupBy("run_id", "value_id")
        .agg(first_pos.alias("first"), F.first("send_ts").alias("send_ts"))
    )
    add("aborted_read", reads, "value_id", "first.topic", "first.partition", "first.offset", "send_ts")
    add(
        "unexpected",
        records.join(sends.select("run_id", "value_id"), ["run_id", "value_id"], "left_anti"),
        "value_id",
        "topic",
        "partition",
        "offset",
        null_ts,
    )

    union = found[0]
    for df in found[1:]:
        union = union.unionByName(df)
    per_anomaly = Window.partitionBy("run_id", "anomaly")
    ordered = per_anomaly.orderBy(*(F.col(c).asc_nulls_first() for c in _EXAMPLE_COLUMNS))
    keep = max(options.max_examples, 1)
    rows = (
        union.withColumn("n", F.count(F.lit(1)).over(per_anomaly))
        .withColumn("rn", F.row_number().over(ordered))
        .where(F.col("rn") <= keep)
        .collect()
    )
    counts: dict[tuple[str, str], int] = {}
    examples: dict[tuple[str, str], list[Example]] = defaultdict(list)
    for row in rows:
        counts[(row.run_id, row.anomaly)] = row.n
        if row.rn <= options.max_examples:
            examples[(row.run_id, row.anomaly)].append(
                Example(row.value_id, row.topic, row.partition, row.offset, row.ts)
            )

    totals = _totals(F, sends, records, deliveries)
    problems = _problems(F, h, runs, sends, log_missing=log_missing)
    availability = _availability(F, Window, h)
    result: dict[str, AuditFacts] = {}
    for run in runs:
        anomalies = tuple(
            (name, make_report(examples[(run, name)], counts.get((run, name), 0), options.max_examples))
            for name in ANOMALIES
        )
        result[run] = AuditFacts(
            run,
            anomalies,
            availability.get(run, Availability(None, None, None)),
            totals.get(run, Totals(0, 0, 0, 0, 0, 0)),
            problems[run],
        )
    for cached in (sends, records, h, log):
        cached.unpersist()
    return result


def _totals(F: Any, sends: DataFrame, records: DataFrame, deliveries: DataFrame) -> dict[str, Totals]:
    per_send = sends.groupBy("run_id").agg(
        F.count(F.lit(1)).alias("sends"),
        F.sum(F.col("acked").cast("long")).alias("acked"),
        F.sum(F.col("failed").cast("long")).alias("failed"),
        F.sum((~F.col("acked") & ~F.col("failed")).cast("long")).alias("indeterminate"),
    )
    per_log = records.groupBy("run_id").agg(F.count(F.lit(1)).alias("log_records"))
    per_delivery = deliveries.groupBy("run_id").agg(F.count(F.lit(1)).alias("deliveries"))
    joined = per_send.join(per_log, "run_id", "full").join(per_delivery, "run_id", "full").fillna(0)
    return {
        r.run_id: Totals(r.sends, r.acked, r.failed, r.indeterminate, r.log_records, r.deliveries)
        for r in joined.collect()
    }


def _problems(
    F: Any,
    h: DataFrame,
    runs: list[str],
    sends: DataFrame,
    *,
    log_missing: bool,
) -> dict[str, tuple[str, ...]]:
    found: dict[str, set[str]] = {run: set() for run in runs}
    with_sends = {r.run_id for r in sends.select("run_id").distinct().collect()}
    ends = (
        h.where(F.col("kind") == "drain_end")
        .groupBy("run_id", "topic", "partition", "isolation")
        .agg(F.max_by("outcome", "index").alias("outcome"), F.max_by("error", "index").alias("error"))
        .collect()
    )
    drained = {e.run_id for e in ends}
    for run in runs:
        if run not in with_sends:
            found[run].add("history has no send_invoke events")
        if log_missing:
            found[run].add("topic contents unavailable")
        if run not in drained:
            found[run].add("no drain_end events: the final drain did not run or was not recorded")
    for e in ends:
        if e.outcome != "ok":
            found[e.run_id].add(f"drain incomplete: {e.topic}[{e.partition}] {e.isolation} ({e.error})")
    return {run: tuple(sorted(problems)) for run, problems in found.items()}


def _availability(F: Any, Window: Any, h: DataFrame) -> dict[str, Availability]:
    acks = h.where((F.col("kind") == "send_outcome") & (F.col("outcome") == "ok")).select(
        "run_id", "mono", "latency_ms"
    )
    send_events = h.where(F.col("kind").isin("send_invoke", "send_outcome"))
    bounds = send_events.groupBy("run_id").agg(
        F.min(F.when(F.col("kind") == "send_invoke", F.col("mono"))).alias("first"),
        F.max("mono").alias("last"),
    )
    points = (
        acks.select("run_id", "mono")
        .unionByName(bounds.select("run_id", F.col("first").alias("mono")).where(F.col("mono").isNotNull()))
        .unionByName(bounds.select("run_id", F.col("last").alias("mono")))
        .distinct()
        .withColumn("start", F.lag("mono").over(Window.partitionBy("run_id").orderBy("mono")))
        .where(F.col("start").isNotNull())
        .withColumn("gap", F.col("mono") - F.col("start"))
        .withColumn(
            "rn",
            F.row_number().over(
                Window.partitionBy("run_id").orderBy(F.col("gap").desc(), F.col("start").asc())
            ),
        )
        .where(F.col("rn") == 1)
    )
    outage = {r.run_id: (r.gap, r.start, r.mono) for r in points.collect()}

    faults = h.where(F.col("kind") == "fault").select("run_id", "index", "action", "fault", "target", "mono")
    injects = faults.where(F.col("action") == "inject").alias("i")
    heals = faults.where(F.col("action") == "heal").alias("e")
    windows = (
        injects.join(
            heals,
            (F.col("i.run_id") == F.col("e.run_id"))
            & (F.col("i.fault") == F.col("e.fault"))
            & (F.col("i.target") == F.col("e.target"))
            & (F.col("e.index") > F.col("i.index")),
            "left",
        )
        .groupBy(
            F.col("i.run_id").alias("run_id"),
            F.col("i.index").alias("wid"),
            F.col("i.fault").alias("fault"),
            F.col("i.target").alias("target"),
            F.col("i.mono").alias("start"),
        )
        .agg(F.min_by(F.col("e.mono"), F.col("e.index")).alias("end"))
        .cache()
    )
    w = F.broadcast(windows)
    phased = (
        acks.where(F.col("latency_ms").isNotNull())
        .join(w, "run_id")
        .withColumn(
            "phase",
            F.when(F.col("mono") < F.col("start"), "before")
            .when(F.col("end").isNull() | (F.col("mono") <= F.col("end")), "during")
            .otherwise("after"),
        )
    )
    group = Window.partitionBy("run_id", "wid", "phase")
    ranked = phased.withColumn("n", F.count(F.lit(1)).over(group)).withColumn(
        "rank", F.row_number().over(group.orderBy("latency_ms"))
    )
    wanted = F.lit(False)
    for p in PERCENTILES:
        wanted = wanted | (F.col("rank") == F.expr(f"greatest(1, (n * {p} + 99) div 100)"))
    stats: dict[tuple[str, int, str], dict[str, Any]] = defaultdict(dict)
    for r in ranked.where(wanted).select("run_id", "wid", "phase", "n", "rank", "latency_ms").collect():
        entry = stats[(r.run_id, r.wid, r.phase)]
        entry["n"] = r.n
        for p in PERCENTILES:
            if r.rank == max(1, (p * r.n + 99) // 100):
                entry[f"p{p}"] = r.latency_ms

    def first_after(df: DataFrame, name: str) -> DataFrame:
        return (
            df.select("run_id", F.col("mono").alias("m"))
            .join(w.where(F.col("end").isNotNull()), "run_id")
            .where(F.col("m") > F.col("end"))
            .groupBy("run_id", "wid")
            .agg((F.min("m") - F.first("end")).alias(name))
        )

    resumed = (
        windows.join(first_after(acks, "to_ack"), ["run_id", "wid"], "left")
        .join(first_after(h.where(F.col("kind") == "delivery"), "to_delivery"), ["run_id", "wid"], "left")
        .orderBy("run_id", "wid")
        .collect()
    )
    windows.unpersist()
    per_run: dict[str, list[FaultWindow]] = defaultdict(list)

    def phase(run: str, wid: int, name: str) -> LatencyStats:
        entry = stats.get((run, wid, name), {})
        return LatencyStats(entry.get("n", 0), entry.get("p50"), entry.get("p99"))

    for r in resumed:
        per_run[r.run_id].append(
            FaultWindow(
                fault=r.fault,
                target=r.target,
                inject_mono=r.start,
                heal_mono=r.end,
                before=phase(r.run_id, r.wid, "before"),
                during=phase(r.run_id, r.wid, "during"),
                after=phase(r.run_id, r.wid, "after"),
                heal_to_first_ack_s=r.to_ack,
                heal_to_first_delivery_s=r.to_delivery,
            )
        )
    result: dict[str, Availability] = {}
    for run in set(outage) | set(per_run):
        gap = outage.get(run)
        windows_of_run = tuple(per_run.get(run, ()))
        result[run] = (
            Availability(gap[0], gap[1], gap[2], windows_of_run)
            if gap is not None
            else Availability(None, None, None, windows_of_run)
        )
    return result
