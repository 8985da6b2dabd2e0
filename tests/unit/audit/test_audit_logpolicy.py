"""Property tests of what Kafka removes on purpose: generated runs on topics that delete by time, compact
(with tombstones), or had a prefix deleted by DeleteRecords — with real losses mixed in.

The expected facts come from docs/audit.md's rules transcribed here, apart from :mod:`chaos.audit.logpolicy`:
an acknowledged value absent from the log is ``expired`` below the log start of a deleting topic (or of a
DeleteRecords), ``compacted`` when a later acknowledged value of its key sits in its partition (or it is its
key's latest tombstone, older than ``delete.retention.ms`` at the drain), else ``lost_acked``; an expired
value the group never read is also ``expired_unread``. Spark must return exactly what the reference does.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from chaos.audit.facts import AuditOptions, LogRecord, PartitionRange
from chaos.audit.reference import reference_audit
from chaos.audit.verdict import AuditResult, judge
from chaos.run.events import (
    Delivery,
    DrainEnd,
    DrainRead,
    Event,
    LogStart,
    SendInvoke,
    SendOutcome,
    TopicPolicy,
    value_id_for,
)
from tests.unit.audit.test_audit_properties import Case, assert_spark_agrees

TOPIC = "chaos"
T0 = 1_700_000_000.0
M0 = 1000.0
OPTIONS = AuditOptions(max_examples=3)


@dataclass(frozen=True)
class Plan:
    policy: str | None  # None: no topic_policy recorded
    retention_ms: int
    delete_retention_ms: int
    partitions: int
    layout: tuple[tuple[int, str | None, bool], ...]  # partition, key, tombstone
    start: tuple[int, ...]  # per partition, how many of its first records the log start passed
    deleted: tuple[bool, ...]  # per partition: the start was moved by DeleteRecords
    removed: frozenset[int]  # other values the log no longer holds (compaction or real loss)
    delivered_below: tuple[int, ...]  # per partition, the group read its records below this offset
    no_offset: frozenset[int] = frozenset()  # values whose ack names no offset (a duplicate's answer)


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    partitions = draw(st.integers(1, 2))
    n = draw(st.integers(6, 24))
    layout = []
    for _ in range(n):
        key = draw(st.sampled_from([None, "k0", "k1", "k2"]))
        tombstone = key is not None and draw(st.integers(0, 4)) == 0
        layout.append((draw(st.integers(0, partitions - 1)), key, tombstone))
    sizes = Counter(p for p, _, _ in layout)
    return Plan(
        draw(st.sampled_from([None, "delete", "compact", "compact,delete"])),
        draw(st.sampled_from([-1, 5000])),
        draw(st.sampled_from([0, 86_400_000])),
        partitions,
        tuple(layout),
        tuple(draw(st.integers(0, sizes[p])) for p in range(partitions)),
        tuple(draw(st.booleans()) for _ in range(partitions)),
        frozenset(draw(st.sets(st.integers(0, n - 1), max_size=n // 2))),
        tuple(draw(st.integers(0, sizes[p])) for p in range(partitions)),
        frozenset(draw(st.sets(st.integers(0, n - 1), max_size=n // 3))),
    )


@dataclass
class Built:
    case: Case
    lost: int
    expired: int
    compacted: int
    unread: int


def build(plan: Plan, run_id: str) -> Built:
    """The run's events and log, and the facts the rules expect of it."""
    clock = iter(range(1, 10_000))

    def tick() -> dict[str, Any]:
        t = next(clock)
        return {"run_id": run_id, "ts": T0 + t, "mono": M0 + t}

    events: list[Event] = []
    if plan.policy is not None:
        events.append(
            TopicPolicy(
                process="harness",
                topic=TOPIC,
                cleanup_policy=plan.policy,
                retention_ms=plan.retention_ms,
                retention_bytes=-1,
                delete_retention_ms=plan.delete_retention_ms,
                **tick(),
            )
        )
    offsets = [0] * plan.partitions
    sent: list[
        tuple[str, int, int, str | None, bool, float]
    ] = []  # value, partition, offset, key, tomb, ack ts
    for seq, (partition, key, tombstone) in enumerate(plan.layout):
        v = value_id_for(run_id, "producer-0", seq)
        events.append(
            SendInvoke(
                process="producer-0",
                value_id=v,
                producer="producer-0",
                seq=seq,
                topic=TOPIC,
                key=key,
                tombstone=tombstone or None,
                **tick(),
            )
        )
        ack = tick()
        acked_offset = None if seq in plan.no_offset else offsets[partition]
        events.append(SendOutcome(process="producer-0", value_id=v, outcome="ok", partition=partition,
                                  offset=acked_offset, latency_ms=1.0, **ack))  # fmt: skip
        sent.append((v, partition, offsets[partition], key, tombstone, ack["ts"]))
        offsets[partition] += 1
    absent = {
        i for i, (_, partition, offset, _, _, _) in enumerate(sent) if offset < plan.start[partition]
    } | set(plan.removed)
    delivered = {
        i
        for i, (_, partition, offset, _, _, _) in enumerate(sent)
        if i not in absent or offset < plan.delivered_below[partition]
    }
    for i in sorted(delivered, key=lambda i: (sent[i][1], sent[i][2])):
        v, partition, offset, _, _, _ = sent[i]
        events.append(Delivery(process="consumer-0", member="m", generation=1, group="g", topic=TOPIC,
                               partition=partition, offset=offset, value_id=v, **tick()))  # fmt: skip
    for partition in range(plan.partitions):
        if plan.deleted[partition] and plan.start[partition] > 0:
            events.append(LogStart(process="harness", topic=TOPIC, partition=partition,
                                   offset=plan.start[partition], action="deleted", **tick()))  # fmt: skip
    log = [
        LogRecord(TOPIC, partition, offset, v, level, key)
        for i, (v, partition, offset, key, _, _) in enumerate(sent)
        if i not in absent
        for level in ("read_uncommitted", "read_committed")
    ]
    events += [
        DrainRead(process="drain", isolation=r.isolation, topic=r.topic, partition=r.partition,
                  offset=r.offset, value_id=r.value_id, key=r.key, **tick())
        for r in log
    ]  # fmt: skip
    drained_ts = 0.0
    for partition in range(plan.partitions):
        for level in ("read_uncommitted", "read_committed"):
            end = tick()
            drained_ts = end["ts"]
            events.append(DrainEnd(process="drain", isolation=level, topic=TOPIC, partition=partition,
                                   outcome="ok", low_offset=plan.start[partition],
                                   high_offset=offsets[partition], **end))  # fmt: skip

    # the rules, transcribed (docs/audit.md, "What Kafka removes on purpose"); a value acknowledged without
    # an offset is placed where the group read it, and cannot be placed when it never did
    def placed(i: int) -> int | None:
        return sent[i][2] if i not in plan.no_offset or i in delivered else None

    deletes = plan.policy is not None and "delete" in plan.policy and plan.retention_ms >= 0
    compacts = plan.policy is not None and "compact" in plan.policy
    lost = expired = compacted = unread = 0
    for i in sorted(absent):
        v, partition, offset, key, tombstone, ack_ts = sent[i]
        if placed(i) is None:
            lost += 1
            continue
        below = offset < plan.start[partition]
        by_delete_records = plan.deleted[partition] and below
        later = [
            j
            for j, s in enumerate(sent)
            if s[3] == key and s[1] == partition and (at := placed(j)) is not None and at > offset
        ]
        old_enough = drained_ts - plan.delete_retention_ms / 1000.0 >= ack_ts
        if below and (deletes or by_delete_records):
            expired += 1
            unread += i not in delivered
        elif compacts and key is not None and (later or (tombstone and old_enough)):
            compacted += 1
        else:
            lost += 1
    return Built(Case(events, log), lost, expired, compacted, unread)


