"""Consumer-side availability (docs/audit.md, "Consumer side"): stalls per partition, end-to-end latency,
the lag series and handovers, in both engines.

A generated *consumer world* runs a topic of 1–3 partitions, plain and transactional sends, one or two
group members that deliver what is readable a few records later, and one planted stall: a partition that
delivers nothing while a record waits, for a clock jump of 3–30 s, ended by the same owner (a frozen
member, or — at read_committed — an open transaction aborted), by another member after a silent kill, or
after a graceful revoke. The reference must report the planted stall as the group's longest, each
partition's stall as a literal transcription of the definition finds it (the oracle below), the handovers
the world made, the end-to-end latencies it knows, and the lag the definition gives; the Spark job must
return exactly what the reference returns, on these worlds and on ``test_audit_properties``'s runs.
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Final

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chaos.audit.facts import (
    LAG_POINTS,
    AuditOptions,
    Availability,
    ConsumeGap,
    Consumption,
    Handover,
    Isolation,
    LagPoint,
    LatencyStats,
    LogRecord,
    lag_grid,
    lag_point,
    longest_handover,
    nearest_rank,
)
from chaos.audit.reference import reference_audit
from chaos.audit.verdict import AuditResult, judge
from chaos.run.events import (
    Commit,
    Delivery,
    Event,
    PartitionOffset,
    Rebalance,
    SendInvoke,
    SendOutcome,
    TxnMarker,
    value_id_for,
)
from tests.unit.audit.test_audit_properties import (
    GROUP,
    TOPIC,
    Case,
    Clock,
    assert_spark_agrees,
    build,
    drain_events,
    plans,
)

RC: Final = "read_committed"
RU: Final = "read_uncommitted"
ENDINGS: Final = ("resume", "killed", "revoked")
Owner = tuple[str, str]


@dataclass(frozen=True)
class ConsumerPlan:
    """A drawn world (pure data)."""

    partitions: int
    members: int
    isolation: Isolation
    records: tuple[tuple[int, str, int], ...]  # partition, plain | commit | abort, how many records later
    steps: tuple[float, ...]
    stall_at: int
    stall_partition: int
    stall_s: float
    stall_records: int
    ending: str
    open_txn: bool  # the stall sits behind a transaction left open, aborted when it ends
    rewind: int  # the new owner delivers again this many records before the stall
    commits: bool  # members record offset commits (they extend the group's last event)
    late: bool  # a record acked after the group's last event (starts no stall)


@st.composite
def consumer_plans(draw: st.DrawFn) -> ConsumerPlan:
    partitions = draw(st.integers(1, 3))
    n = draw(st.integers(8, 40))
    kinds = st.sampled_from(["plain"] * 4 + ["commit", "abort"])
    records = tuple(
        (draw(st.integers(0, partitions - 1)), draw(kinds), draw(st.integers(0, 3))) for _ in range(n)
    )
    steps = tuple(draw(st.lists(st.floats(0.001, 0.03, allow_nan=False), min_size=5, max_size=5)))
    return ConsumerPlan(
        partitions=partitions,
        members=draw(st.integers(1, 2)),
        isolation=draw(st.sampled_from([RC, RU])),
        records=records,
        steps=steps,
        stall_at=draw(st.integers(1, n - 1)),
        stall_partition=draw(st.integers(0, partitions - 1)),
        stall_s=draw(st.floats(3.0, 30.0, allow_nan=False)),
        stall_records=draw(st.integers(0, 6)),
        ending=draw(st.sampled_from(ENDINGS)),
        open_txn=draw(st.booleans()),
        rewind=draw(st.integers(0, 2)),
        commits=draw(st.booleans()),
        late=draw(st.booleans()),
    )


@dataclass
class Pending:
    offset: int
    value_id: str
    readable: float  # mono
    due: int  # deliver by this record number


@dataclass
class ConsumerWorld:
    """One world as it happens: the history, the records, what the group was able to read and when."""

    plan: ConsumerPlan
    run_id: str
    clock: Clock = field(init=False)
    events: list[Event] = field(default_factory=list)
    written: list[tuple[int, int, str, bool]] = field(
        default_factory=list
    )  # partition, offset, id, committed
    next_offset: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    pending: dict[int, list[Pending]] = field(default_factory=lambda: defaultdict(list))
    delivered: dict[int, list[tuple[int, str]]] = field(default_factory=lambda: defaultdict(list))
    last_delivery: dict[int, tuple[float, Owner]] = field(default_factory=dict)
    owners: dict[int, Owner] = field(default_factory=dict)
    readable_at: dict[str, float] = field(default_factory=dict)
    first_delivery: dict[str, float] = field(default_factory=dict)
    seqs: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    dead: set[Owner] = field(default_factory=set)
    stalled: int | None = None
    stall_start: float | None = None
    stall_end: float | None = None
    handovers: dict[int, tuple[Owner, Owner, float, float, bool]] = field(default_factory=dict)
    left_at: dict[Owner, float] = field(default_factory=dict)
    open_txn: tuple[int, str] | None = None
    count: int = 0

    def __post_init__(self) -> None:
        self.clock = Clock(self.run_id, self.plan.steps)
        members = [(f"consumer-{i}", f"m{i}-1") for i in range(self.plan.members)]
        for p in range(self.plan.partitions):
            self.owners[p] = members[p % len(members)]
        for member in members:
            self.rebalance(member, "assign", [p for p, o in self.owners.items() if o == member])

    # ---- the producers ----------------------------------------------------------------------------

    def tick(self) -> dict[str, Any]:
        return self.clock.tick()

    def readable(self, p: int, offset: int, value_id: str, mono: float, delay: int) -> None:
        self.readable_at.setdefault(value_id, mono)
        self.pending[p].append(Pending(offset, value_id, mono, self.count + delay))
        if self.stalled == p and self.stall_start is None:
            self.stall_start = mono

    def send(self, p: int, kind: str, delay: int, *, end: bool = True) -> tuple[str, int]:
        """One record to partition ``p``: plain, or in its own attempt that commits or aborts (``end``
        False: left open). Returns its value id and offset."""
        producer = "producer-0" if kind == "plain" else "producer-t"
        if kind != "plain":
            self.txn(producer, "begin", ())
        seq = self.seqs[producer]
        self.seqs[producer] += 1
        value_id = value_id_for(self.run_id, producer, seq)
        self.events.append(
            SendInvoke(
                process=producer, value_id=value_id, producer=producer, seq=seq, topic=TOPIC, **self.tick()
            )
        )
        offset = self.next_offset[p]
        self.next_offset[p] += 1
        at = self.tick()
        self.events.append(
            SendOutcome(
                process=producer,
                value_id=value_id,
                outcome="ok",
                partition=p,
                offset=offset,
                latency_ms=1.0,
                **at,
            )
        )
        self.written.append((p, offset, value_id, kind == "plain" or (kind == "commit" and end)))
        if kind == "plain":
            self.readable(p, offset, value_id, at["mono"], delay)
        elif end:
            self.end_txn(producer, kind, p, [(offset, value_id, at["mono"])], delay)
        if self.plan.isolation == RU and kind != "plain":
            self.readable(p, offset, value_id, at["mono"], delay)
        return value_id, offset

    def end_txn(
        self, producer: str, kind: str, p: int, sent: list[tuple[int, str, float]], delay: int
    ) -> None:
        at = self.txn(producer, kind, tuple(v for _, v, _ in sent))
        self.next_offset[p] += 1  # the transaction's control marker
        if kind == "commit" and self.plan.isolation == RC:
            for offset, value_id, _ in sent:
                self.readable(p, offset, value_id, at, delay)

    def txn(self, producer: str, action: str, value_ids: tuple[str, ...]) -> float:
        at = self.tick()
        self.events.append(
            TxnMarker(
                process=producer,
                action=action,  # type: ignore[arg-type]
                transactional_id="tx-0",
                outcome="ok",
                value_ids=value_ids,
                **at,
            )
        )
        return float(at["mono"])

    # ---- the group ----------------------------------------------------------------------------------

    def rebalance(self, member: Owner, action: str, partitions: list[int]) -> float:
        at = self.tick()
        self.events.append(
            Rebalance(
                process=member[0],
                action=action,  # type: ignore[arg-type]
                group=GROUP,
                member=member[1],
                partitions=tuple(PartitionOffset(topic=TOPIC, partition=p) for p in partitions),
                **at,
            )
        )
        return float(at["mono"])

    def deliver(self, p: int, offset: int, value_id: str) -> None:
        process, member = self.owners[p]
        at = self.tick()
        self.events.append(
            Delivery(
                process=process,
                group=GROUP,
                topic=TOPIC,
                partition=p,
                offset=offset,
                value_id=value_id,
                member=member,
                **at,
            )
        )
        previous = self.last_delivery.get(p)
        if previous is not None and previous[1] != self.owners[p] and p not in self.handovers:
            left = previous[1] in self.left_at  # its revoke came after its last delivery
            start = self.left_at[previous[1]] if left else previous[0]
            self.handovers[p] = (previous[1], self.owners[p], start, at["mono"], left)
        if p == self.plan.stall_partition and self.stall_start is not None and self.stall_end is None:
            self.stall_end = at["mono"]
        self.last_delivery[p] = (at["mono"], self.owners[p])
        self.first_delivery.setdefault(value_id, at["mono"])
        self.delivered[p].append((offset, value_id))

    def flush(self, p: int, *, force: bool = False) -> None:
        """The owner of ``p`` delivers what waits, when the first waiting record is due (or ``force``)."""
        waiting = self.pending[p]
        if not waiting or self.owners[p] in self.dead or p == self.stalled:
            return
        if force or min(w.due for w in waiting) <= self.count:
            for w in sorted(waiting, key=lambda w: w.offset):
                self.deliver(p, w.offset, w.value_id)
            waiting.clear()
            if self.plan.commits:
                offsets = (PartitionOffset(topic=TOPIC, partition=p, offset=self.delivered[p][-1][0] + 1),)
                process, member = self.owners[p]
                self.events.append(
                    Commit(
                        process=process,
                        group=GROUP,
                        outcome="ok",
                        offsets=offsets,
                        member=member,
                        **self.tick(),
                    )
                )

    # ---- the run ------------------------------------------------------------------------------------

    def run(self) -> None:
        plan = self.plan
        s = plan.stall_partition
        for number, (p, kind, delay) in enumerate(plan.records):
            self.count = number
            if number == plan.stall_at:
                self.begin_stall(s)
            if self.stalled is not None and number == plan.stall_at + plan.stall_records:
                self.end_stall(s)
            self.send(p, kind, delay)
            for q in range(plan.partitions):
                self.flush(q)
        if self.stalled is not None:
            self.end_stall(s)
        for q in range(plan.partitions):
            self.flush(q, force=True)
        for member in sorted({o for o in self.owners.values() if o not in self.dead}):
            self.rebalance(member, "revoke", sorted(p for p, o in self.owners.items() if o == member))
        if plan.late:
            self.send(plan.stall_partition, "plain", 0)

    def begin_stall(self, s: int) -> None:
        if not self.delivered[s]:  # the stall is measured from the partition's first delivery
            self.send(s, "plain", 0)
        self.flush(s, force=True)
        self.stalled = s
        if self.plan.open_txn and self.plan.isolation == RC:
            value_id, offset = self.send(s, "commit", 0, end=False)
            self.open_txn = (offset, value_id)
        self.send(s, "plain", 0)
        for q in range(self.plan.partitions):
            if q != s:
                self.flush(q, force=True)
        self.clock.ts += self.plan.stall_s
        self.clock.mono += self.plan.stall_s
        old = self.owners[s]
        if self.plan.ending == "killed":
            self.dead.add(old)
        elif self.plan.ending == "revoked":
            self.left_at[old] = self.rebalance(
                old, "revoke", sorted(p for p, o in self.owners.items() if o == old)
            )
            self.dead.add(old)

    def end_stall(self, s: int) -> None:
        old = self.owners[s]
        if self.open_txn is not None:
            _, value_id = self.open_txn
            self.txn("producer-t", "abort", (value_id,))
            self.next_offset[s] += 1
        if self.plan.ending != "resume":
            others = sorted({o for o in self.owners.values() if o != old})
            new = others[0] if others else (old[0], old[1].replace("-1", "-2"))
            moved = sorted(p for p, o in self.owners.items() if o == old)
            for member in others:  # an eager rebalance: every member gives up what it had
                self.rebalance(member, "revoke", sorted(p for p, o in self.owners.items() if o == member))
            for p in moved:
                self.owners[p] = new
            self.rebalance(new, "assign", sorted(p for p, o in self.owners.items() if o == new))
            again = self.delivered[s][-self.plan.rewind :] if self.plan.rewind else []
            for offset, value_id in again:  # from the last committed offset: already delivered once
                self.deliver(s, offset, value_id)
        self.stalled = None
        self.flush(s, force=True)
        for p in range(self.plan.partitions):
            self.flush(p, force=True)

    def case(self) -> Case:
        log = [
            LogRecord(TOPIC, p, offset, value_id, level)
            for p, offset, value_id, committed in self.written
            for level in (RU, RC)
            if level == RU or committed
        ]
        ends = [
            (TOPIC, p, level, self.next_offset[p]) for p in range(self.plan.partitions) for level in (RU, RC)
        ]
        return Case(
            self.events + drain_events(self.tick, log, ends), log, options=options(self.plan.isolation)
        )


def options(isolation: str) -> AuditOptions:
    return AuditOptions(group_isolation=isolation, max_examples=3)  # type: ignore[arg-type]


def world(plan: ConsumerPlan, run_id: str = "w") -> ConsumerWorld:
    built = ConsumerWorld(plan, run_id)
    built.run()
    return built


OUT: Final = "out"


def through_a_service(w: ConsumerWorld) -> Case:
    """The world seen through a service between two topics: the group reads an output topic ``OUT`` — each
    delivery a copy of its input value at an offset of its own there, in delivery order — and no recorded
    group reads the input partitions."""

    def out(tps: tuple[PartitionOffset, ...]) -> tuple[PartitionOffset, ...]:
        return tuple(dataclasses.replace(tp, topic=OUT) for tp in tps)

    events: list[Event] = []
    written: list[tuple[int, int, str]] = []
    next_out: dict[int, int] = defaultdict(int)
    for e in w.events:
        if isinstance(e, Delivery):
            written.append((e.partition, next_out[e.partition], e.value_id or ""))
            e = dataclasses.replace(e, topic=OUT, offset=next_out[e.partition])
            next_out[e.partition] += 1
        elif isinstance(e, Rebalance):
            e = dataclasses.replace(e, partitions=out(e.partitions))
        elif isinstance(e, Commit):
            e = dataclasses.replace(e, offsets=out(e.offsets))
        events.append(e)
    case = w.case()
    log = case.log + [LogRecord(OUT, p, o, v, level) for p, o, v in written for level in (RU, RC)]
    ends = [(TOPIC, p, level, w.next_offset[p]) for p in range(w.plan.partitions) for level in (RU, RC)]
    ends += [(OUT, p, level, n) for p, n in next_out.items() for level in (RU, RC)]
    return Case(events + drain_events(w.tick, log, ends), log, options=options(w.plan.isolation))


def oracle_service_gaps(events: list[Event], isolation: str) -> dict[int, ConsumeGap]:
    """The definition for a service's input partitions: the group's stall over the input's readable
    records, each processed at its value's first delivery (from any topic)."""
    first: dict[str, tuple[float, int]] = {}
    for i, e in enumerate(events):
        if isinstance(e, Delivery) and e.value_id is not None:
            first.setdefault(e.value_id, (e.mono, i))
    value_at = {
        (e.partition, e.offset): e.value_id
        for e in events
        if isinstance(e, SendOutcome) and e.outcome == "ok"
    }
    readable = readable_records(events, isolation)
    processed = [(*first[value_at[(p, o)]], 1, o, p) for p, o, _, _ in readable if value_at[(p, o)] in first]
    return oracle_gaps(events, readable, horizon_of(events), processed)


