"""The consumer side (docs/audit.md, "Consumer side"): per partition the group delivered from its longest
stall and handover, the group's offset lag, and a service's input partitions' stalls, on both engines.

Spark (:func:`consumer_parts`): each send's readable record comes from the per-value rows
(:mod:`chaos.audit.checks.values`) and the deliveries are scanned once, kept in memory; one window per
partition finds its stalls and owner changes, one aggregate per partition keeps its longest stall; the lag
is bucketed by point (hash aggregate) with a running maximum over at most 120 points per partition. The
group's first and last events are collected first (:func:`group_bounds`, one row per run), so the series'
points are laid out on the driver by :func:`chaos.audit.facts.lag_grid`; handovers are paired there by
:func:`chaos.audit.facts.longest_handover`, with the revoke / lost callbacks (:func:`leaves`, few).

Reference: :func:`group_consumption`, :func:`first_deliveries`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from chaos.audit.checks.availability import latency_stats
from chaos.audit.checks.frames import local_frame
from chaos.audit.checks.transactions import Available
from chaos.audit.facts import (
    ConsumeGap,
    Consumption,
    Handover,
    LagPoint,
    LatencyStats,
    Mark,
    lag_grid,
    lag_point,
    longest_handover,
)
from chaos.run.events import Delivery, Rebalance

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

Row = tuple[float, int, int, int, Delivery | None]
"""A partition's readable record (kind 0) or delivery (kind 1): ``(mono, index, kind, offset, delivery)``."""


# Spark

Owners = dict[str, tuple[tuple[str, str | None], ...]]
"""Per run, every ``(process, member)`` that delivered, sorted: a delivery's owner id is its position."""


def bounds_query(F: Any, control: DataFrame, deliveries: DataFrame) -> DataFrame:
    """Per run with deliveries (one row each): the group's first delivery and its last event (a delivery,
    commit or rebalance: the end of every stall still open), and every owner — :func:`group_bounds` once
    collected."""
    kind, is_d = F.col("kind"), F.col("is_d")
    return (
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
    )


def group_bounds(rows: list[Any]) -> tuple[dict[str, tuple[float, float]], Owners]:
    """Per run with deliveries, from the collected rows of :func:`bounds_query`: the group's first
    delivery and last event, and its :data:`Owners`."""
    owners = {
        r.run_id: tuple(
            sorted(((o.process, o.member) for o in r.owners), key=lambda o: (o[0], o[1] is None, o[1] or ""))
        )
        for r in rows
    }
    return {r.run_id: (r.first, r.last) for r in rows}, owners


def leaves_query(F: Any, control: DataFrame) -> DataFrame:
    """The revoke / lost callbacks, one row per partition they list (few): :func:`leaves` once
    collected."""
    return control.where((F.col("kind") == "rebalance") & (F.col("action") != "assign")).select(
        "run_id", F.col("index").alias("i"), "mono", "process", "member", F.explode("partitions").alias("tp")
    )


def leaves(rows: list[Any]) -> dict[tuple[str, str, int], list[Mark]]:
    """The revoke / lost callbacks per ``(run_id, topic, partition)`` they list, from the collected rows of
    :func:`leaves_query`."""
    found: dict[tuple[str, str, int], list[Mark]] = defaultdict(list)
    for r in rows:
        found[(r.run_id, r.tp.topic, r.tp.partition)].append((r.mono, r.i, r.process, r.member))
    return found


