"""L2 `producer_acks1_leader_crash_before_replication` — acks=1 writes die with the leader before replication.

docs/catalog.md 2 L2 (000 § 3.1(1):
"如果`Leader`在ACK之后立即失效、同时`Follower`还没有复制记录，这条记录会丢失"
— if the leader fails right after acking and the followers have not copied the record, it is lost; 000
§ 3.2; 001 同步机制 2 "主备切换可能丢数据"; 003 § 6(3)). No unclean election is involved: the followers stay
in the ISR, the election is clean, and acknowledged records still disappear.

Topology: topic of 3 partitions, RF 3; unclean leader election off (Kafka's default) in both variants.
The target is broker L, the leader of one partition P, not the active controller (a controller crash adds
a quorum election to the failover); F1, F2 are P's followers.

Timeline (ci; a producer sends 50 msg/s with 10 retries throughout; a one-member group consumes with
commit-after-processing; the runner's introspection reads leaders and ISRs every 0.5 s):

1. warm-up: 50 values acknowledged;
2. the followers lag: a **replication cut** F1→L and F2→L (``chaos.scenario.ReplicationCut``: iptables in
   each follower's namespace drops its fetches to L; quorum and clients untouched) — shorter than
   ``replica.lag.time.max.ms`` (6 s ``ci``), so both stay in P's ISR (the catalog's "pause them for less
   than replica.lag.time.max.ms");
3. 2.5 s after the second cut, ``docker kill`` L (ISR still [L, F1, F2]);
4. the controller fences L after ``broker.session.timeout.ms`` (6 s) and elects F1 or F2 — a **clean**
   election from the ISR; heal both cuts (the followers return);
5. restart L (it truncates its log to the new leader's); wait for 50 more acknowledgements; stop the
   producer; the group catches up; final drain; audit (the session's engine, Spark by default).

Variants (both claim ``at_least_once``, what the application needs):

- ``vulnerable`` — ``acks=1`` (the Java 2.2 default the seeds quote; librdkafka's default is all),
  ``min.insync.replicas=1``. L acknowledges every write to P during the cut by itself; the new leader never
  had them. Audit: ``lost_acked`` > 0, each lost value in a partition L led, acknowledged between the cut
  and the crash; verdict **fail**.
- ``remediated`` — ``acks=all`` (idempotent producer), ``min.insync.replicas=2``. Nothing written to P is
  acknowledged while the followers cannot fetch (acks=all waits for the whole ISR); the writes wait, are
  retried on the new leader, and are acknowledged there. Audit: ``lost_acked`` = 0; verdict **pass**.

Expected symptoms: no client-side error in ``vulnerable`` — the loss is invisible to the producer. The
returning L logs it (measured, trial run): "Follower t-…-0 starts at leader epoch 1 from offset 129 with
partition epoch 1 and high watermark 54", then "Truncating partition t-…-0 with TruncationState(offset=57,
completed=true) due to leader epoch and offset EpochEndOffset(errorCode=0, partition=0, leaderEpoch=0,
endOffset=57)" — 129 − 57 = 72 records, exactly the audit's ``lost_acked``. The new leader reuses those
offsets, so the audit also reports as many ``inconsistent_offsets`` (acks and log disagree on what sits
at an offset), as in ISR2.

What the test checks: the audit (above); the case's preconditions — the followers were still in P's ISR
when L died, a follower was elected (a clean election), and the cut held: in ``vulnerable`` L acknowledged
writes to its partitions alone during the cut, in ``remediated`` none was acknowledged. An unmet one makes
the run inconclusive.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Collection, Sequence

from chaos.faults.base import Fault, FaultRecord
from chaos.faults.process import Crash
from chaos.history import Event, SendOutcome
from chaos.scenario import (
    ExpectedSymptom,
    ReplicationCut,
    Scenario,
    ScenarioRun,
    Variant,
    chaos_scenario,
    views,
)
from chaos.scenario.load import steady_load

RATE = 50.0
CUT_BEFORE_CRASH_S = 2.5
CUT_DONE = "cut-done"
"""The mark written once both replication cuts are in place (after the second inject returned)."""
SETTLE_S = 0.5
"""Acks this soon after the cut was done may have been replicated before it: not counted."""

SCENARIO = Scenario(
    scenario_id="producer_acks1_leader_crash_before_replication",
    case_id="L2",
    title="acks=1: the leader crashes before its followers replicated acknowledged writes",
    source="000 § 3.1(1), § 3.2; 001 同步机制 2; 003 § 6(3)",
    symptom=(
        "如果`Leader`在ACK之后立即失效、同时`Follower`还没有复制记录，这条记录会丢失（Kafka写丢失的原因之一）"
    ),
    guarantee="at_least_once",
    topic_config={"unclean.leader.election.enable": False},
    variants=(
        Variant(
            "vulnerable",
            "acks=1, min.insync.replicas=1, unclean election off; followers lag, leader killed",
            expected_verdict="fail",
            client_profile="acks1_retries",
            producer_config={"acks": 1, "retries": 10, "retry.backoff.ms": 100, "enable.idempotence": False},
            topic_config={"min.insync.replicas": 1},
            expected_symptoms=(
                ExpectedSymptom(
                    "broker_log",
                    "due to leader epoch and offset EpochEndOffset",
                    "the returning old leader truncates its log to the new leader's epoch end offset",
                ),
            ),
        ),
        Variant(
            "remediated",
            "acks=all (idempotent), min.insync.replicas=2, unclean election off",
            expected_verdict="pass",
            client_profile="idempotent",
            producer_config={"acks": "all", "enable.idempotence": True},
            topic_config={"min.insync.replicas": 2},
        ),
    ),
    remediation=(
        "acks=all (003/004): a write is acknowledged only when every ISR member has it.",
        "replication.factor >= 3 and min.insync.replicas > 1, so acks=all never degrades to one copy.",
        "unclean.leader.election.enable=false (the default): a replica outside the ISR never leads.",
    ),
    related=("L4", "ISR2"),
)


def _state(run: ScenarioRun, partition: int) -> tuple[int | None, tuple[int, ...]]:
    state = run.cluster.partition(run.topic, partition)
    return state.leader, tuple(state.isr)


def acked_during_cut(
    events: Sequence[Event], led: Collection[int], crash: Fault | FaultRecord
) -> list[SendOutcome]:
    """The writes to L's partitions (``led``) acknowledged while the followers could not fetch: from
    :data:`SETTLE_S` after the :data:`CUT_DONE` mark to the crash's own inject event — found by name and by
    the fault's identity, whatever notes (a gate run's) or other faults the history holds."""
    cut_done = views.mark(events, CUT_DONE)
    crashed = views.fault_event(events, crash, "inject")
    return [
        e
        for e in views.outcomes(events, "ok")
        if e.partition in led and cut_done.mono + SETTLE_S < e.mono < crashed.mono
    ]


@chaos_scenario(SCENARIO)
def test_l2(run: ScenarioRun) -> None:
    variant = run.variant.name
    run.create_topic(partitions=3, replication_factor=3)
    producer = steady_load(run, rate=RATE, duration_s=120.0, flush_timeout_s=10.0)

    target = run.target_partition()
    leader, partition = target.leader, target.partition
    followers = tuple(b for b in target.replicas if b != leader)
    led = {s.partition for s in run.cluster.describe_partitions([run.topic]) if s.leader == leader}
    cuts = [run.fault(ReplicationCut, f, leader) for f in followers]
    for cut in cuts:
        cut.inject()
    run.mark(CUT_DONE)
    run.note(f"followers {followers} cut from leader {leader} (partitions {sorted(led)})")
    time.sleep(CUT_BEFORE_CRASH_S)
    isr_at_crash = _state(run, partition)[1]
    crash = run.fault(Crash, leader)
    crash.inject()
    fence_s: float | None = None
    with contextlib.suppress(AssertionError):  # a precondition, recorded after finish()
        fence_s = run.wait_until(
            f"a new leader of p{partition}", lambda: _state(run, partition)[0] not in (leader, None), 40
        )
    new_leader = _state(run, partition)[0]
    fenced = f"{fence_s:.1f} s" if fence_s is not None else "not within 40 s"
    run.note(f"p{partition}: leader {new_leader} {fenced} after the crash of {leader}")
    for cut in cuts:
        cut.heal()
    acked_at_move = len(views.acked_ids(run.events()))
    crash.heal()
    run.wait_for(
        "writes acknowledged again",
        lambda ev: len(views.acked_ids(ev)) >= acked_at_move + RATE,
        30,
    )
    producer.stop()
    run.wait_caught_up(40)
    result = run.finish()

    events = result.events
    cut_at = min((views.fault_event(events, cut) for cut in cuts), key=lambda e: e.mono)
    crashed = views.fault_event(events, crash)
    lost = dict(result.audit.facts.anomalies)["lost_acked"].examples
    # Both cuts in place (the mark is written after the second inject returned) until the crash.
    acked_led_during = acked_during_cut(events, led, crash)
    spans = views.leader_timeline(events, run.topic, partition, process="introspect")
    timeline = [(s.leader, round(s.first_mono - crashed.mono, 1), s.samples) for s in spans]
    not_ok = [e for e in views.outcomes(events) if e.outcome != "ok"]
    print(
        f"\n{variant}: leader {leader} of p{partition} (leads {sorted(led)}), followers {followers}; ISR at "
        f"the crash {isr_at_crash}; new leader {new_leader} {fenced} after the crash; acks on L's "
        f"partitions between cuts + 0.5 s and crash: {len(acked_led_during)}; non-ok sends {len(not_ok)} "
        f"{sorted({e.error or '' for e in not_ok})}; timeline {timeline}"
    )

    assert result.count("unseen_by_group") == 0
    # The followers were still in the ISR when L died: a clean election of a follower.
    in_isr = result.precondition(
        f"P's followers {followers} were still in its ISR when L ({leader}) was killed",
        set(isr_at_crash) == {leader, *followers},
        f"ISR at the crash {isr_at_crash}",
    )
    elected = result.precondition(
        f"a follower of L was elected leader of p{partition} (a clean election)",
        fence_s is not None and new_leader in followers,
        f"leader {new_leader} {fenced} after the crash; timeline {timeline}",
    )
    parts = ", ".join(map(str, sorted(led)))
    during = (
        f"{len(acked_led_during)} acks on partitions {parts} between the cuts + {SETTLE_S} s and the crash"
    )
    if variant == "vulnerable":
        acked_alone = result.precondition(
            "acks=1: L acknowledged writes alone while its followers could not fetch",
            bool(acked_led_during),
            during,
        )
        if in_isr and elected and acked_alone:
            assert result.count("lost_acked") > 0
            assert "lost_acked" in result.audit.failed_by
            # Lost: values L acknowledged alone, on its partitions, between the cut and the crash.
            assert all(e.partition in led for e in lost), lost
            assert all(e.ts is not None and cut_at.ts <= e.ts <= crashed.ts + 1.0 for e in lost), lost
    else:
        result.precondition(
            "the cut held: no write to L's partitions acknowledged (acks=all) while the followers were cut",
            not acked_led_during,
            f"{during}: {views.values_text(e.value_id for e in acked_led_during)}",
        )
        assert result.count("lost_acked") == 0