# ---- the oracle: the definition, transcribed literally -----------------------------------------------


def oracle_gaps(
    events: list[Event],
    readable: list[tuple[int, int, float, int]],
    horizon: float,
    deliveries: list[tuple[float, int, int, int, int]] | None = None,
) -> dict[int, ConsumeGap]:
    """Per partition: after each delivery k, the segment up to the next one; the stall starts at the first
    of (delivery k, the readable records of the segment up to the horizon) by which a record beyond every
    offset delivered up to k was readable; it ends at delivery k + 1, or at the horizon. ``deliveries``
    (``(mono, index, 1, offset, partition)``): the history's, unless given."""
    found: dict[int, ConsumeGap] = {}
    if deliveries is None:
        deliveries = [
            (e.mono, i, 1, e.offset, e.partition) for i, e in enumerate(events) if isinstance(e, Delivery)
        ]
    for p in sorted({d[4] for d in deliveries}):
        rows = sorted(
            [d[:4] for d in deliveries if d[4] == p] + [(m, i, 0, o) for q, o, m, i in readable if q == p]
        )
        at = [n for n, r in enumerate(rows) if r[2] == 1]
        stalls = []
        for k, n in enumerate(at):
            done = max(rows[j][3] for j in at[: k + 1])
            stop = at[k + 1] if k + 1 < len(at) else len(rows)
            candidates = [n] + [j for j in range(n + 1, stop) if rows[j][0] <= horizon]
            for j in candidates:
                if max((rows[x][3] for x in range(j + 1) if rows[x][2] == 0), default=-1) > done:
                    end = rows[stop][0] if stop < len(rows) else horizon
                    stalls.append((end - rows[j][0], -rows[j][0], rows[j][0], end, stop < len(rows)))
                    break
        if stalls:
            gap, _, start, end, resumed = max(stalls)
            found[p] = ConsumeGap(TOPIC, p, gap, start, end, resumed)
    return found


