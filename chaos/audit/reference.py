"""The pure-Python reference checker: ``(history events, topic contents) -> AuditFacts``.

Small and literal on purpose: it is the executable form of the definitions in docs/audit.md, and the
Spark job (:mod:`chaos.audit.sparkjob`) must return exactly what it returns. Memory grows with the run.
This module reads the run's events once and composes the reference parts of the checks
(:mod:`chaos.audit.checks`, one module per family).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from chaos.audit.checks import availability, consumer_side, order, removals, values
from chaos.audit.checks.transactions import RC, transaction_view
from chaos.audit.facts import (
    ANOMALIES,
    DEFAULT_OPTIONS,
    RESET_OPERATIONS,
    AuditFacts,
    AuditOptions,
    Example,
    LogRecord,
    Totals,
    make_report,
)
from chaos.run.events import (
    Commit,
    Delivery,
    DrainEnd,
    DrainRead,
    Event,
    FaultEvent,
    LogStart,
    ProbeCall,
    Rebalance,
    SendInvoke,
    SendOutcome,
    TopicPolicy,
    TxnMarker,
)


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
    invokes: dict[str, values.Send] = {}
    outcomes: dict[str, SendOutcome] = {}
    sends: dict[str, list[tuple[int, SendInvoke]]] = defaultdict(list)
    answers: dict[str, list[tuple[int, SendOutcome]]] = defaultdict(list)
    deliveries: list[tuple[int, Delivery]] = []
    rebalances: list[int] = []
    resets: dict[str, list[int]] = defaultdict(list)  # process -> its rebalance callbacks and seeks
    leaves: list[tuple[int, Rebalance]] = []
    group_monos: list[float] = []  # deliveries, commits, rebalances: the group's last event ends a stall
    drain_reads: list[DrainRead] = []
    drain_last: dict[tuple[str, int, str], DrainEnd] = {}
    faults: list[FaultEvent] = []
    markers: list[tuple[int, TxnMarker]] = []
    policies: list[TopicPolicy] = []
    starts: list[LogStart] = []
    drain_ends: list[DrainEnd] = []
    for index, e in enumerate(history):
        if isinstance(e, SendInvoke):
            invokes.setdefault(
                e.value_id, values.Send(e.producer, e.seq, e.key, e.topic, e.ts, e.mono, bool(e.tombstone))
            )
            sends[e.value_id].append((index, e))
        elif isinstance(e, SendOutcome):
            outcomes.setdefault(e.value_id, e)
            answers[e.value_id].append((index, e))
        elif isinstance(e, Delivery):
            deliveries.append((index, e))
            group_monos.append(e.mono)
        elif isinstance(e, Rebalance):
            rebalances.append(index)
            resets[e.process].append(index)
            group_monos.append(e.mono)
            if e.action != "assign":
                leaves.append((index, e))
        elif isinstance(e, Commit):
            group_monos.append(e.mono)
        elif isinstance(e, DrainRead):
            drain_reads.append(e)
        elif isinstance(e, DrainEnd):
            drain_last[(e.topic, e.partition, e.isolation)] = e
            drain_ends.append(e)
        elif isinstance(e, TopicPolicy):
            policies.append(e)
        elif isinstance(e, LogStart):
            starts.append(e)
        elif isinstance(e, FaultEvent):
            faults.append(e)
        elif isinstance(e, TxnMarker):
            markers.append((index, e))
        elif isinstance(e, ProbeCall) and e.operation in RESET_OPERATIONS:
            resets[e.process].append(index)

    log_records = list(log or ())
    txn = transaction_view(
        sends, answers, markers, log_records, drain_last, options.group_isolation, deliveries
    )
    status = txn.status

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
        {(r.topic, r.partition, r.offset, r.value_id) for r in log_records},
        key=lambda p: (p[0], p[1], p[2], p[3] is not None, p[3] or ""),
    )
    positions = values.log_positions(records, txn)
    delivered = values.delivered_values(deliveries, txn.rolled_back)
    found: dict[str, list[Example]] = {name: [] for name in ANOMALIES}
    group_committed = options.group_isolation == RC
    log_policies = removals.policies_of(policies, starts, drain_ends)
    read_at, latest = removals.placements(txn, deliveries, invokes, log_policies)
    removed: dict[tuple[str, int, str], int] = defaultdict(int)
    values.judge_values(
        found,
        removed,
        invokes=invokes,
        outcomes=outcomes,
        positions=positions,
        txn=txn,
        delivered=delivered,
        send_ts=send_ts,
        group_committed=group_committed,
        log_policies=log_policies,
        read_at=read_at,
        latest=latest,
    )
    values.duplicate_deliveries(found, deliveries, txn.rolled_back, rebalances)
    found["reordered"] += order.reordered(positions, invokes, send_ts)
    found["inconsistent_offsets"] += values.inconsistent_offsets(
        records, deliveries, drain_reads, outcomes, invokes
    )
    found["aborted_read"] += values.aborted_reads(
        deliveries, log_records, invokes, txn, options.group_isolation, send_ts
    )
    found["unexpected"] += values.unexpected_records(records, invokes)

    # Jepsen's order checks (docs/audit.md, "Order checks")
    level = options.group_isolation
    visible = {(r.topic, r.partition, r.offset) for r in log_records if r.isolation == level}
    skips, back = order.reference_poll_order(deliveries, txn.rolled_back, resets, visible)
    found["poll_skip"] += skips
    found["nonmonotonic_poll"] += back
    found["nonmonotonic_send"] += order.send_order(sends, answers)
    if group_committed:
        found["precommitted_read"] += values.precommitted_reads(deliveries, txn)

    n = options.max_examples
    anomalies = tuple((name, make_report(found[name], len(found[name]), n)) for name in ANOMALIES)
    expired, compacted = removals.removed_totals(removed)
    totals = Totals(
        sends=len(invokes),
        acked=sum(1 for v in invokes if status[v] == "acked"),
        failed=sum(1 for v in invokes if status[v] == "failed"),
        indeterminate=sum(1 for v in invokes if status[v] == "indeterminate"),
        log_records=len(records),
        deliveries=len(deliveries),
        expired=expired,
        compacted=compacted,
    )
    first_delivery = consumer_side.first_deliveries(deliveries)
    e2e = availability.e2e_samples(txn.available, first_delivery)
    consumption = consumer_side.group_consumption(
        txn.available, deliveries, leaves, max(group_monos, default=None), e2e, first_delivery
    )
    available = availability.run_availability(history, faults, e2e, consumption)
    return AuditFacts(
        run_id, anomalies, available, totals, tuple(sorted(set(problems))), log_policies.removals(removed)
    )


__all__ = ["log_from_drain", "reference_audit"]
