"""Jepsen's order checks (docs/audit.md, "Order checks"): ``poll_skip``, ``nonmonotonic_poll``,
``nonmonotonic_send`` and ``precommitted_read``.

Hand cases show what is and is not an instance (an offset gap left by a transaction marker or an aborted
record is no skip; a rebalance, a seek, a new member id or a rolled-back read excuses a consumer going back).
Property tests plant each check in generated *order worlds* — plain and transactional producers whose
commit and abort markers leave offset gaps, consumers handing partitions over (re-reading from a committed
position), restarting under a new member id, a transactional worker aborting and re-reading its batches —
and the reference must report exactly the planted instances of the four checks (the other anomalies the
worlds cause, duplicates and unseen values, are not the subject here). The literal transcription of the
definitions the older generators extend their expectations with (``order_checks``) must agree too. The
Spark job must return exactly the reference's facts for all of them, in ONE job.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chaos.audit.checks import order
from chaos.audit.facts import (
    ANOMALIES,
    JEPSEN_ORDER_CHECKS,
    AnomalyReport,
    AuditFacts,
    AuditOptions,
    Availability,
    Example,
    Isolation,
    LogRecord,
    Totals,
)
from chaos.audit.reference import reference_audit
from chaos.audit.verdict import AuditResult, judge
from chaos.run.events import (
    Delivery,
    Event,
    PartitionOffset,
    ProbeCall,
    Rebalance,
    SendInvoke,
    SendOutcome,
    TxnMarker,
    value_id_for,
)
from tests.unit.audit.test_audit_properties import (
    Case,
    Clock,
    assert_spark_agrees,
    drain_events,
    order_checks,
)

TOPIC: Final = "chaos"
GROUP: Final = "g"
RC: Final = "read_committed"
RU: Final = "read_uncommitted"
PLANTS: Final = ("none", "poll_skip", "nonmonotonic_poll", "nonmonotonic_send", "precommitted_read")


@dataclass
class Record:
    """A record in the topic; ``aborted``: its transaction aborted (read at read_uncommitted only)."""

    partition: int
    offset: int
    value_id: str
    key: str | None
    aborted: bool = False


@dataclass
class History:
    """A run built event by event, with the records it wrote and the order-check instances expected."""

    run_id: str
    isolation: Isolation = RC
    clock: Clock = field(init=False)
    events: list[Event] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    next_offset: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    seqs: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    expected: dict[str, list[Example]] = field(default_factory=lambda: {n: [] for n in JEPSEN_ORDER_CHECKS})
    steps: tuple[float, ...] = (0.5, 0.25, 1.0, 0.125)

    def __post_init__(self) -> None:
        self.clock = Clock(self.run_id, self.steps)

    def tick(self) -> dict[str, Any]:
        return self.clock.tick()

    def write(self, partition: int, value_id: str, key: str | None, aborted: bool = False) -> int:
        offset = self.next_offset[partition]
        self.next_offset[partition] += 1
        self.records.append(Record(partition, offset, value_id, key, aborted))
        return offset

    def marker(self, partitions: set[int]) -> None:
        """A transaction's commit or abort marker: one offset in each partition it wrote to."""
        for partition in sorted(partitions):
            self.next_offset[partition] += 1

    def invoke(self, producer: str, key: str | None = None) -> str:
        seq = self.seqs[producer]
        self.seqs[producer] += 1
        value_id = value_id_for(self.run_id, producer, seq)
        self.events.append(
            SendInvoke(process=producer, value_id=value_id, producer=producer, seq=seq, topic=TOPIC, key=key,
                       **self.tick())
        )  # fmt: skip
        return value_id

    def acked(self, producer: str, value_id: str, partition: int, offset: int) -> SendOutcome:
        out = SendOutcome(
            process=producer,
            value_id=value_id,
            outcome="ok",
            partition=partition,
            offset=offset,
            **self.tick(),
        )
        self.events.append(out)
        return out

    def send(self, producer: str, partition: int, key: str | None = None, aborted: bool = False) -> Record:
        """An acked send written at the partition's next offset."""
        value_id = self.invoke(producer, key)
        offset = self.write(partition, value_id, key, aborted)
        self.acked(producer, value_id, partition, offset)
        return self.records[-1]

    def txn(self, process: str, action: str, transactional_id: str = "tx-0") -> None:
        self.events.append(
            TxnMarker(process=process, action=action, transactional_id=transactional_id, outcome="ok",  # type: ignore[arg-type]
                      **self.tick())
        )  # fmt: skip

    def deliver(self, process: str, member: str | None, record: Record) -> Delivery:
        d = Delivery(
            process=process, group=GROUP, topic=TOPIC, partition=record.partition, offset=record.offset,
            value_id=record.value_id, key=record.key, member=member, **self.tick(),
        )  # fmt: skip
        self.events.append(d)
        return d

    def rebalance(self, process: str, member: str | None, action: str, partition: int) -> None:
        self.events.append(
            Rebalance(process=process, action=action, group=GROUP, member=member,  # type: ignore[arg-type]
                      partitions=(PartitionOffset(topic=TOPIC, partition=partition),), **self.tick())
        )  # fmt: skip

    def seek(self, process: str, partition: int, offset: int) -> None:
        self.events.append(
            ProbeCall(process=process, operation="seek", duration_ms=1.0, topic=TOPIC, partition=partition,
                      offset=offset, **self.tick())
        )  # fmt: skip

    def expect(self, anomaly: str, d: Delivery | SendOutcome, value_id: str | None = None) -> None:
        if isinstance(d, Delivery):
            self.expected[anomaly].append(Example(d.value_id, d.topic, d.partition, d.offset, d.ts))
        else:
            self.expected[anomaly].append(Example(value_id, TOPIC, d.partition, d.offset, d.ts))

    def visible(self, partition: int) -> list[Record]:
        """The partition's records a reader at the group's level sees, in offset order."""
        return sorted(
            (r for r in self.records if r.partition == partition and (self.isolation == RU or not r.aborted)),
            key=lambda r: r.offset,
        )

    def case(self) -> Case:
        """Drained at both levels (read_committed leaves the aborted records out)."""
        log = [
            LogRecord(TOPIC, r.partition, r.offset, r.value_id, level, r.key)
            for r in self.records
            for level in (RU, RC)
            if level == RU or not r.aborted
        ]
        partitions = sorted({r.partition for r in self.records} | set(self.next_offset))
        ends = [(TOPIC, p, level, self.next_offset[p]) for p in partitions for level in (RU, RC)]
        expected = {name: list(found) for name, found in self.expected.items()}
        options = AuditOptions(group_isolation=self.isolation, max_examples=100)
        return Case(self.events + drain_events(self.tick, log, ends), log, expected, options)