@settings(max_examples=300)
@given(plan=plans())
def test_reference_tells_removals_from_losses(plan: Plan) -> None:
    built = build(plan, "run")
    facts = reference_audit(built.case.events, built.case.log, OPTIONS)
    assert facts.problems == ()
    assert facts.anomaly("lost_acked").count == built.lost
    assert facts.anomaly("expired_unread").count == built.unread
    assert (facts.totals.expired, facts.totals.compacted) == (built.expired, built.compacted)
    assert facts.anomaly("unseen_by_group").count == 0
    assert sum(r.expired for r in facts.removals) == built.expired
    assert sum(r.compacted for r in facts.removals) == built.compacted
    assert sum(r.expired_unread for r in facts.removals) == built.unread


def test_the_generator_plants_every_outcome() -> None:
    seen: Counter[str] = Counter()

    @settings(max_examples=200)
    @given(plan=plans())
    def collect(plan: Plan) -> None:
        built = build(plan, "run")
        seen.update({k: getattr(built, k) for k in ("lost", "expired", "compacted", "unread")})

    collect()
    assert all(seen[k] > 0 for k in ("lost", "expired", "compacted", "unread")), seen


def test_spark_agrees_with_reference_on_removals(audit_spark: Any, clean_value_ids: Any) -> None:
    cases: list[tuple[str, Case]] = []

    @settings(max_examples=220)
    @given(plan=plans())
    def collect(plan: Plan) -> None:
        run_id = f"run{len(cases)}"
        cases.append((run_id, build(plan, run_id).case))

    collect()
    assert len(cases) >= 200
    assert_spark_agrees(audit_spark, clean_value_ids, cases, OPTIONS)