def readable_records(events: list[Event], isolation: str) -> list[tuple[int, int, float, int]]:
    """``(partition, offset, mono, index)`` of each send's record as it became readable (each value here is
    sent once; a transactional one in its own attempt, whose end follows its outcome)."""
    ends = {
        v: (j, m)
        for j, m in enumerate(events)
        if isinstance(m, TxnMarker) and m.action != "begin"
        for v in m.value_ids
    }
    out = []
    for i, e in enumerate(events):
        if not isinstance(e, SendOutcome) or e.outcome != "ok" or e.partition is None or e.offset is None:
            continue
        if e.process == "producer-t" and isolation == RC:
            j, end = ends.get(e.value_id, (0, None))
            if end is not None and end.action == "commit":
                out.append((e.partition, e.offset, end.mono, j))
        else:
            out.append((e.partition, e.offset, e.mono, i))
    return out


def oracle_lag(events: list[Event], readable: list[tuple[int, int, float, int]], horizon: float) -> list[int]:
    """At each point: per partition delivered from, the highest readable offset minus the highest delivered
    one among the events the point counts (``lag_point``), once the partition delivered; summed."""
    deliveries = [e for e in events if isinstance(e, Delivery)]
    start = min(d.mono for d in deliveries)
    n, step = lag_grid(start, horizon)

    def point(mono: float) -> int:
        found = lag_point(mono, start, horizon, step, n)
        return n if found is None else found

    lag = []
    for i in range(n):
        total = 0
        for p in {d.partition for d in deliveries}:
            done = max((d.offset for d in deliveries if d.partition == p and point(d.mono) <= i), default=-1)
            read = max((o for q, o, m, _ in readable if q == p and point(m) <= i), default=-1)
            total += max(read - done, 0) if done >= 0 else 0
        lag.append(total)
    return lag