def audit(case: Case) -> AuditFacts:
    assert case.options is not None
    return reference_audit(case.events, case.log, case.options)


def assert_order_checks(case: Case) -> AuditFacts:
    """The reference reports exactly the expected instances of the four checks (counts and examples), and the
    literal transcription of the definitions finds the same."""
    assert case.options is not None
    facts = audit(case)
    assert facts.problems == ()
    for name in JEPSEN_ORDER_CHECKS:
        want = sorted(case.expected[name], key=Example.sort_key)
        report = facts.anomaly(name)
        assert (report.count, list(report.examples)) == (len(want), want), name
    transcribed = order_checks(case.events, case.log, case.options.group_isolation)
    assert {n: sorted(x, key=Example.sort_key) for n, x in transcribed.items()} == {
        n: sorted(case.expected[n], key=Example.sort_key) for n in JEPSEN_ORDER_CHECKS
    }
    return facts


# ---- hand cases -----------------------------------------------------------------------------------------


def marker_gap(run_id: str = "gap", isolation: Isolation = RC, skip_aborted: bool = False) -> Case:
    """Offsets 0-1 plain, 2-3 a committed transaction, 4 its commit marker, 5 an aborted transaction's
    record, 6 its marker, 7 plain. The consumer delivers 0, 1, 2, 3, 7 (at read_uncommitted also the
    aborted 5, unless ``skip_aborted``)."""
    h = History(run_id, isolation)
    plain = [h.send("producer-0", 0) for _ in range(2)]
    h.txn("tp-0", "begin")
    committed = [h.send("tp-0", 0) for _ in range(2)]
    h.txn("tp-0", "commit")
    h.marker({0})
    h.txn("tp-0", "begin")
    aborted = h.send("tp-0", 0, aborted=True)
    h.txn("tp-0", "abort")
    h.marker({0})
    last = h.send("producer-0", 0)
    h.rebalance("consumer-0", "m1", "assign", 0)
    for r in [*plain, *committed]:
        h.deliver("consumer-0", "m1", r)
    if isolation == RU and not skip_aborted:
        h.deliver("consumer-0", "m1", aborted)
    d = h.deliver("consumer-0", "m1", last)
    if isolation == RU and skip_aborted:
        h.expect("poll_skip", d)
    return h.case()


