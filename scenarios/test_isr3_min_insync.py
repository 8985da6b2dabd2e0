"""ISR3 `isr_below_min_insync_writes_rejected` — RF = min.insync.replicas: one broker down stops the writes.

docs/catalog.md 1B ISR3 (003 § 6(3)(2)–(3); 004 § 最佳实践 5–7 and the reply "如果都是2，挂掉一个副本，
producer也就无法写入了，因为不满足min.insync.replicas的要求了" — if both are 2 and one replica dies, the
producer can't write;
003 "如果两者相等，那么只要有一个副本挂机，整个分区就无法正常工作了"). The seed's rule: ``replication.factor =
min.insync.replicas + 1`` ("容忍 n 台节点的故障，需要 n+1 个副本").

Setup: topic of 3 partitions, ``min.insync.replicas=2``; a producer sends 50 msg/s with ``acks=all``, 3
retries and one request in flight (so a refused write surfaces in ~1 s and retries cannot reorder); a
one-member group consumes with commit-after-processing; the runner's introspection reads leaders and ISRs
every 0.5 s.

Timeline (ci):

1. warm-up: 50 values acknowledged;
2. ``docker kill`` broker X (a broker that is not the active controller);
3. wait until X is out of the ISR of every partition it holds a replica of (the controller fences it after
   ``broker.session.timeout.ms``, 6 s) and no partition is led by X;
4. 3 s of sends with X down ("the window");
5. restart X; stop the producer (its flush waits for the retried writes); the group catches up; final
   drain; audit (the session's engine, Spark by default).

Variants (both claim ``at_least_once``; the guarantee is about loss, which neither variant suffers — what
differs is availability, asserted on the history; the error codes are recorded as evidence):

- ``vulnerable`` — RF 2 = ``min.insync.replicas`` 2. The partitions with a replica on X keep one in-sync
  replica: every write to them is refused with ``NOT_ENOUGH_REPLICAS`` (19, "Broker: Not enough in-sync
  replicas"; outcome ``info`` since the producer retried) and nothing is acknowledged there in the window;
  the partition without a replica on X keeps acknowledging. No acknowledged write is lost: verdict **pass**.
- ``remediated`` — RF 3, ``min.insync.replicas`` 2. Every partition keeps two in-sync replicas; after the
  failover pause (≈ the fencing time) writes are acknowledged again in every partition; no
  ``NOT_ENOUGH_REPLICAS``; verdict **pass**.

Expected symptoms: ``NOT_ENOUGH_REPLICAS`` in the delivery reports (``vulnerable``); the leaders' broker logs
"NotEnoughReplicasException: The size of the current ISR … is insufficient to satisfy the min.isr
requirement of 2" (``vulnerable``).
"""

from __future__ import annotations

import contextlib

from chaos.faults.process import Crash
from chaos.history import Event, SendInvoke
from chaos.scenario import ExpectedSymptom, Scenario, ScenarioRun, Variant, chaos_scenario, views

RATE = 50.0
WINDOW_S = 3.0
REPLICATION = {"vulnerable": 2, "remediated": 3}

SCENARIO = Scenario(
    scenario_id="isr_below_min_insync_writes_rejected",
    case_id="ISR3",
    title="min.insync.replicas = replication factor: one broker down makes partitions unwritable",
    source="003 § 6(3)(2)–(3), § 可靠性 3; 004 § 最佳实践 5–7 and replies",
    symptom=(
        "如果两者相等，那么只要有一个副本挂机，整个分区就无法正常工作了 — 如果都是2，挂掉一个副本，"
        "producer也就无法写入了，因为不满足min.insync.replicas的要求了"
    ),
    guarantee="at_least_once",
    expected_verdict="pass",
    client_profile="at_least_once",
    producer_config={
        "acks": "all",
        "retries": 3,
        "retry.backoff.ms": 100,
        "enable.idempotence": False,
        "max.in.flight.requests.per.connection": 1,
    },
    topic_config={"min.insync.replicas": 2},
    variants=(
        Variant(
            "vulnerable",
            "replication.factor=2, min.insync.replicas=2, acks=all; one broker killed",
            expected_symptoms=(
                ExpectedSymptom("error_code", "NOT_ENOUGH_REPLICAS", "writes refused below min ISR"),
                ExpectedSymptom(
                    "broker_log", "is insufficient to satisfy the min.isr requirement", "leader refuses"
                ),
            ),
        ),
        Variant(
            "remediated", "replication.factor=3 (= min.insync.replicas + 1), acks=all; one broker killed"
        ),
    ),
    remediation=(
        "replication.factor = min.insync.replicas + 1 (003/004): one replica may fail without stopping "
        "writes; tolerating n failures needs n + 1 replicas beyond the minimum.",
        "Keep acks=all: min.insync.replicas only applies to acks=all (acks=1 keeps writing with one copy).",
    ),
    related=("ISR2", "PB2"),
)