def horizon_of(events: list[Event]) -> float:
    return max(e.mono for e in events if isinstance(e, Delivery | Rebalance | Commit))


# ---- properties ------------------------------------------------------------------------------------


@settings(max_examples=250)
@given(plan=consumer_plans())
def test_the_planted_stall_is_the_longest_and_every_partition_matches_the_definition(
    plan: ConsumerPlan,
) -> None:
    w = world(plan)
    case = w.case()
    consumer = reference_audit(case.events, case.log, options(plan.isolation)).availability.consumer
    history = w.events
    readable = readable_records(history, plan.isolation)
    horizon = horizon_of(history)
    assert {(g.topic, g.partition): g for g in consumer.gaps} == {
        (TOPIC, p): g for p, g in oracle_gaps(history, readable, horizon).items()
    }
    longest = consumer.longest_gap()
    assert w.stall_start is not None
    assert w.stall_end is not None
    assert longest is not None
    assert (longest.partition, longest.start_mono, longest.end_mono, longest.resumed) == (
        plan.stall_partition,
        w.stall_start,
        w.stall_end,
        True,
    )
    assert longest.gap_s == w.stall_end - w.stall_start >= plan.stall_s
    # handovers: exactly those the world made, each from the old owner's last delivery or its revoke
    assert {h.partition: h for h in consumer.handovers} == {
        p: Handover(TOPIC, p, old[0], old[1], new[0], new[1], start, end, end - start, left)
        for p, (old, new, start, end, left) in w.handovers.items()
    }
    if plan.ending != "resume":
        assert plan.stall_partition in w.handovers
    # end-to-end: each delivered value from when it became readable to its first delivery
    e2e = sorted((m - w.readable_at[v]) * 1000.0 for v, m in w.first_delivery.items())
    assert consumer.e2e == LatencyStats(len(e2e), nearest_rank(e2e, 50), nearest_rank(e2e, 99))
    assert [p.lag for p in consumer.lag] == oracle_lag(history, readable, horizon)
    assert len(consumer.lag) == LAG_POINTS
    assert consumer.lag[-1].lag == 0


