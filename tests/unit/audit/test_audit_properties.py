"""Property tests of the audit: generated clean runs with planted anomalies of every kind.

The reference must report exactly the planted set (count and examples); the Spark job must return exactly
what the reference returns. Hundreds of generated runs go through ONE Spark job, each under its own run id.

Jepsen's order checks (``JEPSEN_ORDER_CHECKS``) are planted by ``test_audit_jepsen_checks``; here the other
plants cause some of them as a side effect (an undelivered value is a consumer's skip, a swapped offset a
producer's acks going back), and :func:`order_checks` — the definitions of docs/audit.md transcribed
literally — says which.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chaos.audit.facts import (
    ANOMALIES,
    ISOLATION_LEVELS,
    JEPSEN_ORDER_CHECKS,
    AuditFacts,
    AuditOptions,
    Example,
    LogRecord,
    txn_attempts,
)
from chaos.audit.reference import log_from_drain, reference_audit
from chaos.audit.source import history_table, log_table
from chaos.run.events import (
    Delivery,
    DrainEnd,
    DrainRead,
    Event,
    FaultEvent,
    ProbeCall,
    Rebalance,
    SendInvoke,
    SendOutcome,
    TxnMarker,
    value_id_for,
)

TOPIC = "chaos"
GROUP = "g"
T0 = 1_700_000_000.0
M0 = 1000.0
FOREIGN = "elsewhere:producer-0:7"
PLANTED = tuple(name for name in ANOMALIES if name not in (*JEPSEN_ORDER_CHECKS, "expired_unread"))
"""What this generator plants on purpose (what a topic's log policy removes: test_audit_logpolicy.py)."""


@dataclass
class Value:
    producer: str
    seq: int
    key: str | None
    partition: int
    offset: int = -1
    status: str = "ok"  # ok | fail | info | txn_commit | txn_abort
    in_log: bool = True
    delivered: bool = True
    redeliver: str | None = None  # None | "other" | "after_rebalance"
    extra_offset: int | None = None
    foreign_delivery: bool = False
    txn_abort_planted: bool = False
    latency_ms: float = 5.0


@dataclass(frozen=True)
class Plan:
    """A drawn run: its values' layout and the anomalies to plant (pure data; built per run id)."""

    producers: int
    partitions: int
    layout: tuple[tuple[int, str | None, int, str, float], ...]  # producer, key, partition, status, latency
    steps: tuple[float, ...]
    plants: tuple[str, ...]
    choice: int
    fault_at: tuple[int, int] | None
    aborted_variant: bool


@dataclass
class Case:
    events: list[Event]
    log: list[LogRecord]
    expected: dict[str, list[Example]] = field(default_factory=dict)
    options: AuditOptions | None = None  # None: the test's own
    totals: tuple[int, int, int] | None = None  # expected (acked, failed, indeterminate), if checked


class Clock:
    """Event times of one generated run: each tick advances both clocks by the next step (cycled)."""

    def __init__(self, run_id: str, steps: Sequence[float]) -> None:
        self.run_id = run_id
        self.steps = tuple(steps)
        self.ticks = 0
        self.ts, self.mono = T0, M0

    def tick(self) -> dict[str, Any]:
        """The common fields of the next event: ``run_id``, ``ts``, ``mono``."""
        self.ticks += 1
        step = self.steps[self.ticks % len(self.steps)]
        self.ts += step
        self.mono += step
        return {"run_id": self.run_id, "ts": self.ts, "mono": self.mono}


def drain_events(
    tick: Callable[[], dict[str, Any]], log: list[LogRecord], ends: Sequence[tuple[str, int, str, int]]
) -> list[Event]:
    """The final drain: a ``drain_read`` per log record, then an ok ``drain_end`` per
    ``(topic, partition, isolation, high_offset)`` (low offset 0)."""
    events: list[Event] = [
        DrainRead(
            process="drain",
            isolation=r.isolation,
            topic=r.topic,
            partition=r.partition,
            offset=r.offset,
            value_id=r.value_id,
            key=r.key,
            **tick(),
        )
        for r in log
    ]
    events += [
        DrainEnd(
            process="drain",
            isolation=level,  # type: ignore[arg-type]
            topic=topic,
            partition=partition,
            outcome="ok",
            low_offset=0,
            high_offset=high,
            **tick(),
        )
        for topic, partition, level, high in ends
    ]
    return events


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    producers = draw(st.integers(1, 2))
    partitions = draw(st.integers(1, 3))
    n = draw(st.integers(16, 40))
    status = st.sampled_from(["ok"] * 6 + ["fail", "info", "txn_commit", "txn_abort"])
    layout = tuple(
        (
            draw(st.integers(0, producers - 1)),
            draw(st.sampled_from([None, "k0", "k1"])),
            draw(st.integers(0, partitions - 1)),
            draw(status),
            draw(st.floats(0.5, 900.0, allow_nan=False).map(lambda x: round(x, 3))),
        )
        for _ in range(n)
    )
    steps = tuple(draw(st.lists(st.floats(0.001, 2.0, allow_nan=False), min_size=8, max_size=8)))
    plants = tuple(sorted(draw(st.sets(st.sampled_from(PLANTED)))))
    fault_at = draw(st.none() | st.tuples(st.integers(0, n - 1), st.integers(0, n)))
    return Plan(
        producers,
        partitions,
        layout,
        steps,
        plants,
        draw(st.integers(0, 2**16)),
        fault_at,
        draw(st.booleans()),
    )


def build(plan: Plan, run_id: str) -> Case:
    seqs = [0] * plan.producers
    values: list[Value] = []
    for producer, key, partition, status, latency in plan.layout:
        values.append(
            Value(f"producer-{producer}", seqs[producer], key, partition, status=status, latency_ms=latency)
        )
        seqs[producer] += 1
    next_offset = [0] * plan.partitions
    for v in values:
        v.offset = next_offset[v.partition]
        next_offset[v.partition] += 1
        if v.status == "fail":
            v.in_log = v.delivered = False
        if v.status == "txn_abort":
            v.delivered = False

    def vid(v: Value) -> str:
        return value_id_for(run_id, v.producer, v.seq)

    plain = [i for i, v in enumerate(values) if v.status == "ok"]
    # a reorder pair: two plain values adjacent in the clean chain (producer, key, partition) by offset
    chains: dict[tuple[str, str | None, int], list[int]] = {}
    for i, v in enumerate(values):
        if v.in_log:
            chains.setdefault((v.producer, v.key, v.partition), []).append(i)
    pairs = [
        (a, b)
        for chain in chains.values()
        for a, b in itertools.pairwise(chain)
        if values[a].status == "ok" and values[b].status == "ok"
    ]
    rotation = plan.choice % max(len(plain), 1)
    free = plain[rotation:] + plain[:rotation]
    expected: dict[str, list[Example]] = {name: [] for name in ANOMALIES}
    extra_log: list[tuple[int, int, str | None]] = []
    ts_of: dict[str, float] = {}  # filled when events are built; examples patched afterwards
    deferred: list[tuple[str, int, str]] = []  # (anomaly, value index, which ts)
    for name in plan.plants:
        if name == "reordered":
            usable = [(a, b) for a, b in pairs if a in free and b in free]
            if not usable:
                continue
            a, b = usable[plan.choice % len(usable)]
            free.remove(a)
            free.remove(b)
            values[a].offset, values[b].offset = values[b].offset, values[a].offset
            deferred.append((name, a, "send"))
            continue
        if name == "unexpected":
            p = plan.choice % plan.partitions
            foreign = None if plan.choice % 2 else FOREIGN
            extra_log.append((p, next_offset[p], foreign))
            expected[name].append(Example(foreign, TOPIC, p, next_offset[p], None))
            next_offset[p] += 1
            continue
        if not free:
            continue
        i = free.pop(0)
        v = values[i]
        if name == "lost_acked":
            v.in_log = v.delivered = False
            deferred.append((name, i, "ack"))
        elif name == "lost_indeterminate":
            v.status, v.in_log, v.delivered = "info_lost", False, False
            deferred.append((name, i, "send"))
        elif name == "unseen_by_group":
            v.delivered = False
            deferred.append((name, i, "send"))
        elif name == "duplicate_in_log":
            v.extra_offset = next_offset[v.partition]
            next_offset[v.partition] += 1
            deferred.append((name, i, "send"))
        elif name == "duplicate_delivery_other":
            v.redeliver = "other"
            deferred.append((name, i, "redelivery"))
        elif name == "duplicate_delivery_after_rebalance":
            v.redeliver = "after_rebalance"
            deferred.append((name, i, "redelivery"))
        elif name == "inconsistent_offsets":
            v.foreign_delivery = True
            expected[name].append(Example(vid(v), TOPIC, v.partition, v.offset, None))
        elif name == "aborted_read":
            if plan.aborted_variant:
                v.txn_abort_planted = True
            else:
                v.status = "fail_in_log"
            deferred.append((name, i, "send"))

    # the timeline
    events: list[Event] = []
    tick = Clock(run_id, plan.steps).tick

    events.append(
        Rebalance(process="consumer-0", action="assign", group=GROUP, member="m1", generation=1, **tick())
    )
    for n, v in enumerate(values):
        if plan.fault_at is not None and plan.fault_at[0] == n:
            events.append(
                FaultEvent(process="nemesis", action="inject", fault="pause", target="broker-1", **tick())
            )
        if plan.fault_at is not None and plan.fault_at[1] == n:
            events.append(
                FaultEvent(process="nemesis", action="heal", fault="pause", target="broker-1", **tick())
            )
        v_id = vid(v)
        in_txn = v.status in ("txn_commit", "txn_abort") or v.txn_abort_planted
        if in_txn:  # each transactional value in its own attempt of its producer
            events.append(
                TxnMarker(
                    process=v.producer,
                    action="begin",
                    transactional_id=f"tx-{v.producer}",
                    outcome="ok",
                    **tick(),
                )
            )
        events.append(
            SendInvoke(
                process=v.producer,
                value_id=v_id,
                producer=v.producer,
                seq=v.seq,
                topic=TOPIC,
                key=v.key,
                **tick(),
            )
        )
        common = tick()
        if v.status in ("fail", "fail_in_log"):
            out = SendOutcome(
                process=v.producer,
                value_id=v_id,
                outcome="fail",
                error="MSG_SIZE_TOO_LARGE",
                retriable=False,
                fatal=False,
                latency_ms=v.latency_ms,
                **common,
            )
        elif v.status in ("info", "info_lost"):
            out = SendOutcome(
                process=v.producer,
                value_id=v_id,
                outcome="info",
                error="_MSG_TIMED_OUT",
                latency_ms=v.latency_ms,
                **common,
            )
        else:
            out = SendOutcome(
                process=v.producer,
                value_id=v_id,
                outcome="ok",
                partition=v.partition,
                offset=v.offset,
                latency_ms=v.latency_ms,
                **common,
            )
        events.append(out)
        ts_of[f"send:{v_id}"] = common["ts"]
        if in_txn:
            events.append(
                TxnMarker(
                    process=v.producer,
                    action="commit" if v.status == "txn_commit" else "abort",
                    transactional_id=f"tx-{v.producer}",
                    outcome="ok",
                    value_ids=(v_id,),
                    **tick(),
                )
            )
        if v.delivered:
            events.append(
                Delivery(
                    process="consumer-0",
                    group=GROUP,
                    topic=TOPIC,
                    partition=v.partition,
                    offset=v.offset,
                    value_id=v_id,
                    key=v.key,
                    member="m1",
                    generation=1,
                    **tick(),
                )
            )
            if v.foreign_delivery:
                events.append(
                    Delivery(
                        process="consumer-0",
                        group=GROUP,
                        topic=TOPIC,
                        partition=v.partition,
                        offset=v.offset,
                        value_id=None,
                        member="m1",
                        generation=1,
                        **tick(),
                    )
                )
            if v.redeliver == "after_rebalance":
                events.append(
                    Rebalance(
                        process="consumer-0",
                        action="revoke",
                        group=GROUP,
                        member="m1",
                        generation=1,
                        **tick(),
                    )
                )
            if v.redeliver is not None:
                redelivery = tick()
                events.append(
                    Delivery(
                        process="consumer-0",
                        group=GROUP,
                        topic=TOPIC,
                        partition=v.partition,
                        offset=v.offset,
                        value_id=v_id,
                        key=v.key,
                        member="m1",
                        generation=2,
                        **redelivery,
                    )
                )
                ts_of[f"redelivery:{v_id}"] = redelivery["ts"]
    if plan.fault_at is not None and plan.fault_at[1] == len(values):
        events.append(
            FaultEvent(process="nemesis", action="heal", fault="pause", target="broker-1", **tick())
        )

    log: list[LogRecord] = []
    for v in values:
        if not v.in_log:
            continue
        for offset in (v.offset, v.extra_offset):
            if offset is None:
                continue
            log.append(LogRecord(TOPIC, v.partition, offset, vid(v), "read_uncommitted", v.key))
            if v.status != "txn_abort":
                log.append(LogRecord(TOPIC, v.partition, offset, vid(v), "read_committed", v.key))
    for p, offset, foreign in extra_log:
        log.append(LogRecord(TOPIC, p, offset, foreign, "read_uncommitted"))
        log.append(LogRecord(TOPIC, p, offset, foreign, "read_committed"))
    ends = [(TOPIC, p, level, next_offset[p]) for p in range(plan.partitions) for level in ISOLATION_LEVELS]
    events += drain_events(tick, log, ends)

    for name, i, which in deferred:
        v = values[i]
        v_id = vid(v)
        if name in ("lost_indeterminate",):
            expected[name].append(Example(v_id, TOPIC, None, None, ts_of[f"send:{v_id}"]))
        elif name == "lost_acked":
            expected[name].append(Example(v_id, TOPIC, v.partition, v.offset, ts_of[f"send:{v_id}"]))
        elif which == "redelivery":
            expected[name].append(Example(v_id, TOPIC, v.partition, v.offset, ts_of[f"redelivery:{v_id}"]))
        else:
            expected[name].append(Example(v_id, TOPIC, v.partition, v.offset, ts_of[f"send:{v_id}"]))
    expected.update(order_checks(events, log))
    return Case(events, log, expected)


def order_checks(
    events: Sequence[Event], log: Sequence[LogRecord], isolation: str = "read_committed"
) -> dict[str, list[Example]]:
    """Jepsen's order checks as docs/audit.md ("Order checks") defines them, transcribed literally (and
    quadratically). A read is rolled back when it lies inside an attempt of its process whose *recorded* end
    is an abort or a fenced error — the generators' aborted attempts all record theirs."""
    found: dict[str, list[Example]] = {name: [] for name in JEPSEN_ORDER_CHECKS}
    attempts = txn_attempts(
        (i, e.process, e.transactional_id, e.action, e.outcome, e.error)
        for i, e in enumerate(events)
        if isinstance(e, TxnMarker)
    )

    def made_in(i: int, process: str) -> list[int]:
        return [
            a.att
            for a in attempts
            if a.process == process
            and a.begin is not None
            and a.begin < i
            and (a.close is None or i < a.close)
        ]

    aborted = {a.att for a in attempts if a.recorded in ("aborted", "fenced")}
    deliveries = [(i, e) for i, e in enumerate(events) if isinstance(e, Delivery)]
    counted = [(i, d) for i, d in deliveries if not set(made_in(i, d.process)) & aborted]
    resets = [
        (i, e.process)
        for i, e in enumerate(events)
        if isinstance(e, Rebalance) or (isinstance(e, ProbeCall) and e.operation == "seek")
    ]
    visible = {(r.topic, r.partition, r.offset) for r in log if r.isolation == isolation}
    for n, (i, d) in enumerate(counted):
        same = [
            (j, p)
            for j, p in counted[:n]
            if (p.process, p.member, p.topic, p.partition) == (d.process, d.member, d.topic, d.partition)
        ]
        if not same or any(by == d.process and same[-1][0] < r < i for r, by in resets):
            continue
        previous = same[-1][1]
        example = Example(d.value_id, d.topic, d.partition, d.offset, d.ts)
        if d.offset <= previous.offset:
            found["nonmonotonic_poll"].append(example)
        elif any((t, p) == (d.topic, d.partition) and previous.offset < o < d.offset for t, p, o in visible):
            found["poll_skip"].append(example)
    invokes = [(i, e) for i, e in enumerate(events) if isinstance(e, SendInvoke)]
    outcomes = [(i, e) for i, e in enumerate(events) if isinstance(e, SendOutcome)]
    acked = []  # (invoke index, invoke, outcome) of every send acked with an offset
    for i, invoke in invokes:
        k = sum(1 for j, e in invokes if e.value_id == invoke.value_id and j < i)
        answers = [e for _, e in outcomes if e.value_id == invoke.value_id]
        if k < len(answers) and answers[k].outcome == "ok" and answers[k].offset is not None:
            acked.append((i, invoke, answers[k]))
    for i, invoke, out in acked:
        earlier = [
            o
            for j, e, o in acked
            if j < i and (e.producer, e.topic, o.partition) == (invoke.producer, invoke.topic, out.partition)
        ]
        if earlier and (out.offset or 0) <= (earlier[-1].offset or 0):
            found["nonmonotonic_send"].append(
                Example(invoke.value_id, invoke.topic, out.partition, out.offset, out.ts)
            )
    if isolation == "read_committed":
        for _, d in deliveries:
            for j, invoke, out in acked:
                at = (invoke.value_id, invoke.topic, out.partition, out.offset)
                if at != (d.value_id, d.topic, d.partition, d.offset):
                    continue
                attempt = set(made_in(j, invoke.process))
                last = [e.mono for k, e in invokes if set(made_in(k, e.process)) & attempt]
                if last and d.mono < max(last):
                    found["precommitted_read"].append(
                        Example(d.value_id, d.topic, d.partition, d.offset, d.ts)
                    )
                    break
    return found


def assert_planted(facts: AuditFacts, case: Case) -> None:
    for name in ANOMALIES:
        report = facts.anomaly(name)
        want = sorted(case.expected[name], key=Example.sort_key)
        assert report.count == len(want), (name, report, want)
        assert list(report.examples) == want, name
    assert facts.problems == ()


OPTIONS = AuditOptions(max_examples=100)


@settings(max_examples=300)
@given(plan=plans())
def test_reference_reports_exactly_the_planted_anomalies(plan: Plan) -> None:
    case = build(plan, "run")
    assert_planted(reference_audit(case.events, case.log, OPTIONS), case)


@settings(max_examples=200)
@given(plan=plans())
def test_drain_fallback_sees_what_the_topic_holds(plan: Plan) -> None:
    """The drain read every record, so auditing from the drain's reads gives the same facts."""
    case = build(plan, "run")
    from_drain = reference_audit(case.events, log_from_drain(case.events), OPTIONS)
    assert from_drain == reference_audit(case.events, case.log, OPTIONS)


def test_planted_kinds_cover_every_anomaly() -> None:
    seen: set[str] = set()

    @settings(max_examples=200)
    @given(plan=plans())
    def collect(plan: Plan) -> None:
        case = build(plan, "run")
        seen.update(name for name in ANOMALIES if case.expected[name])

    collect()
    assert set(PLANTED) <= seen


@pytest.mark.parametrize("max_examples", [2])
def test_spark_agrees_with_reference_on_many_runs_in_one_job(
    audit_spark: Any, clean_value_ids: Any, max_examples: int
) -> None:
    cases: list[tuple[str, Case]] = []

    @settings(max_examples=220)
    @given(plan=plans())
    def collect(plan: Plan) -> None:
        run_id = f"run{len(cases)}"
        cases.append((run_id, build(plan, run_id)))

    collect()
    assert len(cases) >= 200
    assert_spark_agrees(audit_spark, clean_value_ids, cases, AuditOptions(max_examples=max_examples))


@contextlib.contextmanager
def as_parquet(spark: Any, *tables: Any) -> Iterator[list[Any]]:
    """The Arrow tables as DataFrames read from Parquet files, as a run's history is read (``to_spark``):
    ``createDataFrame`` makes each a local relation in the plan, which Spark's analyzer copies at every step
    of building the audit's plan (a many-run job's audit took ~3x as long)."""
    import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

    with tempfile.TemporaryDirectory(prefix="chaos-audit-test-") as tmp:
        frames = []
        for n, table in enumerate(tables):
            path = Path(tmp, f"{n}.parquet")
            pq.write_table(table, path)
            frames.append(spark.read.parquet(str(path)))
        yield frames


def assert_spark_agrees(
    spark: Any, clean_value_ids: Any, cases: list[tuple[str, Case]], options: AuditOptions
) -> None:
    """Audit every case in ONE Spark job (each under its own run id) and compare with the reference; both
    of the job's per-value paths must have run (the clean values' fast path and the general one). Cases
    with their own options (group isolation) must share the job's."""
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

    from chaos.audit.sparkjob import spark_audit

    assert all(case.options in (None, options) for _, case in cases)
    history = pa.concat_tables([history_table(case.events) for _, case in cases])
    log = pa.concat_tables([log_table(case.log, run_id) for run_id, case in cases])
    with as_parquet(spark, history, log) as (history_df, log_df):
        got = spark_audit(history_df, log_df, options)
        assert sorted(got) == sorted(run_id for run_id, _ in cases)
        sent = len({e.value_id for _, case in cases for e in case.events if isinstance(e, SendInvoke)})
        assert 0 < len(clean_value_ids(history_df, log_df)) < sent
    mismatches = []
    for run_id, case in cases:
        want = reference_audit(case.events, case.log, options, run_id=run_id)
        if got[run_id] != want:
            mismatches.append((run_id, dataclasses.asdict(want), dataclasses.asdict(got[run_id])))
    assert not mismatches, mismatches[:1]
