"""The pure-Python reference checker: ``(history events, topic contents) -> AuditFacts``.

Small and literal on purpose: it is the executable form of the definitions in docs/audit.md, and the
Spark job (:mod:`chaos.audit.sparkjob`) must return exactly what it returns. Memory grows with the run.
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from chaos.audit.facts import (
    ANOMALIES,
    DEFAULT_OPTIONS,
    ISOLATION_LEVELS,
    PERCENTILES,
    RESET_OPERATIONS,
    AnomalyReport,
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
    LogRecord,
    Mark,
    Totals,
    TxnState,
    attempt_state,
    lag_grid,
    lag_point,
    longest_handover,
    make_report,
    nearest_rank,
    txn_attempts,
)
from chaos.audit.logpolicy import LogPolicies
from chaos.history.windows import fault_windows
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

Position = tuple[str, int, int]
Available = tuple[str, Position, float, int]
"""A send's record becoming readable by the group: ``(value_id, position, mono, index)``."""
_Row = tuple[float, int, int, int, Delivery | None]
"""A partition's readable record (kind 0) or delivery (kind 1): ``(mono, index, kind, offset, delivery)``."""


RC: Final = "read_committed"


@dataclass(frozen=True, slots=True)
class _Pair:
    """One send of a value: its invoke's topic, the attempt it was made in, its outcome (index, event)."""

    topic: str
    att: int | None
    outcome: tuple[int, SendOutcome] | None

    def ack_at(self) -> Position | None:
        """The position its ok outcome names, if any."""
        if self.outcome is None:
            return None
        out = self.outcome[1]
        if out.outcome != "ok" or out.partition is None or out.offset is None:
            return None
        return (self.topic, out.partition, out.offset)


