"""CJ1 `clock_jump_past_retention` — a leader's clock jumps ahead by more than the topic's retention.

docs/catalog.md 5 CJ1. Not a case from the seeds: a broker whose wall clock is stepped forward (an NTP
correction, a VM restored from a snapshot, a hypervisor's clock) judges every record by that clock. Time
retention deletes a segment once its newest record's timestamp is older than ``retention.ms`` by the
broker's *own* clock: a jump past the retention makes every segment look expired, and the leader deletes
them — read by the group or not. The followers follow the leader's log start offset, so the records are
gone from every replica, although no record was ever older than the retention by the real time.

Topology: topic of 1 partition, RF 3, ``min.insync.replicas=2``, ``cleanup.policy=delete``; an idempotent
producer (acks=all) at 50 msg/s; a group of one member committing after processing. The brokers read their
wall clock through libfaketime (``Scenario(cluster=ClusterNeeds(fake_clock=True))``: the session's cluster
starts again with it once, docs/faults.md "Clock and disk faults").

Timeline (ci; the broker checks retention every second, ``log.retention.check.interval.ms``):

1. the group reads the first values, then stops (an outage: a deploy, a stuck consumer); the producer
   goes on;
2. **the leader's clock jumps 2 h ahead** (``ClockJump``, ``by=7200``) for :data:`JUMP_S` s — in
   ``vulnerable`` until retention removed what the group had not read (up to 20 s);
3. the clock steps back (heal); the group comes back (a new member) and reads from its committed offset;
   the producer stops; the group catches up; final drain; audit.

Variants (both claim ``at_least_once``: every acknowledged value reaches the group):

- ``vulnerable`` — ``retention.ms`` 1 h (a short time retention, as a team sizes it against its consumers'
  outages). By the leader's jumped clock every record is 2 h old: its segments are deleted, the values
  the group had not read with them. Audit: ``expired_unread`` > 0 — removed by retention before the group
  read them, the clock jump active at the time; verdict **fail**.
- ``remediated`` — retention by size only (``retention.ms=-1``, ``retention.bytes`` 1 GiB): no clock, jumped
  or not, expires anything; nothing is removed. Audit: clean; verdict **pass**.

Expected symptoms: the leader logs the deletion ("Deleting segment", the retention it breached) in
``vulnerable``; the clock fault's proof of landing is the leader's own log timestamps, 7,200 s ahead of
Docker's clock.
"""

from __future__ import annotations

import contextlib
import time

from chaos.faults.clock import ClockJump
from chaos.faults.targets import LeaderOf
from chaos.scenario import (
    ClusterNeeds,
    ExpectedSymptom,
    Scenario,
    ScenarioRun,
    Variant,
    chaos_scenario,
    views,
)
from chaos.workload.readers import offset_bounds

RATE = 50.0
JUMP_BY_S = 7_200.0
JUMP_S = 8.0
"""How long the jump holds when nothing is to be waited for (``remediated``): eight retention checks."""
RETENTION_MS = 3_600_000

SCENARIO = Scenario(
    scenario_id="clock_jump_past_retention",
    case_id="CJ1",
    title="A leader's clock jumps ahead past the topic's retention and deletes what the group had not read",
    source="time-based retention judged by the broker's own wall clock (Kafka's log retention check)",
    symptom="records deleted by retention that were minutes old, after a broker's clock was stepped forward",
    guarantee="at_least_once",
    expected_verdict="pass",
    client_profile="idempotent",
    producer_config={"acks": "all", "enable.idempotence": True},
    topic_config={"min.insync.replicas": 2, "cleanup.policy": "delete"},
    cluster=ClusterNeeds(fake_clock=True),
    variants=(
        Variant(
            "vulnerable",
            "retention.ms of 1 h; the leader's clock jumps 2 h ahead while the group is away",
            expected_verdict="fail",
            topic_config={"retention.ms": RETENTION_MS},
            expected_symptoms=(
                ExpectedSymptom("broker_log", "Deleting segment", "the leader deletes the expired segments"),
            ),
        ),
        Variant(
            "remediated",
            "retention.ms=-1, retention.bytes=1 GiB (retention by size); the same jump",
            topic_config={"retention.ms": -1, "retention.bytes": 1_073_741_824},
        ),
    ),
    remediation=(
        "Keep the brokers' clocks disciplined (NTP/chrony slewing, not stepping; alert on clock offset): "
        "time retention trusts each broker's wall clock.",
        "Size time retention well above the longest consumer outage and any plausible clock step, or retain "
        "by size (retention.bytes) where a clock must not decide what is deleted.",
    ),
    related=("L2",),
)


def _log_start(run: ScenarioRun) -> int:
    return offset_bounds(run.cluster.admin(), run.topic, "read_uncommitted", 5.0)[0][0]


@chaos_scenario(SCENARIO)
def test_cj1(run: ScenarioRun) -> None:
    variant = run.variant.name
    run.create_topic(partitions=1, replication_factor=3)
    run.introspect(interval_s=0.5)
    first = run.member("consumer-0", duration_s=120.0)
    producer = run.producer(rate=RATE, duration_s=120.0, flush_timeout_s=10.0)
    run.wait_for("the group read the first values", lambda ev: len(views.deliveries(ev)) >= RATE, 30)
    first.stop()
    read = max(d.offset for d in views.deliveries(run.events()))
    run.note(f"the group stopped at offset {read}")
    run.wait_for(
        "values the group has not read",
        lambda ev: len(views.acked_ids(ev)) >= len(views.delivered_ids(ev)) + RATE,
        30,
    )
    removed_s: float | None = None
    with run.fault(ClockJump, LeaderOf(run.topic, 0), by=JUMP_BY_S):
        if variant == "vulnerable":
            with contextlib.suppress(AssertionError):  # a precondition, recorded after finish()
                removed_s = run.wait_until(
                    "retention removed values the group had not read", lambda: _log_start(run) > read + 1, 20
                )
        else:
            time.sleep(JUMP_S)
    start = _log_start(run)
    run.note(f"log start offset {start} after the jump (the group had read up to {read})")
    acked = len(views.acked_ids(run.events()))
    run.member("consumer-1", duration_s=120.0)
    run.wait_for(
        "writes acknowledged after the jump", lambda ev: len(views.acked_ids(ev)) >= acked + RATE, 30
    )
    producer.stop()
    run.wait_caught_up(40)
    result = run.finish()

    print(f"\n{variant}: {result.summary()}; log start {start} after the jump, group at {read}")
    assert result.count("lost_acked") == 0
    if variant == "vulnerable":
        happened = result.precondition(
            "retention removed values the group had not read while the leader's clock was ahead",
            removed_s is not None,
            f"log start offset {start}, the group at {read}",
        )
        if happened:
            assert result.count("expired_unread") > 0
            assert "expired_unread" in result.audit.failed_by
    else:
        assert start == 0, f"retention by size removed offsets below {start}"
        assert result.count("expired_unread") == 0