@settings(max_examples=150)
@given(plan=consumer_plans())
def test_a_services_input_partitions_stall_as_the_definition_says(plan: ConsumerPlan) -> None:
    """Seen through a service, the planted stall is the input partition's: each input partition's longest
    stall is the definition's, and the output's partitions are the group's own."""
    w = world(plan)
    case = through_a_service(w)
    consumer = reference_audit(case.events, case.log, options(plan.isolation)).availability.consumer
    assert {(g.topic, g.partition): g for g in consumer.service_gaps} == {
        (TOPIC, p): g for p, g in oracle_service_gaps(case.events, plan.isolation).items()
    }
    longest = consumer.longest_service_gap()
    assert longest is not None
    assert longest.gap_s >= plan.stall_s
    assert {g.topic for g in consumer.gaps} <= {OUT}
    assert not [h for h in consumer.handovers if h.topic != OUT]


def test_the_worlds_reach_every_ending_and_isolation() -> None:
    seen: set[tuple[str, str, bool]] = set()

    @settings(max_examples=200)
    @given(plan=consumer_plans())
    def collect(plan: ConsumerPlan) -> None:
        w = world(plan)
        left = any(h[4] for h in w.handovers.values())
        seen.add((plan.ending, plan.isolation, left))

    collect()
    assert {(e, i) for e, i, _ in seen} == {(e, i) for e in ENDINGS for i in (RC, RU)}
    assert ("revoked", RC, True) in seen
    assert ("killed", RU, False) in seen


# ---- by hand -----------------------------------------------------------------------------------------

T0 = 1_700_000_000.0


class Own(enum.Enum):
    """:meth:`Hand.deliver`'s default member id: the member's own, ``m-{member}``."""

    ID = enum.auto()