@dataclass(frozen=True, slots=True)
class _Send:
    producer: str
    seq: int
    key: str | None
    topic: str
    ts: float
    mono: float
    tombstone: bool


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
                e.value_id, _Send(e.producer, e.seq, e.key, e.topic, e.ts, e.mono, bool(e.tombstone))
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
    txn = _transactions(sends, answers, markers, log_records, drain_last, options.group_isolation, deliveries)
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
    # a value's positions in the log: where it was read at any level, except its records observed aborted
    positions: dict[str, list[Position]] = defaultdict(list)  # sorted, since records are
    for topic, partition, offset, v in records:
        if v is not None and not txn.observed_aborted(v, topic, partition, offset):
            positions[v].append((topic, partition, offset))
    # a read inside an aborted attempt of its own process was rolled back: it did not consume the value
    delivered = {d.value_id for i, d in deliveries if d.value_id is not None and i not in txn.rolled_back}
    found: dict[str, list[Example]] = {name: [] for name in ANOMALIES}
    group_committed = options.group_isolation == RC
    log_policies = LogPolicies.build(
        (
            (p.topic, p.cleanup_policy, p.retention_ms, p.retention_bytes, p.delete_retention_ms)
            for p in policies
        ),
        ((s.topic, s.partition, s.offset, s.action) for s in starts),
        ((d.topic, d.partition, d.outcome, d.low_offset, d.ts) for d in drain_ends),
    )
    read_at = _first_reads(deliveries, _acked_without_offset(txn)) if log_policies.active() else {}
    latest = _latest_of_keys(_placed_acks(txn, read_at), invokes) if log_policies.compacting() else {}
    removed: dict[tuple[str, int, str], int] = defaultdict(int)

    for v, send in invokes.items():
        out = outcomes.get(v)
        where = positions.get(v)
        if where is None:
            if status[v] == "acked":
                ack_topic, ack = txn.first_ack[v]
                example = Example(v, ack_topic, ack.partition, ack.offset, ack.ts)
                assert ack.partition is not None
                placed = ack.offset if ack.offset is not None else read_at.get((v, ack_topic, ack.partition))
                at = (ack_topic, ack.partition, placed)
                why = log_policies.removed(
                    v, at, send.key, latest.get((ack_topic, ack.partition, send.key)), send.tombstone, ack.ts
                )
                if why is None:
                    found["lost_acked"].append(example)
                    continue
                removed[(ack_topic, ack.partition, why)] += 1
                if why == "expired" and v not in delivered:  # removed before the group read it
                    found["expired_unread"].append(example)
                    removed[(ack_topic, ack.partition, "expired_unread")] += 1
            elif status[v] != "failed":
                part = out.partition if out is not None else None
                found["lost_indeterminate"].append(Example(v, send.topic, part, None, send_ts(v)))
            continue
        first = where[0]
        expected = status[v] != "failed" and not (group_committed and v in txn.pending)
        if expected and v not in delivered:
            found["unseen_by_group"].append(Example(v, *first, send_ts(v)))
        for _, in_topic in itertools.groupby(where, key=lambda p: p[0]):
            of_topic = list(in_topic)
            if len(of_topic) > 1:  # a copy in another topic (consume-transform-produce) is no duplicate
                found["duplicate_in_log"].append(Example(v, *of_topic[0], send_ts(v)))

    # duplicate deliveries: every delivery of a value after its first from the same topic (a copy read from
    # another topic, consume-transform-produce's input and output, is another record); "after_rebalance"
    # when a rebalance callback was recorded between the previous delivery and this one
    rebalances.sort()
    last_delivery: dict[tuple[str, str], int] = {}
    for index, d in deliveries:
        v = d.value_id
        if v is None or index in txn.rolled_back:
            continue
        previous = last_delivery.get((v, d.topic))
        last_delivery[(v, d.topic)] = index
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

    # aborted reads (G1a), judged per record: what a reader at that level must not see
    bad_reads: dict[str, list[Position]] = defaultdict(list)
    observations = [
        (d.value_id, d.topic, d.partition, d.offset, options.group_isolation) for _, d in deliveries
    ]
    observations += [(r.value_id, r.topic, r.partition, r.offset, r.isolation) for r in log_records]
    for v, topic, partition, offset, isolation in observations:
        if (
            v is not None
            and v in invokes
            and txn.bad_read(v, invokes[v].topic, (topic, partition, offset), isolation)
        ):
            bad_reads[v].append((topic, partition, offset))
    for v, where in bad_reads.items():
        found["aborted_read"].append(Example(v, *min(where), send_ts(v)))

    for topic, partition, offset, v in records:
        if v is None or v not in invokes:
            found["unexpected"].append(Example(v, topic, partition, offset, None))

    # Jepsen's order checks (docs/audit.md, "Order checks")
    level = options.group_isolation
    visible = {(r.topic, r.partition, r.offset) for r in log_records if r.isolation == level}
    skips, back = _poll_order(deliveries, txn.rolled_back, resets, visible)
    found["poll_skip"] += skips
    found["nonmonotonic_poll"] += back
    found["nonmonotonic_send"] += _send_order(sends, answers)
    if group_committed:
        for _, d in deliveries:
            until = txn.uncommitted_until.get((d.value_id, d.topic, d.partition, d.offset))
            if until is not None and d.mono < until:
                found["precommitted_read"].append(Example(d.value_id, d.topic, d.partition, d.offset, d.ts))

    n = options.max_examples
    anomalies = tuple((name, make_report(found[name], len(found[name]), n)) for name in ANOMALIES)
    totals = Totals(
        sends=len(invokes),
        acked=sum(1 for v in invokes if status[v] == "acked"),
        failed=sum(1 for v in invokes if status[v] == "failed"),
        indeterminate=sum(1 for v in invokes if status[v] == "indeterminate"),
        log_records=len(records),
        deliveries=len(deliveries),
        expired=sum(n for (_, _, why), n in removed.items() if why == "expired"),
        compacted=sum(n for (_, _, why), n in removed.items() if why == "compacted"),
    )
    first_delivery = _first_deliveries(deliveries)
    e2e = _e2e_samples(txn.available, first_delivery)
    consumer = _consumption(
        txn.available, deliveries, leaves, max(group_monos, default=None), e2e, first_delivery
    )
    availability = _availability(history, faults, e2e, consumer)
    return AuditFacts(
        run_id, anomalies, availability, totals, tuple(sorted(set(problems))), log_policies.removals(removed)
    )


