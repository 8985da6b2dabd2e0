"""O1 `retry_reordering_max_in_flight` — a non-idempotent producer's retries reorder a key's records.

docs/catalog.md 4 O1 (seed 000 § 4.2 配置: ``max.in.flight.requests.per.connection``
"配置值不应超过5，值大于1时
能增加吞吐量，但是会导致下游收到的数据乱序"; 001 "2 消息乱序"). librdkafka's own documentation: "retrying may
cause reordering unless enable.idempotence is set to true".

What reorders with librdkafka 2.16 (measured while building this scenario): the broker must **refuse a
request** (a retriable error, the batch not appended) **while newer records can still be written**; the
refused batch is retried after them. ``NOT_ENOUGH_REPLICAS`` at the end of an ISR dip does that. A leader
failover does not (one exploratory run, leader ``docker pause``: librdkafka moved the partition to the
new leader and every queued record was acknowledged there in order; no produce request timed out).

Kafka 4.1 detail (one exploratory run): a topic ``min.insync.replicas`` *above* the replication factor
does not refuse writes (raising it to 4 on RF 3 with a full ISR: acknowledgements went on; the leader
appears to cap it at the replication factor). So one follower is first cut off (``ReplicationCut``:
ISR 3 → 2), and each dip raises ``min.insync.replicas`` to 3 (= RF > ISR 2: every acks=all write
refused) and lowers it back to 2 (``IsrDip``, a fault of this module: ``incremental_alter_configs``,
effective within milliseconds).

Timeline (ci): topic of 1 partition, RF 3, ``min.insync.replicas=2``; replication cut of follower F from
the leader L; Toxiproxy latency 1000 ms on the responses of L's client proxy (with ``linger.ms=200``
several requests can be in flight); producer at 100 msg/s, 16 keys, ``retries=30``,
``retry.backoff.ms`` = ``retry.backoff.max.ms`` = 100; warm-up (100 acks) and wait for F to leave the ISR
(``replica.lag.time.max.ms`` = 6 s, ISR2 measured 6–9 s); then 3 dips: raise min ISR → wait until no ack
for 1.5 s → lower it → wait for 50 acks; heal the latency and the cut; stop the producer; a one-member
group reads the whole partition (started after the faults, whose latency would slow its fetches); drain;
audit (the session's engine, Spark by default).

Every variant claims ``at_least_once`` — the application needs each key's records in order and none lost
(``reordered`` fails every guarantee). librdkafka logs nothing at INFO for these retries and every
delivery report is a success: the reordering is visible only in the log (the audit's ``reordered``
examples: a key's value at a higher offset than a later value of the same key).

- ``vulnerable`` — ``enable.idempotence=false``, ``max.in.flight.requests.per.connection=5``: a batch
  refused at a dip is written after newer records. Audit: ``reordered`` > 0 (every run), plus
  duplicates (allowed under at-least-once; most likely batches appended and then answered
  ``NOT_ENOUGH_REPLICAS_AFTER_APPEND`` when min ISR rose before they were replicated — librdkafka does not
  log it at INFO): verdict **fail**.
- ``remediated`` — ``enable.idempotence=true`` (5 in flight): the partition's sequence numbers keep the
  retries in order. Audit: ``reordered`` = 0 (strict), no duplicate: verdict **pass**.
- ``in_flight_1`` — the catalog's third case: no idempotence, ``max.in.flight.requests.per.connection=1``.
  The catalog (and the Java client) expect no reordering, only duplicates. **Measured: it reorders too**
  (48 reordered values in each of 6 runs, duplicates in 4 of them): a refused batch waiting out its
  retry backoff is overtaken by newer records sent in the meantime — one request in flight does not keep
  librdkafka's retries in order; only idempotence does. Audit: ``reordered`` > 0: verdict **fail**.

Measured (ci, this machine; 3 runs with the final assertions, then 3 earlier runs with the same timeline
in brackets): ``vulnerable`` reordered 222 / 192 / 192 [140 / 128 / 160], duplicates 0 / 0 / 103
[136 / 129 / 0]; ``remediated`` 0 reordered, 0 duplicates every run; ``in_flight_1`` reordered 48 every
run, duplicates 0 / 109 / 0 [102 / 104 / 109]. A variant takes 25–40 s [30–43 s].
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from chaos.faults.base import Fault, FaultLog, Param
from chaos.faults.targets import Target
from chaos.faults.toxics import Latency
from chaos.history import Event, SendOutcome
from chaos.scenario import ReplicationCut, Scenario, ScenarioRun, Variant, chaos_scenario, views

if TYPE_CHECKING:
    from chaos.cluster.cluster import KafkaCluster

RATE = 100.0
LATENCY_MS = 1_000
LINGER_MS = 200
DIPS = 3
REPLICATION = 3


class IsrDip(Fault):
    """Every acks=all write to ``topic`` is refused with ``NOT_ENOUGH_REPLICAS`` until healed — what a dip of
    the ISR below ``min.insync.replicas`` does (ISR3). Made by raising the topic's ``min.insync.replicas``
    to the replication factor while one replica is already out of the ISR (``incremental_alter_configs``),
    and lowering it back on heal. Unlike a real ISR change (``replica.lag.time.max.ms``, seconds) it
    flips within milliseconds, as often as needed. Kafka caps the setting at the replication factor, so a
    value above it refuses nothing."""

    kind = "isr_dip"

    def __init__(
        self, cluster: KafkaCluster, target: Target, topic: str, normal: int, log: FaultLog | None = None
    ) -> None:
        super().__init__(cluster, target, log)
        self.topic = topic
        self.normal = normal

    def params(self) -> dict[str, Param]:
        return {"topic": self.topic, "min.insync.replicas": REPLICATION, "restored": self.normal}

    def _set(self, value: int) -> None:
        from confluent_kafka.admin._config import AlterConfigOpType, ConfigEntry, ConfigResource

        entry = ConfigEntry("min.insync.replicas", str(value), incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource("TOPIC", self.topic, incremental_configs=[entry])
        for future in self.cluster.admin().incremental_alter_configs([resource]).values():
            future.result(10.0)

    def _inject(self) -> None:
        self._set(REPLICATION)

    def _heal(self) -> None:
        self._set(self.normal)


SCENARIO = Scenario(
    scenario_id="retry_reordering_max_in_flight",
    case_id="O1",
    title="A non-idempotent producer's retries reorder a key's records",
    source="000 § 4.2 配置 (max.in.flight.requests.per.connection); 001 KAFKA基础 (2 消息乱序)",
    symptom=(
        "max.in.flight.requests.per.connection 配置值不应超过5，值大于1时能增加吞吐量，"
        "但是会导致下游收到的数据乱序"
    ),
    guarantee="at_least_once",
    producer_config={
        "acks": "all",
        "retries": 30,
        "retry.backoff.ms": 100,
        "retry.backoff.max.ms": 100,
        "max.in.flight.requests.per.connection": 5,
        "linger.ms": LINGER_MS,
    },
    topic_config={"min.insync.replicas": 2},
    variants=(
        Variant(
            "vulnerable",
            "acks=all, retries=30, max.in.flight=5, enable.idempotence=false",
            expected_verdict="fail",
            client_profile="at_least_once_in_flight_5",
            producer_config={"enable.idempotence": False},
        ),
        Variant(
            "remediated",
            "enable.idempotence=true (acks=all, max.in.flight=5)",
            expected_verdict="pass",
            client_profile="idempotent_in_flight_5",
            producer_config={"enable.idempotence": True},
        ),
        Variant(
            "in_flight_1",
            "acks=all, retries=30, max.in.flight=1, enable.idempotence=false",
            expected_verdict="fail",
            client_profile="at_least_once_in_flight_1",
            producer_config={"enable.idempotence": False, "max.in.flight.requests.per.connection": 1},
        ),
    ),
    remediation=(
        "enable.idempotence=true: the broker checks each partition's sequence numbers, and librdkafka keeps "
        "a partition's retries in order (up to 5 requests in flight).",
        "Not max.in.flight.requests.per.connection=1 alone: with librdkafka a refused batch in retry backoff "
        "is still overtaken by newer records (measured: in_flight_1).",
    ),
    related=("D2", "O2"),
)


@chaos_scenario(SCENARIO)
def test_o1(run: ScenarioRun) -> None:
    variant = run.variant.name
    run.create_topic(partitions=1, replication_factor=REPLICATION)
    leader = run.cluster.partition(run.topic, 0).leader
    follower = next(b for b in run.cluster.partition(run.topic, 0).replicas if b != leader)
    cut = run.fault(ReplicationCut, follower, leader)
    cut.inject()
    latency = run.fault(Latency, leader, LATENCY_MS, direction="downstream")
    latency.inject()
    producer = run.producer(rate=RATE, duration_s=90.0, flush_timeout_s=30.0)
    run.wait_for("warm-up acks", lambda ev: len(views.acked_ids(ev)) >= RATE, 30)
    shrank: float | None = None  # seconds until the follower left the ISR
    with contextlib.suppress(AssertionError):  # a precondition, recorded below
        shrank = run.wait_until(
            f"follower {follower} leaves the ISR",
            lambda: len(run.cluster.partition(run.topic, 0).isr) == REPLICATION - 1,
            40,
        )
    refused: list[bool] = []  # per dip: no ack for 1.5 s
    dip_faults: list[IsrDip] = []
    for _ in range(DIPS):
        dip = run.fault(IsrDip, leader, run.topic, 2)
        dip_faults.append(dip)
        dip.inject()
        quiet = False
        with contextlib.suppress(AssertionError):  # a precondition, recorded below
            run.wait_quiet("no acks while the ISR is short", lambda e: _ok(e), 1.5, 30)
            quiet = True
        refused.append(quiet)
        dip.heal()
        mark = len(run.events())
        run.wait_for("acks again", _acks_since(mark, int(RATE / 2)), 30)
    latency.heal()
    cut.heal()
    producer.stop()
    # the group reads the whole partition after the faults (the latency toxic would slow its fetches)
    run.member("consumer-0", batch_size=1000)
    run.wait_caught_up(40)
    result = run.finish()

    events = result.events
    dips = [e for dip in dip_faults for e in views.fault_events(events, dip)]
    reordered = result.count("reordered")
    examples = dict(result.audit.facts.anomalies)["reordered"].examples
    assert result.count("lost_acked") == 0
    assert result.count("unseen_by_group") == 0
    isr_short = result.precondition(
        "the cut-off follower left the ISR",
        shrank is not None,
        f"follower {follower} of leader {leader}: "
        + (f"out after {shrank:.1f} s" if shrank is not None else "still in the ISR after 40 s"),
    )
    dipped = result.precondition(
        f"each of the {DIPS} ISR dips was injected and healed and refused writes (no ack for 1.5 s)",
        len(dips) == 2 * DIPS and all(refused),
        f"{len(dips)} dip events; refused per dip {refused}",
    )
    if variant == "remediated":
        assert reordered == 0, examples
        assert result.count("duplicate_in_log") == 0
    elif isr_short and dipped:
        assert reordered > 0
        assert "reordered" in result.audit.failed_by
        first_dip = min(e.ts for e in dips)
        last_heal = max(e.ts for e in dips if e.action == "heal")
        for example in examples:  # acknowledged after a dip had started (the retried batch)
            assert example.ts is not None
            assert first_dip <= example.ts <= last_heal + 15.0, (example, first_dip, last_heal)


def _ok(event: Event) -> bool:
    return isinstance(event, SendOutcome) and event.outcome == "ok"


def _acks_since(mark: int, n: int) -> Callable[[list[Event]], bool]:
    return lambda events: len(views.acked_ids(events[mark:])) >= n