class Hand:
    """A small history written by hand: every event at an explicit mono."""

    def __init__(self, run_id: str = "h") -> None:
        self.run_id = run_id
        self.events: list[Event] = []
        self.seq = 0

    def at(self, mono: float) -> dict[str, Any]:
        return {"run_id": self.run_id, "ts": T0 + mono, "mono": mono}

    def ack(self, mono: float, p: int, offset: int, *, producer: str = "producer-0") -> str:
        value_id = value_id_for(self.run_id, producer, self.seq)
        self.events.append(
            SendInvoke(
                process=producer,
                value_id=value_id,
                producer=producer,
                seq=self.seq,
                topic=TOPIC,
                **self.at(mono - 0.001),
            )
        )
        self.events.append(
            SendOutcome(
                process=producer, value_id=value_id, outcome="ok", partition=p, offset=offset, **self.at(mono)
            )
        )
        self.seq += 1
        return value_id

    def deliver(
        self,
        mono: float,
        p: int,
        offset: int,
        value_id: str,
        member: str = "a",
        *,
        member_id: str | Own | None = Own.ID,
    ) -> None:
        """A delivery by ``consumer-{member}`` as member ``m-{member}`` (``member_id``: that id instead;
        ``None``: none, as a consumer outside a group)."""
        self.events.append(
            Delivery(
                process=f"consumer-{member}",
                group=GROUP,
                topic=TOPIC,
                partition=p,
                offset=offset,
                value_id=value_id,
                member=f"m-{member}" if member_id is Own.ID else member_id,
                **self.at(mono),
            )
        )

    def rebalance(self, mono: float, action: str, member: str, partitions: list[int]) -> None:
        self.events.append(
            Rebalance(
                process=f"consumer-{member}",
                action=action,  # type: ignore[arg-type]
                group=GROUP,
                member=f"m-{member}",
                partitions=tuple(PartitionOffset(topic=TOPIC, partition=p) for p in partitions),
                **self.at(mono),
            )
        )

    def txn(self, mono: float, action: str, value_ids: tuple[str, ...] = ()) -> None:
        self.events.append(
            TxnMarker(
                process="producer-t",
                action=action,  # type: ignore[arg-type]
                transactional_id="tx",
                outcome="ok",
                value_ids=value_ids,
                **self.at(mono),
            )
        )

    def consumer(self, isolation: str = RC) -> Consumption:
        return reference_audit(self.events, [], options(isolation), run_id=self.run_id).availability.consumer


def killed_member(*, leaves: bool) -> Hand:
    """Two members; b owns partition 1 and is killed at 5.0 (``leaves``: it revokes at 5.0 instead); a gets
    partition 1 at 15.9 and delivers its backlog at 16.0."""
    h = Hand()
    h.rebalance(0.0, "assign", "a", [0])
    h.rebalance(0.0, "assign", "b", [1])
    offsets = [0, 0]
    for n in range(20):
        mono = 1.0 + n * 0.5
        p = n % 2
        v = h.ack(mono, p, offsets[p])
        if p == 0 or mono < 5.0:
            h.deliver(mono + 0.02, p, offsets[p], v, "a" if p == 0 else "b")
        offsets[p] += 1
    if leaves:
        h.rebalance(5.0, "revoke", "b", [1])
    h.rebalance(15.9, "assign", "a", [0, 1])
    for offset in range(4, 10):  # b delivered offsets 0..3 (acked at 1.5, 2.5, 3.5, 4.5)
        h.deliver(16.0 + offset * 0.001, 1, offset, value_id_for("h", "producer-0", 2 * offset + 1))
    h.rebalance(17.0, "revoke", "a", [0, 1])
    return h


def owners_apart_by_one_field() -> Hand:
    """Two partitions, each handed over once at 5.5: partition 0 from consumer-a without a member id to
    consumer-a as m-a (apart by the null member), partition 1 from consumer-a to consumer-b, both
    without one (apart by the process)."""
    h = Hand("owners")
    turns = {0: (("a", None), ("a", "m-a")), 1: (("a", None), ("b", None))}
    for p, (before, after) in turns.items():
        for offset in range(6):
            process, member_id = before if offset < 3 else after
            mono = 1.0 + offset + (2.0 if offset >= 3 else 0.0)
            h.deliver(mono + 0.5, p, offset, h.ack(mono, p, offset), process, member_id=member_id)
    return h


def test_owners_apart_by_a_null_member_or_the_process_hand_over() -> None:
    # each partition's last delivery before the turn: offset 2 at 3.5; the new owner's first: offset 3 at 6.5
    assert owners_apart_by_one_field().consumer().handovers == (
        Handover(TOPIC, 0, "consumer-a", None, "consumer-a", "m-a", 3.5, 6.5, 3.0, False),
        Handover(TOPIC, 1, "consumer-a", None, "consumer-b", None, 3.5, 6.5, 3.0, False),
    )


def test_a_killed_members_partition_stalls_until_another_member_takes_it() -> None:
    consumer = killed_member(leaves=False).consumer()
    longest = consumer.longest_gap()
    # b's last delivery: offset 3 at 4.52; offset 4 of partition 1 acked at 5.5; a delivers it at 16.004
    assert longest == ConsumeGap(TOPIC, 1, 16.004 - 5.5, 5.5, 16.004, True)
    assert consumer.handovers == (
        Handover(TOPIC, 1, "consumer-b", "m-b", "consumer-a", "m-a", 4.52, 16.004, 16.004 - 4.52, False),
    )
    (gap0,) = [g for g in consumer.gaps if g.partition == 0]
    assert gap0.gap_s < 0.5  # partition 0 kept flowing: each record delivered 20 ms after its ack


def test_a_member_that_left_hands_over_from_its_revoke() -> None:
    (handover,) = killed_member(leaves=True).consumer().handovers
    assert (handover.start_mono, handover.left, handover.handover_s) == (5.0, True, 16.004 - 5.0)