def test_offset_gaps_of_markers_and_aborted_records_are_no_skip() -> None:
    assert_order_checks(marker_gap())
    assert_order_checks(marker_gap("gap-ru", RU))
    # a read_uncommitted consumer does see the aborted record: jumping over it is a skip
    facts = assert_order_checks(marker_gap("gap-ru-skip", RU, skip_aborted=True))
    assert facts.anomaly("poll_skip").count == 1


def skip_and_back(run_id: str, between: str | None) -> Case:
    """consumer-0 delivers 0, 1, 3 (skipping 2), then 1 again (going back), with ``between`` recorded
    before the skip's and the going-back deliveries: nothing, a rebalance or a seek of consumer-0, or a
    rebalance of another consumer."""
    h = History(run_id)
    records = [h.send("producer-0", 0) for _ in range(4)]
    h.rebalance("consumer-0", "m1", "assign", 0)
    h.deliver("consumer-0", "m1", records[0])
    h.deliver("consumer-0", "m1", records[1])

    def interlude() -> None:
        if between == "rebalance":
            h.rebalance("consumer-0", "m1", "revoke", 0)
            h.rebalance("consumer-0", "m1", "assign", 0)
        elif between == "seek":
            h.seek("consumer-0", 0, 3)
        elif between == "other_rebalance":
            h.rebalance("consumer-1", "m9", "assign", 1)

    interlude()
    skipped = h.deliver("consumer-0", "m1", records[3])
    interlude()
    back = h.deliver("consumer-0", "m1", records[1])
    if between in (None, "other_rebalance"):
        h.expect("poll_skip", skipped)
        h.expect("nonmonotonic_poll", back)
    return h.case()


@pytest.mark.parametrize("between", [None, "rebalance", "seek", "other_rebalance"])
def test_a_consumer_skipping_or_going_back_unless_its_position_moved(between: str | None) -> None:
    facts = assert_order_checks(skip_and_back(f"between-{between}", between))
    moved = between in ("rebalance", "seek")
    assert facts.anomaly("poll_skip").count == facts.anomaly("nonmonotonic_poll").count == (0 if moved else 1)


def restarted(run_id: str = "restart", member_after: str = "m2") -> Case:
    """consumer-0 delivers 0, 1, 2, is killed and restarts (no callback recorded) as ``member_after``,
    re-reading 1, 2, 3 from its committed offset."""
    h = History(run_id)
    records = [h.send("producer-0", 0) for _ in range(4)]
    h.rebalance("consumer-0", "m1", "assign", 0)
    for r in records[:3]:
        h.deliver("consumer-0", "m1", r)
    again = [h.deliver("consumer-0", member_after, r) for r in records[1:]]
    if member_after == "m1":
        h.expect("nonmonotonic_poll", again[0])
    return h.case()


def test_a_new_member_id_is_a_new_consumer() -> None:
    """A restart (new member id) re-reading from its committed offset goes back legitimately; under the
    same member id it would not."""
    assert assert_order_checks(restarted()).anomaly("nonmonotonic_poll").count == 0
    assert assert_order_checks(restarted("same-member", "m1")).anomaly("nonmonotonic_poll").count == 1