def _holding(run: ScenarioRun, broker: int) -> set[int]:
    """The partitions with a replica on ``broker``."""
    return {s.partition for s in run.cluster.describe_partitions([run.topic]) if broker in s.replicas}


def _failed_over(run: ScenarioRun, broker: int) -> bool:
    states = run.cluster.describe_partitions([run.topic])
    return all(broker not in s.isr and s.leader != broker for s in states)


def _sends(events: list[Event]) -> int:
    return sum(isinstance(e, SendInvoke) for e in events)


@chaos_scenario(SCENARIO)
def test_isr3(run: ScenarioRun) -> None:
    variant = run.variant.name
    run.create_topic(partitions=3, replication_factor=REPLICATION[variant])
    run.introspect(interval_s=0.5)
    run.member("consumer-0", batch_size=100)
    producer = run.producer(rate=RATE, duration_s=120.0, flush_timeout_s=10.0)
    run.wait_for("warm-up acks", lambda ev: len(views.acked_ids(ev)) >= RATE, 30)

    controller = run.cluster.controller_id()
    broker = next(b.node_id for b in run.cluster.brokers if b.node_id != controller)
    holding = _holding(run, broker)
    crash = run.fault(Crash, broker)
    crash.inject()
    failover_s: float | None = None
    with contextlib.suppress(AssertionError):  # a precondition, recorded after finish()
        failover_s = run.wait_until(
            f"broker {broker} out of every ISR", lambda: _failed_over(run, broker), 40
        )
    run.mark("window-start")
    run.note(
        f"window start: broker {broker} out of every ISR {failover_s:.1f} s after the crash"
        if failover_s is not None
        else f"window start: broker {broker} still in an ISR (or leading) 40 s after the crash"
    )
    sent = _sends(run.events())
    run.wait_for(f"{WINDOW_S:.0f} s of sends", lambda ev: _sends(ev) >= sent + WINDOW_S * RATE, 30)
    run.mark("window-end")
    run.note("window end: restarting the broker")
    crash.heal()
    producer.stop()
    run.wait_caught_up(40)
    result = run.finish()

    assert result.count("lost_acked") == result.count("unseen_by_group") == 0
    events = result.events
    start, end = (views.mark(events, name).mono for name in ("window-start", "window-end"))
    ok_in_window = [e for e in views.outcomes(events, "ok") if start + 1.0 < e.mono < end]
    by_partition = {p: sum(e.partition == p for e in ok_in_window) for p in range(3)}
    refused = [e for e in views.outcomes(events) if e.error == "NOT_ENOUGH_REPLICAS"]
    not_ok = [e for e in views.outcomes(events) if e.outcome != "ok"]
    print(
        f"{variant}: RF {REPLICATION[variant]}, broker {broker} killed (replicas of {sorted(holding)}); "
        f"acks in the {end - start:.1f} s window per partition {by_partition}; NOT_ENOUGH_REPLICAS sends "
        f"{len(refused)}; non-ok sends {len(not_ok)} {sorted({e.error or '' for e in not_ok})}; longest "
        f"outage {result.audit.facts.availability.longest_outage_s} s"
    )

    failed_over = result.precondition(
        f"broker {broker} left every ISR and leadership within 40 s of its crash",
        failover_s is not None,
        "never" if failover_s is None else f"after {failover_s:.1f} s",
    )
    if variant == "vulnerable":
        # The partitions with a replica on the dead broker are unwritable; the other one is not.
        if (
            result.precondition(
                f"the killed broker {broker} held a replica of some partitions, not all",
                bool(holding) and holding != {0, 1, 2},
                sorted(holding),
            )
            and failed_over
        ):
            assert all(by_partition[p] == 0 for p in holding), by_partition
            assert all(by_partition[p] > 0 for p in set(range(3)) - holding), by_partition
        result.symptom(
            "the refused writes were reported as info (the producer retried them)",
            all(e.outcome == "info" for e in refused),
            sorted({e.outcome for e in refused}),
        )
    else:
        # Two in-sync replicas remain everywhere: every partition keeps acknowledging.
        if (
            result.precondition(
                f"the killed broker {broker} held a replica of every partition",
                holding == {0, 1, 2},
                sorted(holding),
            )
            and failed_over
        ):
            assert all(n > 0 for n in by_partition.values()), by_partition
        result.symptom("no write was refused with NOT_ENOUGH_REPLICAS", refused == [], len(refused))