def test_a_read_committed_group_behind_an_open_transaction_stalls_until_it_ends() -> None:
    """A transaction opened at offset 2 of partition 0 blocks the read_committed group; the plain records
    after it (acked at 3.0, 4.0, …) wait until the abort at 20.0 — at read_uncommitted nothing waits."""
    h = Hand()
    h.rebalance(0.0, "assign", "a", [0])
    for offset in range(2):
        h.deliver(offset + 1.05, 0, offset, h.ack(offset + 1.0, 0, offset))
    h.txn(2.0, "begin")
    stuck = h.ack(2.5, 0, 2, producer="producer-t")
    plain = [h.ack(3.0 + n, 0, 3 + n) for n in range(5)]
    h.txn(20.0, "abort", (stuck,))
    for n, v in enumerate(plain):
        h.deliver(20.1 + n * 0.01, 0, 3 + n, v)
    h.rebalance(21.0, "revoke", "a", [0])
    blocked = h.consumer(RC)
    assert blocked.longest_gap() == ConsumeGap(TOPIC, 0, 20.1 - 3.0, 3.0, 20.1, True)
    assert blocked.e2e.count == 7
    assert blocked.e2e.p99_ms == (20.1 - 3.0) * 1000.0
    # read_uncommitted: the open transaction's record is readable at its ack (2.5) and never delivered
    assert h.consumer(RU).longest_gap() == ConsumeGap(TOPIC, 0, 20.1 - 2.5, 2.5, 20.1, True)


def test_a_committed_transactions_records_are_readable_at_its_commit() -> None:
    h = Hand()
    h.rebalance(0.0, "assign", "a", [0])
    h.deliver(1.05, 0, 0, h.ack(1.0, 0, 0))
    h.txn(2.0, "begin")
    v = h.ack(2.5, 0, 1, producer="producer-t")
    h.txn(4.0, "commit", (v,))
    h.deliver(4.5, 0, 1, v)
    h.rebalance(5.0, "revoke", "a", [0])
    assert h.consumer(RC).longest_gap() == ConsumeGap(TOPIC, 0, 0.5, 4.0, 4.5, True)
    assert h.consumer(RC).e2e == LatencyStats(2, (1.05 - 1.0) * 1000.0, 500.0)
    assert h.consumer(RU).longest_gap() == ConsumeGap(TOPIC, 0, 2.0, 2.5, 4.5, True)


def test_a_stall_still_open_at_the_groups_last_event_ends_there_unresumed() -> None:
    h = Hand()
    h.rebalance(0.0, "assign", "a", [0])
    h.deliver(1.1, 0, 0, h.ack(1.0, 0, 0))
    h.ack(2.0, 0, 1)
    h.rebalance(9.0, "revoke", "a", [0])
    assert h.consumer().gaps == (ConsumeGap(TOPIC, 0, 7.0, 2.0, 9.0, False),)
    late = Hand()
    late.rebalance(0.0, "assign", "a", [0])
    late.deliver(1.1, 0, 0, late.ack(1.0, 0, 0))
    late.rebalance(9.0, "revoke", "a", [0])
    late.ack(30.0, 0, 1)  # after the group's last event: starts no stall
    assert late.consumer().gaps == ()


def test_lag_is_the_readable_offsets_the_group_has_not_delivered() -> None:
    h = Hand()
    h.rebalance(0.0, "assign", "a", [0])
    h.deliver(1.0, 0, 0, h.ack(0.5, 0, 0))
    for n in range(1, 6):
        h.ack(1.0 + n, 0, n)
    h.deliver(120.0, 0, 5, value_id_for("h", "producer-0", 5))
    consumer = h.consumer()
    n, step = lag_grid(1.0, 120.0)
    assert [p.mono for p in consumer.lag] == [1.0 + i * step for i in range(n)]
    assert consumer.lag[0] == LagPoint(1.0, 0)
    # step 1 s: the record acked at 1.0 + n counts from point n on
    assert [p.lag for p in consumer.lag[:7]] == [0, 1, 2, 3, 4, 5, 5]
    assert consumer.lag[-1].lag == 0
    assert consumer.max_lag() == LagPoint(6.0, 5)


def test_no_delivery_no_consumer_figures() -> None:
    h = Hand()
    h.ack(1.0, 0, 0)
    assert h.consumer() == Consumption()


def test_e2e_per_fault_window_phases_by_the_readable_time() -> None:
    from chaos.run.events import FaultEvent

    h = Hand()
    h.rebalance(0.0, "assign", "a", [0])
    for n, (ack, delay) in enumerate([(1.0, 0.01), (5.0, 2.0), (6.0, 1.0), (12.0, 0.03)]):
        h.deliver(ack + delay, 0, n, h.ack(ack, 0, n))
    h.events.insert(
        0, FaultEvent(process="nemesis", action="inject", fault="pause", target="b1", **h.at(4.0))
    )
    h.events.append(FaultEvent(process="nemesis", action="heal", fault="pause", target="b1", **h.at(10.0)))
    (window,) = reference_audit(h.events, [], options(RC), run_id="h").availability.windows
    assert (window.e2e_before.count, window.e2e_during.count, window.e2e_after.count) == (1, 2, 1)
    assert window.e2e_during.p99_ms == 2000.0
    assert window.e2e_during.p50_ms == 1000.0


