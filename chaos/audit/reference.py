"""The pure-Python reference checker: ``(history events, topic contents) -> AuditFacts``.

Small and literal on purpose: it is the executable form of the definitions in docs/audit.md, and the
Spark job (:mod:`chaos.audit.sparkjob`) must return exactly what it returns. Memory grows with the run.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from chaos.audit.model import (
    ANOMALIES,
    DEFAULT_OPTIONS,
    PERCENTILES,
    AnomalyReport,
    AuditFacts,
    AuditOptions,
    Availability,
    Example,
    FaultWindow,
    LatencyStats,
    LogRecord,
    Totals,
    make_report,
    nearest_rank,
)
from chaos.history.events import (
    Delivery,
    DrainEnd,
    DrainRead,
    Event,
    FaultEvent,
    Rebalance,
    SendInvoke,
    SendOutcome,
    TxnMarker,
)
from chaos.history.windows import fault_windows

Position = tuple[str, int, int]


@dataclass(frozen=True, slots=True)
class _Send:
    producer: str
    seq: int
    key: str | None
    topic: str
    ts: float
    mono: float


def log_from_drain(events: Iterable[Event]) -> list[LogRecord]:
    """The topic contents as the final drain read them (``drain_read`` events): the fallback when the
    topic itself cannot be read any more."""
    return [
        LogRecord(e.topic, e.partition, e.offset, e.value_id, e.isolation, e.key)
        for e in events
        if isinstance(e, DrainRead)
    ]


def reference_audit(
    events: Iterable[Event],
    log: Iterable[LogRecord] | None,
    options: AuditOptions = DEFAULT_OPTIONS,
    *,
    run_id: str | None = None,
) -> AuditFacts:
    """Audit one run. ``events`` in record order (their position is the ``index``); ``log`` the topic's
    real contents (``None``: the topic could not be read, so the verdict can only be unknown)."""
    history = list(events)
    if run_id is None:
        run_id = history[0].run_id if history else "unknown"
    invokes: dict[str, _Send] = {}
    outcomes: dict[str, SendOutcome] = {}
    deliveries: list[tuple[int, Delivery]] = []
    rebalances: list[int] = []
    drain_reads: list[DrainRead] = []
    drain_last: dict[tuple[str, int, str], DrainEnd] = {}
    faults: list[FaultEvent] = []
    in_txn: set[str] = set()
    committed: set[str] = set()
    aborted: set[str] = set()
    for index, e in enumerate(history):
        if isinstance(e, SendInvoke):
            invokes.setdefault(e.value_id, _Send(e.producer, e.seq, e.key, e.topic, e.ts, e.mono))
        elif isinstance(e, SendOutcome):
            outcomes.setdefault(e.value_id, e)
        elif isinstance(e, Delivery):
            deliveries.append((index, e))
        elif isinstance(e, Rebalance):
            rebalances.append(index)
        elif isinstance(e, DrainRead):
            drain_reads.append(e)
        elif isinstance(e, DrainEnd):
            drain_last[(e.topic, e.partition, e.isolation)] = e
        elif isinstance(e, FaultEvent):
            faults.append(e)
        elif isinstance(e, TxnMarker) and e.action != "begin":
            in_txn.update(e.value_ids)
            if e.outcome == "ok":
                (committed if e.action == "commit" else aborted).update(e.value_ids)

    def send_failed(v: str) -> bool:
        out = outcomes.get(v)
        return out is not None and out.outcome == "fail"

    def failed(v: str) -> bool:
        return send_failed(v) or v in aborted

    def acked(v: str) -> bool:
        out = outcomes.get(v)
        return (
            out is not None
            and out.outcome == "ok"
            and v not in aborted
            and (v not in in_txn or v in committed)
        )

    def send_ts(v: str) -> float:
        out = outcomes.get(v)
        return out.ts if out is not None else invokes[v].ts

    problems: list[str] = []
    if not invokes:
        problems.append("history has no send_invoke events")
    if log is None:
        problems.append("topic contents unavailable")
    if not drain_last:
        problems.append("no drain_end events: the final drain did not run or was not recorded")
    for (topic, partition, isolation), end in drain_last.items():
        if end.outcome != "ok":
            problems.append(f"drain incomplete: {topic}[{partition}] {isolation} ({end.error})")

    records = sorted(
        {(r.topic, r.partition, r.offset, r.value_id) for r in (log or ())},
        key=lambda p: (p[0], p[1], p[2], p[3] is not None, p[3] or ""),
    )
    positions: dict[str, list[Position]] = defaultdict(list)  # sorted, since records are
    for topic, partition, offset, v in records:
        if v is not None and (not positions[v] or positions[v][-1] != (topic, partition, offset)):
            positions[v].append((topic, partition, offset))
    delivered = {d.value_id for _, d in deliveries if d.value_id is not None}
    found: dict[str, list[Example]] = {name: [] for name in ANOMALIES}

    for v, send in invokes.items():
        out = outcomes.get(v)
        where = positions.get(v)
        if where is None:
            if acked(v):
                assert out is not None
                found["lost_acked"].append(Example(v, send.topic, out.partition, out.offset, out.ts))
            elif not failed(v):
                part = out.partition if out is not None else None
                found["lost_indeterminate"].append(Example(v, send.topic, part, None, send_ts(v)))
            continue
        first = where[0]
        if not failed(v) and v not in delivered:
            found["unseen_by_group"].append(Example(v, *first, send_ts(v)))
        if len(where) > 1:
            found["duplicate_in_log"].append(Example(v, *first, send_ts(v)))

    # duplicate deliveries: every delivery of a value after its first; "after_rebalance" when a rebalance
    # callback was recorded between the previous delivery of that value and this one
    rebalances.sort()
    last_delivery: dict[str, int] = {}
    for index, d in deliveries:
        v = d.value_id
        if v is None:
            continue
        previous = last_delivery.get(v)
        last_delivery[v] = index
        if previous is None:
            continue
        between = any(previous < r < index for r in rebalances)
        name = "duplicate_delivery_after_rebalance" if between else "duplicate_delivery_other"
        found[name].append(Example(v, d.topic, d.partition, d.offset, d.ts))

    # reordering: per producer, key and partition, walk the values by (first) offset; a value whose
    # seq is below its predecessor's is reordered
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
                found["reordered"].append(Example(v, topic, partition, offset, send_ts(v)))

    # inconsistent offsets: one position, two or more values (a foreign payload counts as a value)
    observed: dict[Position, set[str | None]] = defaultdict(set)
    for topic, partition, offset, v in records:
        observed[(topic, partition, offset)].add(v)
    for _, d in deliveries:
        observed[(d.topic, d.partition, d.offset)].add(d.value_id)
    for r in drain_reads:
        observed[(r.topic, r.partition, r.offset)].add(r.value_id)
    for v, out in outcomes.items():
        if out.outcome == "ok" and out.offset is not None and out.partition is not None and v in invokes:
            observed[(invokes[v].topic, out.partition, out.offset)].add(v)
    for (topic, partition, offset), values in observed.items():
        if len(values) > 1:
            named = sorted(x for x in values if x is not None)
            found["inconsistent_offsets"].append(
                Example(named[0] if named else None, topic, partition, offset, None)
            )

    # aborted reads: a value that definitely failed, observed by a reader that must not see it
    bad_reads: dict[str, list[Position]] = defaultdict(list)
    observations = [
        (d.value_id, d.topic, d.partition, d.offset, options.group_isolation) for _, d in deliveries
    ]
    observations += [(r.value_id, r.topic, r.partition, r.offset, r.isolation) for r in (log or ())]
    for v, topic, partition, offset, isolation in observations:
        if v is None or v not in invokes:
            continue
        if send_failed(v) or (v in aborted and isolation == "read_committed"):
            bad_reads[v].append((topic, partition, offset))
    for v, where in bad_reads.items():
        found["aborted_read"].append(Example(v, *min(where), send_ts(v)))

    for topic, partition, offset, v in records:
        if v is None or v not in invokes:
            found["unexpected"].append(Example(v, topic, partition, offset, None))

    n = options.max_examples
    anomalies = tuple((name, make_report(found[name], len(found[name]), n)) for name in ANOMALIES)
    totals = Totals(
        sends=len(invokes),
        acked=sum(1 for v in invokes if acked(v)),
        failed=sum(1 for v in invokes if failed(v)),
        indeterminate=sum(1 for v in invokes if not acked(v) and not failed(v)),
        log_records=len(records),
        deliveries=len(deliveries),
    )
    availability = _availability(history, faults)
    return AuditFacts(run_id, anomalies, availability, totals, tuple(sorted(set(problems))))


def _availability(history: list[Event], faults: list[FaultEvent]) -> Availability:
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
        first_ack = next((m for m, _ in acks if end is not None and m > end), None)
        first_delivery = next((m for m in delivery_monos if end is not None and m > end), None)
        windows.append(
            FaultWindow(
                fault=pair.inject.fault,
                target=pair.inject.target,
                inject_mono=start,
                heal_mono=end,
                before=_stats(before),
                during=_stats(during),
                after=_stats(after),
                heal_to_first_ack_s=None if first_ack is None or end is None else first_ack - end,
                heal_to_first_delivery_s=None
                if first_delivery is None or end is None
                else first_delivery - end,
            )
        )
    if longest is None:
        return Availability(None, None, None, tuple(windows))
    return Availability(longest[0], longest[1], longest[2], tuple(windows))


def _stats(latencies: list[float]) -> LatencyStats:
    ordered = sorted(latencies)
    p50, p99 = (nearest_rank(ordered, p) for p in PERCENTILES)
    return LatencyStats(len(ordered), p50, p99)


__all__ = ["AnomalyReport", "log_from_drain", "reference_audit"]