def rolled_back(run_id: str = "rolled-back", abort: bool = True) -> Case:
    """A worker reads offsets 0-1 in a committed attempt, 2-3 in one it aborts (or, not ``abort``, commits),
    then 2-3 again: after an abort it rewinds and the aborted attempt's reads did not happen."""
    h = History(run_id)
    records = [h.send("producer-0", 0) for _ in range(4)]
    h.rebalance("worker-0", "w1", "assign", 0)
    for batch, end in ((records[:2], "commit"), (records[2:], "abort" if abort else "commit")):
        h.txn("worker-0", "begin", "tx-w")
        for r in batch:
            h.deliver("worker-0", "w1", r)
        h.txn("worker-0", end, "tx-w")
    h.txn("worker-0", "begin", "tx-w")
    again = [h.deliver("worker-0", "w1", r) for r in records[2:]]
    h.txn("worker-0", "commit", "tx-w")
    if not abort:
        h.expect("nonmonotonic_poll", again[0])
    return h.case()


def test_reads_rolled_back_by_an_abort_are_left_out() -> None:
    assert audit(rolled_back()).anomaly("nonmonotonic_poll").count == 0
    assert_order_checks(rolled_back())
    assert_order_checks(rolled_back("committed-twice", abort=False))


def sends_in_order(run_id: str = "sends") -> Case:
    """producer-0 acked at 0, 1, 3, 2 in partition 0 (a retried batch written late: the fourth send goes
    back) and at 0, 0 in partition 1 (a second ack at the same offset); producer-1 interleaves in partition
    0 at lower offsets than producer-0's last (no instance: per producer)."""
    h = History(run_id)
    acked = []
    for offset in (0, 1, 3, 2):
        value_id = h.invoke("producer-0")
        acked.append((value_id, h.acked("producer-0", value_id, 0, offset)))
    h.expect("nonmonotonic_send", acked[-1][1], acked[-1][0])
    for offset in (4, 5):
        value_id = h.invoke("producer-1")
        h.acked("producer-1", value_id, 0, offset)
    for _ in range(2):
        value_id = h.invoke("producer-0")
        acked.append((value_id, h.acked("producer-0", value_id, 1, 0)))
    h.expect("nonmonotonic_send", acked[-1][1], acked[-1][0])
    h.next_offset.update({0: 6, 1: 1})
    return h.case()


def test_a_producer_acked_at_or_below_its_previous_offset() -> None:
    facts = assert_order_checks(sends_in_order())
    assert facts.anomaly("nonmonotonic_send").count == 2


def peeked(run_id: str = "peek", isolation: Isolation = RC) -> Case:
    """tp-0's transaction sends a, b, c; a reader reads a before b is invoked (precommitted), another reads
    b after c's ack but before the commit marker (the commit may have taken effect: no instance); after the
    commit the group reads everything."""
    h = History(run_id, isolation)
    h.txn("tp-0", "begin")
    a = h.send("tp-0", 0)
    early = h.deliver("peeker-0", "p1", a)
    b = h.send("tp-0", 0)
    c = h.send("tp-0", 0)
    h.deliver("peeker-1", "p2", b)
    h.txn("tp-0", "commit")
    h.marker({0})
    for r in (a, b, c):
        h.deliver("consumer-0", "m1", r)
    if isolation == RC:
        h.expect("precommitted_read", early)
    return h.case()


def test_a_read_committed_read_before_its_producer_asked_to_commit() -> None:
    assert assert_order_checks(peeked()).anomaly("precommitted_read").count == 1
    # at read_uncommitted an open transaction's records are there to be read
    assert assert_order_checks(peeked("peek-ru", RU)).anomaly("precommitted_read").count == 0


HAND_CASES: Final[dict[str, Callable[[str], Case]]] = {
    "gap": marker_gap,
    "between-None": lambda run: skip_and_back(run, None),
    "between-rebalance": lambda run: skip_and_back(run, "rebalance"),
    "between-seek": lambda run: skip_and_back(run, "seek"),
    "restart": restarted,
    "rolled-back": rolled_back,
    "sends": sends_in_order,
    "peek": peeked,
}
"""The hand cases at read_committed (the Spark job's isolation level), by run id."""