def _acked_without_offset(txn: _Transactions) -> set[str]:
    """The values whose first ack names no offset — librdkafka acknowledges a retried batch the broker
    already held (``DUPLICATE_SEQUENCE_NUMBER``) without one."""
    return {v for v, (_, ack) in txn.first_ack.items() if ack.offset is None}


def _first_reads(deliveries: list[tuple[int, Delivery]], values: set[str]) -> dict[tuple[str, str, int], int]:
    """Per (value, topic, partition) of ``values`` the lowest offset the group read it at."""
    first: dict[tuple[str, str, int], int] = {}
    for _, d in deliveries:
        if d.value_id not in values or d.partition is None or d.offset is None:
            continue
        slot = (d.value_id, d.topic, d.partition)
        first[slot] = min(first.get(slot, d.offset), d.offset)
    return first


def _placed_acks(
    txn: _Transactions, read_at: Mapping[tuple[str, str, int], int]
) -> list[tuple[str, Position]]:
    """Every acknowledged position (:attr:`_Transactions.acked_at`), and for a value whose first ack names
    no offset (:func:`_acked_without_offset`) the offset the group first read it at there, when it did."""
    placed = list(txn.acked_at)
    for v, (topic, ack) in txn.first_ack.items():
        if ack.offset is None and ack.partition is not None:
            offset = read_at.get((v, topic, ack.partition))
            if offset is not None:
                placed.append((v, (topic, ack.partition, offset)))
    return placed