def test_a_value_acknowledged_without_an_offset_is_placed_where_the_group_read_it() -> None:
    """librdkafka acknowledges a retried batch the broker already held (DUPLICATE_SEQUENCE_NUMBER) without
    an offset. On a compacted topic such a value, read by the group at offset 1 and superseded by a later
    value of its key, is compacted — the real L2 run that read it as lost. Never read, it cannot be placed:
    lost."""
    plan = Plan(
        policy="compact",
        retention_ms=-1,
        delete_retention_ms=86_400_000,
        partitions=1,
        layout=((0, "k0", False), (0, "k0", False), (0, "k0", False), (0, "k1", False), (0, "k1", False)),
        start=(0,),
        deleted=(False,),
        removed=frozenset({0, 1, 3}),
        delivered_below=(2,),
        no_offset=frozenset({1, 3}),
    )
    built = build(plan, "run")
    facts = reference_audit(built.case.events, built.case.log, OPTIONS)
    # 0 and 1 (read at offset 1) are superseded by 2; 3 was never read and has no offset: lost
    assert (
        (facts.totals.compacted, facts.anomaly("lost_acked").count) == (2, 1) == (built.compacted, built.lost)
    )
    (lost,) = facts.anomaly("lost_acked").examples
    assert lost.value_id == "run:producer-0:3"


def test_audit_json_round_trips_the_ranges_and_an_older_file_reads_without_them() -> None:
    plan = Plan(
        policy=None,
        retention_ms=-1,
        delete_retention_ms=0,
        partitions=2,
        layout=((0, "k0", False), (1, "k0", False), (0, None, False), (1, None, False), (1, "k1", False)),
        start=(0, 0),
        deleted=(False, False),
        removed=frozenset({0, 1, 4}),
        delivered_below=(0, 0),
    )
    built = build(plan, "run")
    result = judge(reference_audit(built.case.events, built.case.log, OPTIONS), "at_least_once", "reference")
    report = result.facts.anomaly("lost_acked")
    assert report.ranges == (
        PartitionRange(TOPIC, 0, 1, 0, 0, report.examples[0].ts, report.examples[0].ts),
        PartitionRange(TOPIC, 1, 2, 0, 2, report.examples[1].ts, report.examples[2].ts),
    )
    again = AuditResult.from_dict(json.loads(result.to_json()))
    assert again == result
    data = json.loads(result.to_json())
    for found in data["facts"]["anomalies"].values():
        del found["ranges"]
    older = AuditResult.from_dict(data)
    assert older.facts.anomaly("lost_acked").ranges == ()
    assert older.facts.anomaly("lost_acked").count == 3