@pytest.mark.parametrize(
    ("guarantee", "fails"),
    [
        ("at_most_once", set()),
        ("at_least_once", {"poll_skip"}),
        ("idempotent", {"poll_skip", "nonmonotonic_send"}),
        ("exactly_once", set(JEPSEN_ORDER_CHECKS)),
    ],
)
def test_the_guarantees_each_check_fails(guarantee: str, fails: set[str]) -> None:
    for name in JEPSEN_ORDER_CHECKS:
        facts = AuditFacts(
            "r",
            tuple((n, AnomalyReport(1 if n == name else 0)) for n in ANOMALIES),
            Availability(None, None, None),
            Totals(1, 1, 0, 0, 1, 1),
        )
        result = judge(facts, guarantee, "reference")
        assert (result.verdict, result.failed_by) == (("fail", (name,)) if name in fails else ("pass", ()))


def test_an_audit_json_from_before_the_checks_reads_them_as_not_found() -> None:
    result = judge(audit(sends_in_order()), "idempotent", "reference")
    data = result.to_dict()
    for name in JEPSEN_ORDER_CHECKS:
        del data["facts"]["anomalies"][name]
    old = AuditResult.from_dict(data)
    assert all(old.facts.anomaly(name).count == 0 for name in JEPSEN_ORDER_CHECKS)
    assert old.verdict == "fail"  # the verdict it was written with stands
    del data["facts"]["anomalies"]["lost_acked"]
    with pytest.raises(KeyError, match="lost_acked"):
        AuditResult.from_dict(data)


def test_the_report_explains_every_anomaly_with_jepsens_name_for_the_order_checks() -> None:
    from chaos.report.explain import ANOMALY_HINTS, ANOMALY_TEXT

    assert set(ANOMALY_TEXT) == set(ANOMALIES)
    for name in JEPSEN_ORDER_CHECKS:
        assert f"(Jepsen: {name.replace('_', '-')})" in ANOMALY_TEXT[name]
        assert name in ANOMALY_HINTS


# ---- generated order worlds ---------------------------------------------------------------------------


@dataclass(frozen=True)
class OrderPlan:
    """A drawn world: what it plants, the group's level, the production steps and, per partition, the
    owners that read it in turn."""

    plant: str
    isolation: Isolation
    partitions: int
    # ("plain", producer, partitions of its sends) or ("commit" / "abort", 0, partitions of its sends)
    production: tuple[tuple[str, int, tuple[int, ...]], ...]
    # per partition: (owner kind, records to read, records to re-read from before the previous cut)
    runs: tuple[tuple[tuple[str, int, int], ...], ...]
    choices: tuple[int, ...]
    steps: tuple[float, ...]


@st.composite
def order_plans(draw: st.DrawFn, plant: str, isolation: Isolation | None = None) -> OrderPlan:
    partitions = draw(st.integers(1, 2))
    part = st.integers(0, partitions - 1)
    plain = st.tuples(st.just("plain"), st.integers(0, 1), st.lists(part, min_size=1, max_size=4).map(tuple))
    txn = st.tuples(
        st.sampled_from(["commit", "commit", "abort"]),
        st.just(0),
        st.lists(part, min_size=1, max_size=3).map(tuple),
    )
    production = tuple(draw(st.lists(plain | txn, min_size=2, max_size=6)))
    owner = st.sampled_from(["member", "member", "restart", "worker"])
    run = st.tuples(owner, st.integers(1, 6), st.integers(0, 2))
    runs = tuple(tuple(draw(st.lists(run, min_size=1, max_size=3))) for _ in range(partitions))
    level = isolation or draw(st.sampled_from([RC, RU]))
    choices = tuple(draw(st.lists(st.integers(0, 2**16), min_size=6, max_size=6)))
    steps = tuple(draw(st.lists(st.floats(0.001, 2.0, allow_nan=False), min_size=4, max_size=4)))
    return OrderPlan(plant, level, partitions, production, runs, choices, steps)  # type: ignore[arg-type]


@dataclass
class Send:
    step: int  # the production step it belongs to
    producer: str
    partition: int
    offset: int