def _latest_of_keys(
    acked_at: list[tuple[str, Position]], invokes: dict[str, _Send]
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


@dataclass(frozen=True, slots=True)
class _Transactions:
    """What the transactions say about each sent value (docs/audit.md, "Transactions")."""

    status: dict[str, str]  # acked | failed | indeterminate
    first_ack: dict[str, tuple[str, SendOutcome]]  # the earliest acked send: its topic and outcome
    acked_at: list[tuple[str, Position]]  # every acked send with an offset: (value, ack position)
    unwritten: set[str]  # every send failed by its own outcome
    pending: set[str]  # indeterminate, with a send in an indeterminate attempt
    aborted_acks: dict[str, set[Position]]  # ack positions of sends made in aborted attempts
    carried_aborted: set[str]  # listed by ends, none committed, the last one aborted
    committed_reads: set[tuple[str, int, int, str | None]]
    uncommitted_reads: set[tuple[str, int, int, str | None]]
    committed_drain: dict[tuple[str, int], DrainEnd]
    available: list[Available]  # every send's record as it became readable by the group
    rolled_back: set[int]  # indices of deliveries made inside an aborted attempt of their own process
    # (value, ack position) of a send made in an attempt -> the mono of that attempt's last send_invoke:
    # its producer had not asked to commit before then
    uncommitted_until: dict[tuple[str | None, str, int, int], float]

    def observed_aborted(self, v: str, topic: str, partition: int, offset: int) -> bool:
        """v's record at that position was read only at read_uncommitted, and the read_committed drain of
        its partition completed past it: the record is in an aborted transaction."""
        record = (topic, partition, offset, v)
        if record in self.committed_reads or record not in self.uncommitted_reads:
            return False
        end = self.committed_drain.get((topic, partition))
        return (
            end is not None
            and end.outcome == "ok"
            and end.low_offset is not None
            and end.high_offset is not None
            and end.low_offset <= offset < end.high_offset
        )

    def bad_read(self, v: str, sent_to: str, at: Position, isolation: str) -> bool:
        """Whether a reader at ``isolation`` must not have seen v at ``at`` (an aborted read)."""
        if v in self.unwritten:
            return True
        if isolation != RC:
            return False
        if self.observed_aborted(v, *at):
            return True
        if at[0] == sent_to:
            return self.status[v] == "failed" or at in self.aborted_acks.get(v, ())
        return v in self.carried_aborted


def _transactions(
    sends: dict[str, list[tuple[int, SendInvoke]]],
    answers: dict[str, list[tuple[int, SendOutcome]]],
    markers: list[tuple[int, TxnMarker]],
    log_records: list[LogRecord],
    drain_last: dict[tuple[str, int, str], DrainEnd],
    group_isolation: str,
    deliveries: list[tuple[int, Delivery]],
) -> _Transactions:
    read_at: dict[str, set[tuple[str, int, int, str | None]]] = {level: set() for level in ISOLATION_LEVELS}
    for r in log_records:
        read_at[r.isolation].add((r.topic, r.partition, r.offset, r.value_id))
    view = _Transactions(
        status={},
        first_ack={},
        acked_at=[],
        unwritten=set(),
        pending=set(),
        aborted_acks=defaultdict(set),
        carried_aborted=set(),
        committed_reads=read_at[RC],
        uncommitted_reads=read_at["read_uncommitted"],
        committed_drain={(t, p): end for (t, p, level), end in drain_last.items() if level == RC},
        available=[],
        rolled_back=set(),
        uncommitted_until={},
    )
    attempts = txn_attempts(
        (i, m.process, m.transactional_id, m.action, m.outcome, m.error) for i, m in markers
    )
    spans: dict[str, list[tuple[int, int | None, int]]] = defaultdict(list)  # process -> (begin, close, att)
    for attempt in attempts:
        if attempt.begin is not None:
            spans[attempt.process].append((attempt.begin, attempt.close, attempt.att))
    for of_process in spans.values():
        of_process.sort()

    def attempt_of(index: int, process: str) -> int | None:
        of_process = spans.get(process, [])
        at = bisect.bisect_left(of_process, (index,)) - 1
        if at < 0:
            return None
        begin, close, att = of_process[at]
        return att if begin < index and (close is None or index < close) else None

    last_send: dict[int, float] = {}  # attempt -> the mono of its last send_invoke
    first_index: dict[str, int] = {}
    pairs: dict[str, list[_Pair]] = {}
    for v, made in sends.items():  # the k-th outcome of a value answers its k-th invoke
        given = answers.get(v, [])
        pairs[v] = [
            _Pair(e.topic, attempt_of(index, e.process), given[k] if k < len(given) else None)
            for k, (index, e) in enumerate(made)
        ]
        for pair, (_, e) in zip(pairs[v], made, strict=True):
            if pair.att is not None:
                last_send[pair.att] = max(last_send.get(pair.att, e.mono), e.mono)
    for v, of_value in pairs.items():
        for pair in of_value:
            ack_at = pair.ack_at()
            if pair.att is not None and ack_at is not None:
                key = (v, *ack_at)
                until = last_send[pair.att]
                view.uncommitted_until[key] = max(view.uncommitted_until.get(key, until), until)
    seen_committed: set[int] = set()
    seen_aborted: set[int] = set()
    for v, of_value in pairs.items():
        for pair in of_value:
            ack_at = pair.ack_at()
            if pair.att is None or ack_at is None:
                continue
            if (*ack_at, v) in view.committed_reads:
                seen_committed.add(pair.att)
            elif view.observed_aborted(v, *ack_at):
                seen_aborted.add(pair.att)
    state: dict[int, TxnState] = {
        a.att: attempt_state(a.recorded, a.att in seen_committed, a.att in seen_aborted) for a in attempts
    }
    for index, d in deliveries:
        att = attempt_of(index, d.process)
        if att is not None and state[att] == "aborted":
            view.rolled_back.add(index)
    # when a send's record became readable by the group: at its ack; at read_committed, a send made in an
    # attempt at the later of its ack and the attempt's recorded commit (never without one)
    marker_mono = {index: m.mono for index, m in markers}
    commit_at = {a.att: (marker_mono[a.att], a.att) for a in attempts if a.recorded == "committed"}
    for v, of_value in pairs.items():
        for pair in of_value:
            ack_at = pair.ack_at()
            if ack_at is None or pair.outcome is None:
                continue
            at = (pair.outcome[1].mono, pair.outcome[0])
            if pair.att is not None and group_isolation == RC:
                commit = commit_at.get(pair.att)
                if commit is None:
                    continue
                at = max(at, commit)
            view.available.append((v, ack_at, *at))

    # a value's status follows its sends: acked if one was acked, failed if every one failed
    for v, of_value in pairs.items():
        verdicts = []
        in_open_txn = False
        for pair in of_value:
            txn = state[pair.att] if pair.att is not None else None
            outcome = pair.outcome[1].outcome if pair.outcome is not None else None
            if outcome == "ok" and txn in (None, "committed"):
                verdicts.append("acked")
                assert pair.outcome is not None
                acked_ack = pair.ack_at()
                if acked_ack is not None:
                    view.acked_at.append((v, acked_ack))
                if v not in first_index or pair.outcome[0] < first_index[v]:
                    view.first_ack[v] = (pair.topic, pair.outcome[1])
                    first_index[v] = pair.outcome[0]
            elif outcome == "fail" or txn == "aborted":
                verdicts.append("failed")
            else:
                verdicts.append("indeterminate")
                in_open_txn = in_open_txn or txn == "indeterminate"
            ack_at = pair.ack_at()
            if txn == "aborted" and ack_at is not None:
                view.aborted_acks[v].add(ack_at)
        if "acked" in verdicts:
            view.status[v] = "acked"
        elif all(x == "failed" for x in verdicts):
            view.status[v] = "failed"
        else:
            view.status[v] = "indeterminate"
            if in_open_txn:
                view.pending.add(v)
        if all(p.outcome is not None and p.outcome[1].outcome == "fail" for p in of_value):
            view.unwritten.add(v)
    # values carried by attempts (listed by their end markers): aborted if none of those attempts
    # committed and the last of them aborted
    listed: dict[str, list[tuple[int, TxnState]]] = defaultdict(list)
    for index, m in markers:
        if m.action != "begin":
            for v in set(m.value_ids):
                listed[v].append((index, state[index]))
    view.carried_aborted.update(
        v
        for v, ends in listed.items()
        if all(s != "committed" for _, s in ends) and max(ends)[1] == "aborted"
    )
    return view


def _poll_order(
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


def _send_order(
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


def _e2e_samples(
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


def _first_deliveries(deliveries: list[tuple[int, Delivery]]) -> dict[str, tuple[float, int]]:
    """Per delivered value its first delivery's ``(mono, index)``."""
    first: dict[str, tuple[float, int]] = {}
    for index, d in deliveries:
        v = d.value_id
        if v is not None and (v not in first or (d.mono, index) < first[v]):
            first[v] = (d.mono, index)
    return first


def _consumption(
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
        return Consumption(e2e=_stats([ms for _, ms in e2e]))
    # per partition, the readable records and the deliveries in (mono, index) order
    rows: dict[tuple[str, int], list[_Row]] = defaultdict(list)
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
        _stats([ms for _, ms in e2e]),
        _lag_series(rows, horizon),
        tuple(handovers),
        _service_gaps(available, first_delivery, set(rows), horizon),
    )


def _longest_stall(topic: str, partition: int, of_partition: list[_Row], horizon: float) -> ConsumeGap | None:
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
    rows: dict[tuple[str, int], list[_Row]] = defaultdict(list)
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


def _lag_series(rows: dict[tuple[str, int], list[_Row]], end: float) -> tuple[LagPoint, ...]:
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


def _availability(
    history: list[Event],
    faults: list[FaultEvent],
    e2e: list[tuple[float, float]],
    consumer: Consumption,
) -> Availability:
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
                before=_stats(before),
                during=_stats(during),
                after=_stats(after),
                heal_to_first_ack_s=None if first_ack is None or end is None else first_ack - end,
                heal_to_first_delivery_s=None
                if first_delivery is None or end is None
                else first_delivery - end,
                e2e_before=_stats(e2e_before),
                e2e_during=_stats(e2e_during),
                e2e_after=_stats(e2e_after),
            )
        )
    if longest is None:
        return Availability(None, None, None, tuple(windows), consumer)
    return Availability(longest[0], longest[1], longest[2], tuple(windows), consumer)


def _stats(latencies: list[float]) -> LatencyStats:
    ordered = sorted(latencies)
    p50, p99 = (nearest_rank(ordered, p) for p in PERCENTILES)
    return LatencyStats(len(ordered), p50, p99)


__all__ = ["AnomalyReport", "log_from_drain", "reference_audit"]
