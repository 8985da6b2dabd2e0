"""Availability and latency: the longest outage, the fault windows with the latencies before, during and
after each and the time from its heal to the first ack and delivery, and the latency percentiles, on both
engines.

Spark (:func:`availability_parts`): the acks are scanned once and kept in memory; the longest gap between
acks is found inside one-second buckets and across bucket edges (no single-task sort of every ack), and the
nearest-rank latency percentiles through a histogram of log-scaled buckets (:func:`_percentiles`), so only
the distinct latencies (counted) of the buckets that hold a wanted rank are sorted. The fault windows are
paired on the driver by :func:`chaos.history.windows.fault_windows`, the reference's rule
(:func:`windows_frame`). The end-to-end latencies (each value's, on its first per-value row) go through the
same histogram.

Reference: :func:`run_availability`, :func:`e2e_samples`, :func:`latency_stats`.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from chaos.audit.checks.frames import local_frame
from chaos.audit.checks.transactions import Available
from chaos.audit.facts import (
    PERCENTILES,
    Availability,
    Consumption,
    FaultWindow,
    LatencyStats,
    nearest_rank,
)
from chaos.history.windows import fault_windows
from chaos.run.events import Delivery, Event, FaultEvent, SendInvoke, SendOutcome

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# latency histogram: 64 buckets per power of two (~1.1 % wide); latencies <= 0 share the lowest bucket
_BUCKETS_PER_OCTAVE: Final = 64
_LOWEST_BUCKET: Final = -(1 << 40)
_OUTAGE_BUCKET_S: Final = 1.0


# Spark


def fault_query(F: Any, control: DataFrame) -> DataFrame:
    """The fault events (few; ``control`` is in memory), for :func:`windows_frame` once collected."""
    # "wid", not "index": a Row is a tuple, whose .index is a method
    return control.where(F.col("kind") == "fault").select(
        "run_id", F.col("index").alias("wid"), "action", "fault", "target", "params", "mono"
    )


def windows_frame(spark: Any, faults: list[Any]) -> DataFrame:
    """One row per fault inject: ``(run_id, wid, fault, target, start, end)``, ``wid`` the inject's index,
    ``end`` the mono of the heal that :func:`~chaos.history.windows.fault_windows` pairs it with (null:
    never healed). ``faults``: the collected rows of :func:`fault_query`, paired on the driver by the same
    function as the reference's; the windows go back as a small frame."""
    faults = sorted(faults, key=lambda r: (r.run_id, r.wid))
    rows = []
    for run, of_run in itertools.groupby(faults, key=lambda r: r.run_id):
        for w in fault_windows(of_run):
            end = w.heal.mono if w.heal is not None else None
            rows.append((run, w.inject.wid, w.inject.fault, w.inject.target, w.inject.mono, end))
    return local_frame(
        spark,
        rows,
        "run_id string, wid long, fault string, target string, start double, end double",
    )