def build_world(plan: OrderPlan, run_id: str) -> tuple[Case, set[str]]:
    """The world and the branches it took (for the guard test)."""
    h = History(run_id, plan.isolation, steps=plan.steps)
    taken: set[str] = set()
    # production, as data first (in invoke order): the nonmonotonic_send plant swaps two acks before the
    # events are written
    sends: list[Send] = []
    for step, (kind, producer, where) in enumerate(plan.production):
        name = f"producer-{producer}" if kind == "plain" else "tp-0"
        for partition in where:
            sends.append(Send(step, name, partition, h.next_offset[partition]))
            h.next_offset[partition] += 1
        if kind != "plain":
            h.marker(set(where))
            taken.add(f"txn_{kind}")
    if plan.plant == "nonmonotonic_send":
        pairs = []  # a plain producer's two successive sends to one partition
        for i, a in enumerate(sends):
            later = [
                j
                for j in range(i + 1, len(sends))
                if (sends[j].producer, sends[j].partition) == (a.producer, a.partition)
            ]
            if later and a.producer != "tp-0":
                pairs.append((i, later[0]))
        if pairs:
            i, j = pairs[plan.choices[0] % len(pairs)]
            sends[i].offset, sends[j].offset = sends[j].offset, sends[i].offset
            taken.add("planted")
    in_txn = [
        step for step, (kind, _, where) in enumerate(plan.production) if kind != "plain" and len(where) >= 2
    ]
    peeked = in_txn[plan.choices[1] % len(in_txn)] if in_txn else None
    for step, (kind, _, _) in enumerate(plan.production):
        of_step = [(i, s) for i, s in enumerate(sends) if s.step == step]
        if kind != "plain":
            h.txn("tp-0", "begin")
        for n, (i, s) in enumerate(of_step):
            value_id = h.invoke(s.producer)
            record = Record(s.partition, s.offset, value_id, None, aborted=kind == "abort")
            h.records.append(record)
            out = h.acked(s.producer, value_id, s.partition, s.offset)
            earlier = [t for t in sends[:i] if (t.producer, t.partition) == (s.producer, s.partition)]
            if earlier and s.offset <= earlier[-1].offset:
                h.expect("nonmonotonic_send", out, value_id)
            if step == peeked and n == 0 and plan.plant == "precommitted_read":
                d = h.deliver("peeker-0", "p1", record)  # before the attempt's next invoke
                taken.add("planted")
                if plan.isolation == RC:
                    h.expect("precommitted_read", d)
            if step == peeked and n == len(of_step) - 1:
                h.deliver("peeker-1", "p2", record)  # after its last invoke, before its end: no instance
        if kind != "plain":
            h.txn("tp-0", kind)
    if any(r.aborted for r in h.records):
        taken.add("aborted_records")
    # consumption, one partition after another
    generation: dict[str, int] = defaultdict(int)  # process -> its restarts
    plant_done = plan.plant not in ("poll_skip", "nonmonotonic_poll")
    for partition, runs in enumerate(plan.runs):
        visible = h.visible(partition)
        cut = 0
        previous: tuple[str, str] | None = None
        for number, (kind, length, back) in enumerate(runs):
            start = max(cut - back, 0)
            end = len(visible) if number == len(runs) - 1 else min(start + length, len(visible))
            batch = visible[start:end]
            restart = kind == "restart" and previous is not None and previous[0].startswith("consumer")
            if restart:
                assert previous is not None
                process = previous[0]
                generation[process] += 1  # a new member id, no callback recorded
                taken.add("restart")
            else:
                process = "worker-0" if kind == "worker" else f"consumer-{plan.choices[2 + number % 3] % 2}"
                if previous is not None:
                    h.rebalance(*previous, "revoke", partition)
                    taken.add("handover")
            member = f"{process}-m{generation[process]}"
            if not restart:
                h.rebalance(process, member, "assign", partition)
            if kind == "worker":
                _worker_reads(h, member, batch, plan.choices[5], taken)
            elif not plant_done:
                plant_done = _planted_reads(h, process, member, batch, plan, taken)
            else:
                for r in batch:
                    h.deliver(process, member, r)
            previous = (process, member)
            cut = max(cut, end)
    return h.case(), taken


def _worker_reads(h: History, member: str, batch: list[Record], choice: int, taken: set[str]) -> None:
    """A transactional worker reads in batches of two; a batch whose attempt it aborts is read again."""
    for n in range(0, len(batch), 2):
        of_batch = batch[n : n + 2]
        aborts = (choice >> (n % 16)) & 1
        for end in ["abort"] * aborts + ["commit"]:
            h.txn("worker-0", "begin", "tx-w")
            for r in of_batch:
                h.deliver("worker-0", member, r)
            h.txn("worker-0", end, "tx-w")
            if end == "abort":
                taken.add("worker_abort")