def test_the_handover_rule_on_its_own() -> None:
    a, b = ("consumer-a", "m-a"), ("consumer-b", "m-b")
    moves = [((1.0, 10, *a), (9.0, 30, *b)), ((20.0, 40, *b), (22.0, 50, *a))]
    leaves = [(3.0, 20, *a), (2.5, 15, *b), (4.0, 25, *a)]  # b's callback is not a's leave
    found = longest_handover(TOPIC, 1, moves, leaves)
    assert found == Handover(TOPIC, 1, *a, *b, 3.0, 9.0, 6.0, True)
    assert longest_handover(TOPIC, 1, [], leaves) is None


# ---- audit.json ------------------------------------------------------------------------------------


def test_audit_json_round_trips_the_consumer_side_and_older_files_read_as_empty() -> None:
    h = killed_member(leaves=True)
    facts = reference_audit(h.events, [], options(RC), run_id="h")
    assert facts.availability.consumer.handovers
    result = judge(facts, "at_least_once", "reference")
    again = AuditResult.from_dict(json.loads(result.to_json()))
    assert again == result
    data = json.loads(result.to_json())
    consumer = data["facts"]["availability"]["consumer"]
    assert consumer["longest_gap_s"] == facts.availability.consumer.longest_gap().gap_s  # type: ignore[union-attr]
    assert consumer["longest_handover_s"] == 16.004 - 5.0
    del data["facts"]["availability"]["consumer"]
    for w in data["facts"]["availability"]["windows"]:
        for phase in ("e2e_before", "e2e_during", "e2e_after"):
            del w[phase]
    older = AuditResult.from_dict(data)
    assert older.facts.availability.consumer == Consumption()
    assert older.facts.availability == dataclasses.replace(facts.availability, consumer=Consumption())


def test_availability_defaults_keep_older_constructors() -> None:
    assert Availability(None, None, None).consumer == Consumption()
    assert Consumption.from_dict(None) == Consumption()
    assert Consumption().longest_gap() is None
    assert Consumption().max_lag() is None


# ---- Spark ---------------------------------------------------------------------------------------------


def test_spark_agrees_with_the_reference_on_consumer_worlds_and_generated_runs(
    audit_spark: Any, clean_value_ids: Any
) -> None:
    """Consumer worlds at each isolation level (one job each, with ``test_audit_properties``'s runs in the
    read_committed one); every run's facts — the consumer side included — equal the reference's."""
    by_level: dict[str, list[tuple[str, Case]]] = {RC: [], RU: []}

    @settings(max_examples=160)
    @given(plan=consumer_plans())
    def collect(plan: ConsumerPlan) -> None:
        of_level = by_level[plan.isolation]
        run_id = f"c{plan.isolation[5]}{len(of_level)}"
        of_level.append((run_id, world(plan, run_id).case()))

    @settings(max_examples=60)
    @given(plan=plans())
    def collect_plain(plan: Any) -> None:
        run_id = f"p{len(by_level[RC])}"
        case = build(plan, run_id)
        case.options = options(RC)
        by_level[RC].append((run_id, case))

    services = itertools.count()

    @settings(max_examples=40)
    @given(plan=consumer_plans())
    def collect_service(plan: ConsumerPlan) -> None:
        # the levels in turn, so that each gets half the service worlds whatever the draws
        plan = dataclasses.replace(plan, isolation=(RC, RU)[next(services) % 2])
        of_level = by_level[plan.isolation]
        run_id = f"s{plan.isolation[5]}{len(of_level)}"
        of_level.append((run_id, through_a_service(world(plan, run_id))))

    collect()
    collect_plain()
    collect_service()
    hand = owners_apart_by_one_field()
    by_level[RC].append((hand.run_id, Case(hand.events, [])))
    for level, cases in by_level.items():
        assert len(cases) >= 50
        with_handover = sum(
            bool(reference_audit(c.events, c.log, options(level)).availability.consumer.handovers)
            for _, c in cases
        )
        assert with_handover >= 10
        with_service = sum(
            bool(reference_audit(c.events, c.log, options(level)).availability.consumer.service_gaps)
            for _, c in cases
        )
        assert with_service >= 10
        assert_spark_agrees(audit_spark, clean_value_ids, cases, options(level))


@pytest.mark.parametrize("isolation", [RC, RU])
def test_worlds_are_valid_histories(isolation: str) -> None:
    """Guards the generator: offsets increase per partition, deliveries never precede readability."""
    plan = ConsumerPlan(2, 2, isolation, ((0, "plain", 0), (1, "commit", 1), (0, "abort", 0)) * 4,  # type: ignore[arg-type]
                        (0.01,), 3, 1, 5.0, 2, "killed", True, 1, True, True)  # fmt: skip
    w = world(plan)
    assert w.stall_start is not None
    assert w.stall_end is not None
    assert w.stall_end - w.stall_start >= 5.0
    for v, m in w.first_delivery.items():
        assert m >= w.readable_at[v]
