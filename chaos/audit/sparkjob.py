"""The audit as a PySpark job over DataFrames; returns exactly what :func:`reference_audit` returns.

Inputs are grouped by ``run_id``, so one job audits any number of runs (the property tests audit hundreds
of generated runs in one job; a real audit has one):

- ``history``: the wide history table (:func:`chaos.history.to_spark`, or ``createDataFrame`` of the Arrow
  table) — columns of :data:`HISTORY_COLUMNS` at least;
- ``log``: the topic's real contents, columns :data:`LOG_COLUMNS` (see :mod:`chaos.audit.source`), or
  ``None`` when the topic could not be read.

How it runs: the whole audit is **one Spark action** — a single query, the union of small per-run
parts (totals, drain ends, outage, fault windows, latency ranks, and the counted, truncated anomaly
examples), collected once (adaptive execution still splits it into ~35 jobs). Inside it:

- the history's value events (first invoke, first outcome, transaction markers, deliveries) are reduced
  to one row per ``(run_id, value_id)`` by a hash aggregation (partial aggregation on the map side, since a
  value's events sit close together in the file); that table is persisted, since most anomalies read it;
- the log is shuffled once by ``(run_id, value_id)``; its distinct records (persisted), first offsets per
  partition and per-value positions are then aggregated without another shuffle;
- positions (inconsistent offsets), per-key chains (reordering) and per-value deliveries (duplicate
  deliveries) take one shuffle each; the availability figures read narrow projections of the history;
- every anomaly becomes rows ``(anomaly, run_id, value_id, topic, partition, offset, ts)``; one window
  per (run, anomaly) counts them and keeps the first N in :meth:`Example.sort_key` order.

No Python UDFs; only the small per-run parts reach the driver.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
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
_VALUE_KINDS: Final = ("send_invoke", "send_outcome", "delivery")


def spark_audit(
    history: DataFrame, log: DataFrame | None, options: AuditOptions = DEFAULT_OPTIONS
) -> dict[str, AuditFacts]:
    """Audit every run in ``history``; returns run_id -> facts. ``log`` ``None``: topic unreadable."""
    from pyspark import StorageLevel
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    # computed once: the per-value tables that many parts of the query read
    cached: list[DataFrame] = []

    def keep(df: DataFrame) -> DataFrame:
        cached.append(df.persist(StorageLevel.MEMORY_AND_DISK))
        return df

    h = history.select(*HISTORY_COLUMNS)  # Parquet, read column-pruned where needed (caching it was slower)
    spark = history.sparkSession
    log_missing = log is None
    if log is None:
        log = spark.createDataFrame(
            [],
            "run_id string, topic string, partition int, offset long, "
            "key string, value_id string, isolation string",
        )
    log = log.select(*LOG_COLUMNS)
    kind = F.col("kind")
    null_ts = F.lit(None).cast("double")
    null_long = F.lit(None).cast("long")
    pos = F.struct("topic", "partition", "offset")

    # --- one row per (run_id, value_id) from the history (hash aggregation, one shuffle) ---------------
    value_events = h.where(kind.isin(*_VALUE_KINDS) & F.col("value_id").isNotNull()).select(
        "run_id", "value_id", "kind", "index", "ts", "producer", "seq", "key", "topic", "partition",
        "offset", "outcome", F.lit(None).cast("string").alias("action"),
    )  # fmt: skip
    txn_events = h.where((kind == "txn") & (F.col("action") != "begin")).select(
        "run_id", F.explode("value_ids").alias("value_id"), "kind", "index", "ts", "producer", "seq",
        "key", "topic", "partition", "offset", "outcome", "action",
    )  # fmt: skip
    is_txn = kind == "txn"
    ok = F.col("outcome") == "ok"
    per_value = keep(
        value_events.unionByName(txn_events)
        .groupBy("run_id", "value_id")
        .agg(
            F.min(
                F.when(kind == "send_invoke", F.struct("index", "producer", "seq", "key", "topic", "ts"))
            ).alias("inv"),
            F.min(
                F.when(kind == "send_outcome", F.struct("index", "outcome", "partition", "offset", "ts"))
            ).alias("out"),
            F.max(is_txn).alias("in_txn"),
            F.max(is_txn & (F.col("action") == "commit") & ok).alias("committed"),
            F.max(is_txn & (F.col("action") == "abort") & ok).alias("aborted"),
            F.count_if(kind == "delivery").alias("n_deliveries"),
            F.min(F.when(kind == "delivery", pos)).alias("delivery_min"),
        )
    )
    send_failed = F.coalesce(F.col("out.outcome") == "fail", F.lit(False))
    aborted = F.coalesce(F.col("aborted"), F.lit(False))
    acked = F.coalesce(
        (F.col("out.outcome") == "ok")
        & ~aborted
        & (F.col("in_txn").isNull() | ~F.col("in_txn") | F.coalesce(F.col("committed"), F.lit(False))),
        F.lit(False),
    )
    sends = per_value.where(F.col("inv").isNotNull()).select(
        "run_id",
        "value_id",
        "inv",
        "out",
        (F.col("n_deliveries") > 0).alias("delivered"),
        "delivery_min",
        send_failed.alias("send_failed"),
        aborted.alias("aborted"),
        (send_failed | aborted).alias("failed"),
        acked.alias("acked"),
        F.coalesce(F.col("out.ts"), F.col("inv.ts")).alias("send_ts"),
    )

    # --- the log: one shuffle by (run_id, value_id); distinct records and per-value positions --------
    records = keep(
        log.repartition("run_id", "value_id")
        .groupBy("run_id", "value_id", "topic", "partition", "offset")
        .agg(F.max(F.col("isolation") == "read_committed").alias("committed_read"))
    )
    firsts = (
        records.where(F.col("value_id").isNotNull())
        .groupBy("run_id", "value_id", "topic", "partition")
        .agg(
            F.min("offset").alias("offset"),
            F.count(F.lit(1)).alias("n"),
            F.min(F.when(F.col("committed_read"), F.col("offset"))).alias("committed_offset"),
        )
    )
    in_log = firsts.groupBy("run_id", "value_id").agg(
        F.sum("n").alias("n_pos"),
        F.min(pos).alias("first"),
        F.min(
            F.when(
                F.col("committed_offset").isNotNull(),
                F.struct("topic", "partition", F.col("committed_offset").alias("offset")),
            )
        ).alias("committed_first"),
    )
    values = sends.join(in_log, ["run_id", "value_id"], "left")

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

    lost = values.where(F.col("first").isNull())
    add("lost_acked", lost.where("acked"), "value_id", "inv.topic", "out.partition", "out.offset", "out.ts")
    add(
        "lost_indeterminate",
        lost.where(~F.col("acked") & ~F.col("failed")),
        "value_id",
        "inv.topic",
        "out.partition",
        null_long,
        "send_ts",
    )
    seen = values.where(F.col("first").isNotNull())
    first_at = ("first.topic", "first.partition", "first.offset")
    add(
        "unseen_by_group",
        seen.where(~F.col("failed") & ~F.col("delivered")),
        "value_id",
        *first_at,
        "send_ts",
    )
    add("duplicate_in_log", seen.where(F.col("n_pos") > 1), "value_id", *first_at, "send_ts")

    # aborted reads: deliveries (read at group_isolation) and log records (each at its level)
    committed_reads = (
        F.least("committed_first", "delivery_min")
        if options.group_isolation == "read_committed"
        else F.col("committed_first")
    )
    bad = F.when(F.col("send_failed"), F.least("first", "delivery_min")).when(
        F.col("aborted"), committed_reads
    )
    bad_reads = values.select("run_id", "value_id", "send_ts", bad.alias("bad")).where(
        F.col("bad").isNotNull()
    )
    add("aborted_read", bad_reads, "value_id", "bad.topic", "bad.partition", "bad.offset", "send_ts")

    sent = sends.select("run_id", "value_id")
    add(
        "unexpected",
        records.where(F.col("value_id").isNull()).unionByName(
            records.where(F.col("value_id").isNotNull()).join(sent, ["run_id", "value_id"], "left_anti")
        ),
        "value_id",
        "topic",
        "partition",
        "offset",
        null_ts,
    )

    # reordering: per (producer, key, topic, partition), values by their first offset there
    chain = Window.partitionBy("run_id", "producer", "key", "topic", "partition").orderBy(
        "offset", "seq", "value_id"
    )
    reordered = (
        firsts.select("run_id", "value_id", "topic", "partition", "offset")
        .join(
            sends.select(
                "run_id", "value_id", "send_ts", F.col("inv.producer").alias("producer"),
                F.col("inv.seq").alias("seq"), F.col("inv.key").alias("key"),
            ),
            ["run_id", "value_id"],
        )
        .withColumn("prev_seq", F.lag("seq").over(chain))
        .where(F.col("seq") < F.col("prev_seq"))
    )  # fmt: skip
    add("reordered", reordered, "value_id", "topic", "partition", "offset", "send_ts")

    # duplicate deliveries: a delivery of a value delivered before; was there a rebalance in between?
    deliveries = h.where(kind == "delivery")
    by_value = Window.partitionBy("run_id", "value_id").orderBy("index")
    redeliveries = (
        deliveries.where(F.col("value_id").isNotNull())
        .select("run_id", "value_id", "index", "topic", "partition", "offset", "ts")
        .withColumn("prev", F.lag("index").over(by_value))
        .where(F.col("prev").isNotNull())
        .alias("d")
    )
    rebalances = h.where(kind == "rebalance").select("run_id", F.col("index").alias("r_index")).alias("r")
    between = (
        (F.col("d.run_id") == F.col("r.run_id"))
        & (F.col("r.r_index") > F.col("d.prev"))
        & (F.col("r.r_index") < F.col("d.index"))
    )
    for name, how in (
        ("duplicate_delivery_after_rebalance", "left_semi"),
        ("duplicate_delivery_other", "left_anti"),
    ):
        add(name, redeliveries.join(F.broadcast(rebalances), between, how), "value_id", "topic", "partition",
            "offset", "ts")  # fmt: skip

    # inconsistent offsets: one position, two or more values (a foreign payload counts as one)
    position = ["run_id", "topic", "partition", "offset", "value_id"]
    acked_at = values.where(
        (F.col("out.outcome") == "ok") & F.col("out.offset").isNotNull() & F.col("out.partition").isNotNull()
    ).select("run_id", F.col("inv.topic").alias("topic"), "out.partition", "out.offset", "value_id")
    observed = (
        records.select(*position)
        .unionByName(h.where(kind.isin("delivery", "drain_read")).select(*position))
        .unionByName(acked_at)
        .groupBy("run_id", "topic", "partition", "offset")
        .agg(
            F.min("value_id").alias("value_id"),
            F.max("value_id").alias("last"),
            F.max(F.col("value_id").isNull()).alias("foreign"),
        )
        .where((F.col("value_id") < F.col("last")) | (F.col("foreign") & F.col("value_id").isNotNull()))
    )
    add("inconsistent_offsets", observed, "value_id", "topic", "partition", "offset", null_ts)

    union = found[0]
    for df in found[1:]:
        union = union.unionByName(df)
    per_anomaly = Window.partitionBy("run_id", "anomaly")
    ordered = per_anomaly.orderBy(*(F.col(c).asc_nulls_first() for c in _EXAMPLE_COLUMNS))
    top = max(options.max_examples, 1)
    examples = (
        union.withColumn("n", F.count(F.lit(1)).over(per_anomaly))
        .withColumn("rn", F.row_number().over(ordered))
        .where(F.col("rn") <= top)
    )

    # --- per run: totals, drain ends, availability; one union of small parts, collected once -----------
    parts = [
        examples.select(F.lit("example").alias("part"), "run_id", "anomaly", "n", "rn", *_EXAMPLE_COLUMNS),
        h.groupBy("run_id")
        .agg(F.count_if(kind == "delivery").alias("deliveries"))
        .withColumn("part", F.lit("run")),
        values.groupBy("run_id")
        .agg(
            F.count(F.lit(1)).alias("sends"),
            F.count_if("acked").alias("acked"),
            F.count_if("failed").alias("failed"),
            F.count_if(~F.col("acked") & ~F.col("failed")).alias("indeterminate"),
        )
        .withColumn("part", F.lit("totals")),
        records.groupBy("run_id")
        .agg(F.count(F.lit(1)).alias("log_records"))
        .withColumn("part", F.lit("log")),
        h.where(kind == "drain_end")
        .groupBy(
            "run_id",
            F.col("topic").alias("end_topic"),
            F.col("partition").alias("end_partition"),
            F.col("isolation").alias("end_isolation"),
        )
        .agg(F.max_by("outcome", "index").alias("end_outcome"), F.max_by("error", "index").alias("end_error"))
        .withColumn("part", F.lit("end")),
        *_availability(F, Window, h, keep),
    ]
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part, allowMissingColumns=True)
    by_part: dict[str, list[Any]] = defaultdict(list)
    for row in union.collect():
        by_part[row.part].append(row)

    runs = sorted(r.run_id for r in by_part["run"])
    counts: dict[tuple[str, str], int] = {}
    found_examples: dict[tuple[str, str], list[Example]] = defaultdict(list)
    for e in by_part["example"]:
        counts[(e.run_id, e.anomaly)] = e.n
        if e.rn <= options.max_examples:
            found_examples[(e.run_id, e.anomaly)].append(
                Example(e.value_id, e.topic, e.partition, e.offset, e.ts)
            )
    deliveries_of = {r.run_id: r.deliveries for r in by_part["run"]}
    totals_of = {r.run_id: r for r in by_part["totals"]}
    log_records_of = {r.run_id: r.log_records for r in by_part["log"]}
    problems: dict[str, set[str]] = {run: set() for run in runs}
    drained: set[str] = set()
    for e in by_part["end"]:
        drained.add(e.run_id)
        if e.end_outcome != "ok":
            problems[e.run_id].add(
                f"drain incomplete: {e.end_topic}[{e.end_partition}] {e.end_isolation} ({e.end_error})"
            )
    availability = _availability_of(by_part)
    result: dict[str, AuditFacts] = {}
    for run in runs:
        anomalies = tuple(
            (name, make_report(found_examples[(run, name)], counts.get((run, name), 0), options.max_examples))
            for name in ANOMALIES
        )
        t = totals_of.get(run)
        totals = Totals(
            t.sends if t else 0,
            t.acked if t else 0,
            t.failed if t else 0,
            t.indeterminate if t else 0,
            log_records_of.get(run, 0),
            deliveries_of[run],
        )
        if t is None:
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
        )
    for df in cached:
        df.unpersist()
    return result


def _availability(
    F: Any, Window: Any, h: DataFrame, keep: Callable[[DataFrame], DataFrame]
) -> list[DataFrame]:
    """Parts (see :func:`spark_audit`): the longest outage per run; the fault windows; per window the
    latency ranks the percentiles need and the first ack / delivery after the heal."""
    kind = F.col("kind")
    acks = h.where((kind == "send_outcome") & (F.col("outcome") == "ok")).select(
        "run_id", "mono", "latency_ms"
    )
    send_events = kind.isin("send_invoke", "send_outcome")
    bounds = (
        h.where(send_events)
        .groupBy("run_id")
        .agg(F.min(F.when(kind == "send_invoke", F.col("mono"))).alias("first"), F.max("mono").alias("last"))
    )
    # consecutive distinct points: a zero gap is a repeated point; ties go to the earliest gap
    outage = (
        acks.select("run_id", "mono")
        .unionByName(bounds.select("run_id", F.col("first").alias("mono")).where(F.col("mono").isNotNull()))
        .unionByName(bounds.select("run_id", F.col("last").alias("mono")))
        .withColumn("gap_start", F.lag("mono").over(Window.partitionBy("run_id").orderBy("mono")))
        .withColumn("gap", F.col("mono") - F.col("gap_start"))
        .where(F.col("gap") > 0)
        .groupBy("run_id")
        .agg(F.max(F.struct("gap", (-F.col("gap_start")).alias("neg_start"), "gap_start", "mono")).alias("o"))
        .select(
            F.lit("outage").alias("part"),
            "run_id",
            F.col("o.gap").alias("gap"),
            F.col("o.gap_start").alias("gap_start"),
            F.col("o.mono").alias("gap_end"),
        )
    )

    faults = h.where(kind == "fault").select("run_id", "index", "action", "fault", "target", "mono")
    injects = faults.where(F.col("action") == "inject").alias("i")
    heals = faults.where(F.col("action") == "heal").alias("e")
    windows = keep(
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
    )
    # acks (phase by their mono) and deliveries, per window: one shuffle by (run_id, wid)
    phase = (
        F.when(F.col("is_delivery"), "delivery")
        .when(F.col("latency_ms").isNull(), "none")
        .when(F.col("mono") < F.col("start"), "before")
        .when(F.col("end").isNull() | (F.col("mono") <= F.col("end")), "during")
        .otherwise("after")
    )
    phased = (
        acks.withColumn("is_delivery", F.lit(False))
        .unionByName(
            h.where(kind == "delivery").select(
                "run_id",
                "mono",
                F.lit(None).cast("double").alias("latency_ms"),
                F.lit(True).alias("is_delivery"),
            )
        )
        .join(F.broadcast(windows.select("run_id", "wid", "start", "end")), "run_id")
        .select("run_id", "wid", "mono", "latency_ms", "end", phase.alias("phase"))
        .repartition("run_id", "wid")
    )
    by_window = Window.partitionBy("run_id", "wid")
    by_phase = Window.partitionBy("run_id", "wid", "phase")
    after_heal = F.col("end").isNotNull() & (F.col("mono") > F.col("end"))
    is_ack = F.col("phase") != "delivery"
    is_stat = F.col("phase").isin("before", "during", "after")
    wanted = F.lit(False)
    for p in PERCENTILES:
        wanted = wanted | (F.col("rank") == F.expr(f"greatest(1, (n * {p} + 99) div 100)"))
    stats = (
        phased.withColumn(
            "to_ack", F.min(F.when(is_ack & after_heal, F.col("mono"))).over(by_window) - F.col("end")
        )
        .withColumn(
            "to_delivery", F.min(F.when(~is_ack & after_heal, F.col("mono"))).over(by_window) - F.col("end")
        )
        .withColumn("n", F.count(F.lit(1)).over(by_phase))
        .withColumn("rank", F.row_number().over(by_phase.orderBy("latency_ms")))
        .withColumn("row", F.row_number().over(by_window.orderBy("phase", "mono")))
        .where((is_stat & wanted) | (F.col("row") == 1))
        .select(
            F.lit("stat").alias("part"),
            "run_id",
            "wid",
            "phase",
            "n",
            "rank",
            "latency_ms",
            "to_ack",
            "to_delivery",
        )
    )
    return [
        outage,
        windows.select(F.lit("window").alias("part"), "run_id", "wid", "fault", "target", "start", "end"),
        stats,
    ]


def _availability_of(by_part: dict[str, list[Any]]) -> dict[str, Availability]:
    stats: dict[tuple[str, int, str], dict[str, Any]] = defaultdict(dict)
    resume: dict[tuple[str, int], tuple[float | None, float | None]] = {}
    for r in by_part["stat"]:
        resume[(r.run_id, r.wid)] = (r.to_ack, r.to_delivery)
        if r.phase not in ("before", "during", "after"):
            continue
        entry = stats[(r.run_id, r.wid, r.phase)]
        entry["n"] = r.n
        for p in PERCENTILES:
            if r.rank == max(1, (p * r.n + 99) // 100):
                entry[f"p{p}"] = r.latency_ms

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
            )
        )
    outages = {r.run_id: r for r in by_part["outage"]}
    result: dict[str, Availability] = {}
    for run in outages.keys() | windows.keys():
        o = outages.get(run)
        of_run = tuple(windows.get(run, ()))
        result[run] = (
            Availability(o.gap, o.gap_start, o.gap_end, of_run)
            if o
            else Availability(None, None, None, of_run)
        )
    return result