def availability_parts(
    F: Any,
    Window: Any,
    acks: DataFrame,
    deliveries: DataFrame,
    per_value: DataFrame,
    windows: DataFrame,
    runs: dict[str, tuple[float | None, float | None]],
) -> list[DataFrame]:
    """Parts (see :func:`chaos.audit.sparkjob.spark_audit`): the longest outage per run; the fault windows;
    per window and phase the ack count and the latencies at the wanted ranks, and the same for the
    end-to-end latencies (phases ``e2e_*``; ``e2e_all`` over the whole run, window ``-1``); the first ack /
    delivery after each heal.
    ``runs``: each run's first invoke and last send event (:func:`run_ends`)."""
    # the longest gap between consecutive distinct points: inside one-second buckets, and from each
    # non-empty bucket's last point to the next one's first; ties go to the earliest gap
    ends = [(run, mono) for run, of_run in runs.items() for mono in of_run if mono is not None]
    points = (
        acks.select("run_id", "mono")
        .unionByName(local_frame(acks.sparkSession, ends, "run_id string, mono double"))
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
        F.broadcast(local_frame(spark, [(p,) for p in PERCENTILES], "p int"))
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


def run_ends_query(F: Any, h: DataFrame) -> DataFrame:
    """Every run of the history, with its first invoke's and last send event's (invoke or outcome) mono —
    the ends of its outage search (one scan of the history, one row per run): :func:`run_ends` once
    collected."""
    kind, mono = F.col("kind"), F.col("mono")
    return h.groupBy("run_id").agg(
        F.min(F.when(kind == "send_invoke", mono)).alias("first"),
        F.max(F.when(kind.isin("send_invoke", "send_outcome"), mono)).alias("last"),
    )


def run_ends(rows: list[Any]) -> dict[str, tuple[float | None, float | None]]:
    """run_id -> the ends of its outage search, from the collected rows of :func:`run_ends_query`."""
    return {r.run_id: (r.first, r.last) for r in rows}


def availability_of(
    by_part: dict[str, list[Any]], consumption: dict[str, Consumption]
) -> dict[str, Availability]:
    """Each run's availability from the collected parts (``outage``, ``window``, ``stat``, ``resume``) and
    its ``consumption`` (:func:`chaos.audit.checks.consumer_side.consumption_of`)."""
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


# reference


def e2e_samples(
    available: list[Available], first_delivery: Mapping[str, tuple[float, int]]
) -> list[tuple[float, float]]:
    """End-to-end latency per delivered value: ``(available mono, ms)`` — from the earliest time one of its
    sends became readable by the group to its first delivery (by ``mono``)."""
    first_available: dict[str, float] = {}
    for v, _, mono, _ in available:
        if v not in first_available or mono < first_available[v]:
            first_available[v] = mono
    return [
        (first_available[v], (m - first_available[v]) * 1000.0)
        for v, (m, _) in first_delivery.items()
        if v in first_available
    ]


def run_availability(
    history: list[Event],
    faults: list[FaultEvent],
    e2e: list[tuple[float, float]],
    consumer: Consumption,
) -> Availability:
    """The run's availability from its ``history``: the longest gap between acks (from its first invoke to
    its last send event), and per fault window (paired from ``faults``) the ack and end-to-end (``e2e``)
    latencies before, during and after it and the time from its heal to the first ack and delivery."""
    acks = sorted(
        ((e.mono, e.latency_ms) for e in history if isinstance(e, SendOutcome) and e.outcome == "ok"),
        key=lambda ack: ack[0],
    )
    send_monos = [e.mono for e in history if isinstance(e, SendInvoke | SendOutcome)]
    invoke_monos = [e.mono for e in history if isinstance(e, SendInvoke)]
    points = sorted(
        {
            *(m for m, _ in acks),
            *([min(invoke_monos)] if invoke_monos else []),
            *([max(send_monos)] if send_monos else []),
        }
    )
    longest: tuple[float, float, float] | None = None
    for low, high in itertools.pairwise(points):
        gap = high - low
        if longest is None or gap > longest[0]:
            longest = (gap, low, high)
    delivery_monos = sorted(e.mono for e in history if isinstance(e, Delivery))
    windows: list[FaultWindow] = []
    for pair in fault_windows(faults):  # one window per inject (docs: chaos.history.windows)
        start = pair.inject.mono
        end = pair.heal.mono if pair.heal is not None else None
        before = [lat for m, lat in acks if m < start and lat is not None]
        during = [lat for m, lat in acks if m >= start and (end is None or m <= end) and lat is not None]
        after = [lat for m, lat in acks if end is not None and m > end and lat is not None]
        e2e_before = [ms for m, ms in e2e if m < start]
        e2e_during = [ms for m, ms in e2e if m >= start and (end is None or m <= end)]
        e2e_after = [ms for m, ms in e2e if end is not None and m > end]
        first_ack = next((m for m, _ in acks if end is not None and m > end), None)
        first_delivery = next((m for m in delivery_monos if end is not None and m > end), None)
        windows.append(
            FaultWindow(
                fault=pair.inject.fault,
                target=pair.inject.target,
                inject_mono=start,
                heal_mono=end,
                before=latency_stats(before),
                during=latency_stats(during),
                after=latency_stats(after),
                heal_to_first_ack_s=None if first_ack is None or end is None else first_ack - end,
                heal_to_first_delivery_s=None
                if first_delivery is None or end is None
                else first_delivery - end,
                e2e_before=latency_stats(e2e_before),
                e2e_during=latency_stats(e2e_during),
                e2e_after=latency_stats(e2e_after),
            )
        )
    if longest is None:
        return Availability(None, None, None, tuple(windows), consumer)
    return Availability(longest[0], longest[1], longest[2], tuple(windows), consumer)


def latency_stats(latencies: list[float]) -> LatencyStats:
    """The count and the nearest-rank percentiles (:data:`~chaos.audit.facts.PERCENTILES`) of
    ``latencies``."""
    ordered = sorted(latencies)
    p50, p99 = (nearest_rank(ordered, p) for p in PERCENTILES)
    return LatencyStats(len(ordered), p50, p99)