def consumer_parts(
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
    grid = local_frame(
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
    ids = local_frame(
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


def _mark(row: Any, owners: tuple[tuple[str, str | None], ...]) -> Mark:
    return (row.mono, row.index, *owners[row.oid])


def consumption_of(
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


# reference


def first_deliveries(deliveries: list[tuple[int, Delivery]]) -> dict[str, tuple[float, int]]:
    """Per delivered value its first delivery's ``(mono, index)``."""
    first: dict[str, tuple[float, int]] = {}
    for index, d in deliveries:
        v = d.value_id
        if v is not None and (v not in first or (d.mono, index) < first[v]):
            first[v] = (d.mono, index)
    return first


def group_consumption(
    available: list[Available],
    deliveries: list[tuple[int, Delivery]],
    leaves: list[tuple[int, Rebalance]],
    horizon: float | None,
    e2e: list[tuple[float, float]],
    first_delivery: Mapping[str, tuple[float, int]],
) -> Consumption:
    """The consumer side (docs/audit.md, "Consumer side"), per partition the group delivered from, and per
    input partition of a service its stalls."""
    if not deliveries or horizon is None:
        return Consumption(e2e=latency_stats([ms for _, ms in e2e]))
    # per partition, the readable records and the deliveries in (mono, index) order
    rows: dict[tuple[str, int], list[Row]] = defaultdict(list)
    for index, d in deliveries:
        rows[(d.topic, d.partition)].append((d.mono, index, 1, d.offset, d))
    for _, (topic, partition, offset), mono, index in available:
        if (topic, partition) in rows:
            rows[(topic, partition)].append((mono, index, 0, offset, None))
    left: dict[tuple[str, int], list[Mark]] = defaultdict(list)
    for index, e in leaves:
        for tp in e.partitions:
            left[(tp.topic, tp.partition)].append((e.mono, index, e.process, e.member))
    gaps: list[ConsumeGap] = []
    handovers: list[Handover] = []
    for (topic, partition), of_partition in sorted(rows.items()):
        of_partition.sort(key=lambda r: r[:4])
        gap = _longest_stall(topic, partition, of_partition, horizon)
        if gap is not None:
            gaps.append(gap)
        moves: list[tuple[Mark, Mark]] = []  # (previous delivery, a delivery by another owner)
        previous: Mark | None = None
        for mono, index, _, _, delivery in of_partition:
            if delivery is None:
                continue
            mark = (mono, index, delivery.process, delivery.member)
            if previous is not None and previous[2:] != mark[2:]:
                moves.append((previous, mark))
            previous = mark
        handover = longest_handover(topic, partition, moves, left[(topic, partition)])
        if handover is not None:
            handovers.append(handover)
    return Consumption(
        tuple(gaps),
        latency_stats([ms for _, ms in e2e]),
        _lag_series(rows, horizon),
        tuple(handovers),
        _service_gaps(available, first_delivery, set(rows), horizon),
    )


def _longest_stall(topic: str, partition: int, of_partition: list[Row], horizon: float) -> ConsumeGap | None:
    """The longest stall of one partition's rows, sorted (docs/audit.md, "Consumer side")."""
    stalls: list[tuple[float, float, bool]] = []  # start, end, resumed
    readable = delivered = -1  # the highest offset readable / delivered so far
    start: float | None = None
    for mono, _, kind, offset, _ in of_partition:
        if kind == 0:
            readable = max(readable, offset)
            if start is None and delivered >= 0 and readable > delivered and mono <= horizon:
                start = mono
            continue
        if start is not None:
            stalls.append((start, mono, True))
        delivered = max(delivered, offset)
        start = mono if readable > delivered else None
    if start is not None:
        stalls.append((start, horizon, False))
    if not stalls:
        return None
    s0, s1, resumed = min(stalls, key=lambda s: (-(s[1] - s[0]), s[0]))
    return ConsumeGap(topic, partition, s1 - s0, s0, s1, resumed)


def _service_gaps(
    available: list[Available],
    first_delivery: Mapping[str, tuple[float, int]],
    read: set[tuple[str, int]],
    horizon: float,
) -> tuple[ConsumeGap, ...]:
    """Per input partition of a service — readable, read by no recorded group (not in ``read``), its values
    delivered from another topic — the longest stall, a readable record counting as processed at its
    value's first delivery (docs/audit.md, "A service's input")."""
    rows: dict[tuple[str, int], list[Row]] = defaultdict(list)
    for v, (topic, partition, offset), mono, index in available:
        if (topic, partition) in read:
            continue
        rows[(topic, partition)].append((mono, index, 0, offset, None))
        if v in first_delivery:
            rows[(topic, partition)].append((*first_delivery[v], 1, offset, None))
    gaps = []
    for (topic, partition), of_partition in sorted(rows.items()):
        of_partition.sort(key=lambda r: r[:4])
        gap = _longest_stall(topic, partition, of_partition, horizon)
        if gap is not None:
            gaps.append(gap)
    return tuple(gaps)


def _lag_series(rows: dict[tuple[str, int], list[Row]], end: float) -> tuple[LagPoint, ...]:
    """The group's offset lag at :data:`~chaos.audit.facts.LAG_POINTS` points from its first delivery to its
    last event: per partition (from its first delivery on) the highest readable offset minus the highest
    delivered one, summed."""
    start = min(r[0] for of_partition in rows.values() for r in of_partition if r[2] == 1)
    n, step = lag_grid(start, end)
    total = [0] * n
    for of_partition in rows.values():
        readable, delivered = [-1] * n, [-1] * n
        for mono, _, kind, offset, _ in of_partition:
            point = lag_point(mono, start, end, step, n)
            if point is not None:
                highest = delivered if kind == 1 else readable
                highest[point] = max(highest[point], offset)
        r = d = -1
        for i in range(n):
            r, d = max(r, readable[i]), max(d, delivered[i])
            if d >= 0:
                total[i] += max(r - d, 0)
    return tuple(LagPoint(start + i * step, total[i]) for i in range(n))