def _planted_reads(
    h: History, process: str, member: str, batch: list[Record], plan: OrderPlan, taken: set[str]
) -> bool:
    """A consumer's run of reads with the planted skip or going back, if the run allows it; whether it did."""
    if plan.plant == "poll_skip" and len(batch) >= 3:
        t = 2 + plan.choices[3] % (len(batch) - 2)
        k = 1 + plan.choices[4] % (t - 1)
        for n, r in enumerate(batch):
            if t - k <= n < t:
                continue  # skipped
            d = h.deliver(process, member, r)
            if n == t:
                h.expect("poll_skip", d)
        taken.add("planted")
        return True
    if plan.plant == "nonmonotonic_poll" and batch:
        t = plan.choices[3] % len(batch)
        b = plan.choices[4] % (t + 1)
        for n, r in enumerate(batch):
            h.deliver(process, member, r)
            if n == t:
                for m, again in enumerate(batch[t - b : t + 1]):
                    d = h.deliver(process, member, again)
                    if m == 0:
                        h.expect("nonmonotonic_poll", d)
        taken.add("planted")
        return True
    for r in batch:
        h.deliver(process, member, r)
    return False


@pytest.mark.parametrize("plant", PLANTS)
@settings(max_examples=200)
@given(data=st.data())
def test_reference_reports_exactly_the_planted_order_anomalies(plant: str, data: st.DataObject) -> None:
    case, _ = build_world(data.draw(order_plans(plant)), "run")
    assert_order_checks(case)


def test_the_generator_reaches_every_branch() -> None:
    """Guards the generator: across the same 200 draws of each plant, every plant lands, and the worlds
    hold marker gaps, aborted records, handovers, restarts and aborted worker reads."""
    seen: set[str] = set()
    for plant in PLANTS:

        @settings(max_examples=200, derandomize=True)
        @given(plan=order_plans(plant))
        def collect(plan: OrderPlan) -> None:
            case, taken = build_world(plan, "run")
            seen.update(f"{plan.plant}:{name}" for name in taken if name == "planted")
            seen.update(name for name in taken if name != "planted")
            seen.update(f"found:{name}" for name in JEPSEN_ORDER_CHECKS if case.expected[name])

        collect()
    wanted = {f"{plant}:planted" for plant in PLANTS if plant != "none"}
    wanted |= {"txn_commit", "txn_abort", "aborted_records", "handover", "restart", "worker_abort"}
    wanted |= {f"found:{name}" for name in JEPSEN_ORDER_CHECKS}
    assert wanted <= seen, wanted - seen


@pytest.mark.parametrize("links", ["hashed", "one_partition"])
def test_spark_agrees_with_reference_on_order_worlds_in_one_job(
    audit_spark: Any, clean_value_ids: Any, links: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twenty read_committed worlds per plant and the read_committed hand cases, in ONE Spark job.
    ``one_partition``: every send chain's first hash collides, so the chains of every run share one window
    partition and only their second hash keeps them apart."""
    if links == "one_partition":
        monkeypatch.setattr(order, "_link_hash", lambda F, *_columns: F.lit(0).cast("long"))
    cases: list[tuple[str, Case]] = []
    for plant in PLANTS:

        @settings(max_examples=20, derandomize=True)
        @given(plan=order_plans(plant, RC))
        def collect(plan: OrderPlan) -> None:
            run_id = f"run{len(cases)}"
            case, _ = build_world(plan, run_id)
            cases.append((run_id, dataclasses.replace(case, options=None)))

        collect()
    cases += [
        (run_id, dataclasses.replace(make(run_id), options=None)) for run_id, make in HAND_CASES.items()
    ]
    found = {name for _, case in cases for name in JEPSEN_ORDER_CHECKS if case.expected[name]}
    assert found == set(JEPSEN_ORDER_CHECKS)
    assert_spark_agrees(audit_spark, clean_value_ids, cases, AuditOptions(max_examples=3))
