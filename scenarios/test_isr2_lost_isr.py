"""ISR2 / L4 — lost ISR: a follower falls out of the ISR, the leader crashes, the stale follower takes over.

docs/catalog.md 1B ISR2 `isr_last_replica_down_partition_offline` (seed 002 › 场景4) and 2 L4
`unclean_leader_election_loss` (003 § 6, 004 § 最佳实践 4). The seed stopped brokers too fast: the only
in-sync replica went down, the returning stale broker could not lead ("Failed to elect leader …"), the
partition stayed unavailable. With ``unclean.leader.election.enable=true`` the stale replica *does* lead,
and everything only the old leader had is lost (004: "如果一个Broker落后原先的Leader太多，那么它一旦成为新的
Leader，必然会造成消息的丢失").

Topology: one partition, replication factor 2 (leader L, follower F) on the 3-broker cluster; the third
broker keeps the KRaft quorum at 2 of 3 voters while L is down. F is taken out of the ISR by a
**replication cut** (iptables in F's namespace drops F's fetches to L's replication proxy; F stays in the
quorum and reachable by clients) — a full network cut of F plus a crash of L would leave one voter of
three, and no election could happen at all.

Timeline (ci; the sampler runs every 0.5 s, a producer sends 25 msg/s throughout, a one-member group
consumes with commit-after-processing):

1. warm-up: 25+ values acknowledged;
2. replication cut F→L; F leaves the ISR after ``replica.lag.time.max.ms`` (6 s, + the leader's check);
3. 2 s of writes with F out of the ISR;
4. ``docker kill`` L; the controller fences L after ``broker.session.timeout.ms`` (6 s);
5. 3 s of writes after the election (or the offline window);
6. heal the replication cut, then restart L; wait for a full ISR; stop the producer; the group catches up;
   final drain; audit (the session's engine: Spark, reading the topic through Kafka, unless
   ``--chaos-audit-engine reference``).

Variants (every producer retries 10 times; every variant claims at-least-once):

- ``vulnerable`` — ``unclean.leader.election.enable=true``, ``min.insync.replicas=1``, ``acks=1``. F (stale)
  is elected once L is fenced; L truncates when it returns. Audit: ``lost_acked`` > 0 (writes only L had
  acknowledged in step 3): verdict **fail**.
- ``remediated`` — ``unclean…=false``, ``min.insync.replicas=2``, ``acks=all``. Step 3's writes are refused
  (``NOT_ENOUGH_REPLICAS``, ISR3): no loss, verdict **pass**.
- ``unclean_off`` — the seed's own defaults: ``unclean…=false``, ``min.insync.replicas=1``, ``acks=1``. The
  partition is **offline** (no leader) from L's fencing until L returns; no loss, verdict **pass**.

Measured (docs/measurements.md): F leaves the ISR 6–9 s after the cut; L is fenced 5–7 s after its crash.
``vulnerable`` elects F (unclean) at the fencing and loses the ~3 s of writes L alone acknowledged;
``remediated`` acknowledges nothing while the ISR holds one replica and — Kafka 4.1's Eligible Leader
Replicas (KIP-966, on by default) — F, removed from the ISR while it was at ``min.insync.replicas``, is
elected *cleanly* at the fencing: no offline window; ``unclean_off`` is offline from the fencing until L
is back, then L leads again. The AdminClient sampler cannot read the partition while a broker is down
(every sample failed), so the runner's raw-metadata introspection gives the leader timeline.
"""

from __future__ import annotations

import contextlib
import re
import time

from chaos.faults.process import Crash
from chaos.history import Event
from chaos.report import render_run
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

RATE = 25.0

SCENARIO = Scenario(
    scenario_id="isr_last_replica_down_partition_offline",
    case_id="ISR2",
    title="Lost ISR: follower out of the ISR, leader crash, stale follower returns",
    source="002 › 场景4; 003 § 6(3)(4); 004 § 最佳实践 4",
    symptom=(
        "恢复broker2，无法启动kafka client端服务，报错，unexpected — "
        "kafka.common.StateChangeFailedException: Failed to elect leader for partition T-TEST-0 under "
        "strategy PreferredReplicaPartitionLeaderElectionStrategy"
    ),
    guarantee="at_least_once",
    expected_verdict="pass",
    # The seed's defaults (unclean_off); the other variants change one or two of them.
    client_profile="acks1_retries",
    producer_config={"acks": 1, "retries": 10, "retry.backoff.ms": 100, "enable.idempotence": False},
    topic_config={"unclean.leader.election.enable": False, "min.insync.replicas": 1},
    variants=(
        Variant(
            "vulnerable",
            "unclean.leader.election.enable=true, min.insync.replicas=1, acks=1",
            expected_verdict="fail",
            topic_config={"unclean.leader.election.enable": True},
            expected_symptoms=(ExpectedSymptom("broker_log", "Shrinking ISR", "F leaves the leader's ISR"),),
        ),
        Variant(
            "remediated",
            "unclean.leader.election.enable=false, min.insync.replicas=2, acks=all",
            client_profile="at_least_once",
            producer_config={"acks": "all"},
            topic_config={"min.insync.replicas": 2},
            expected_symptoms=(
                ExpectedSymptom("error_code", "NOT_ENOUGH_REPLICAS", "writes refused below min ISR (ISR3)"),
            ),
        ),
        Variant("unclean_off", "The seed's defaults: unclean election off, min.insync.replicas=1, acks=1"),
    ),
    remediation=(
        "Keep unclean.leader.election.enable=false (the default since 0.11): a stale replica never leads.",
        "acks=all with min.insync.replicas=2 and replication.factor >= 3: a write is acknowledged only "
        "once a second replica has it (003/004: RF = min.insync.replicas + 1).",
        "Do not stop brokers faster than the cluster fails over: wait for a full ISR before the next "
        "stop (seed: 启停kafka服务操作时不要动作太快).",
    ),
    related=("L4", "ISR3"),
)


def _isr(run: ScenarioRun) -> tuple[int | None, tuple[int, ...]]:
    state = run.cluster.partition(run.topic, 0)
    return state.leader, tuple(state.isr)


def _last_isr_size(events: list[Event], topic: str) -> int:
    readings = views.samples(events, process="introspect")
    return len(views.isr_of(readings[-1], topic, 0) or ()) if readings else 0


def _single_replica_window(events: tuple[Event, ...], topic: str) -> tuple[float | None, float | None]:
    """From the first introspection reading with an ISR of one replica to the next with two (``None``
    for an edge the readings do not show)."""
    start = end = None
    for sample in views.samples(events, process="introspect"):
        isr = views.isr_of(sample, topic, 0)
        if start is None and isr is not None and len(isr) == 1:
            start = sample.mono
        elif start is not None and isr is not None and len(isr) == 2:
            end = sample.mono
            break
    return start, end


def _secs(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


@chaos_scenario(SCENARIO)
def test_isr2(run: ScenarioRun) -> None:
    variant = run.variant.name
    run.create_topic(partitions=1, replication_factor=2)
    producer = steady_load(run, rate=RATE, duration_s=150.0, flush_timeout_s=5.0)

    leader = _isr(run)[0]
    (follower,) = (b for b in run.cluster.partition(run.topic, 0).replicas if b != leader)
    cut = run.fault(ReplicationCut, follower, leader)
    cut.inject()
    shrink_s: float | None = None
    fence_s: float | None = None
    with contextlib.suppress(AssertionError):  # a precondition, recorded after finish()
        shrink_s = run.wait_until(
            f"follower {follower} leaves the ISR", lambda: _isr(run)[1] == (leader,), 40
        )
        run.note(f"ISR shrank to [{leader}] {shrink_s:.1f} s after the replication cut")
    time.sleep(2.0)
    crash = run.fault(Crash, leader)
    crash.inject()
    with contextlib.suppress(AssertionError):  # a precondition, recorded after finish()
        fence_s = run.wait_until(
            "the controller fences the crashed leader", lambda: _isr(run)[0] != leader, 40
        )
        run.note(f"leader after the crash: {_isr(run)} ({fence_s:.1f} s)")
    time.sleep(3.0)
    cut.heal()
    crash.heal()
    run.wait_until("a full ISR again", lambda: len(_isr(run)[1]) == 2, 60)
    # ... and the introspection (every 0.5 s, stopped by finish) has recorded it: the checks read it.
    run.wait_for("an introspected full ISR", lambda ev: _last_isr_size(ev, run.topic) == 2, 10)
    producer.stop()
    run.wait_caught_up(40)
    # With the Spark engine (the default) the audit reads the topic's real contents through Kafka, not
    # only the drain's reads.
    result = run.finish()

    if variant != "vulnerable":
        assert result.count("lost_acked") == 0
        assert result.count("unseen_by_group") == 0
    events = result.events
    crashed, restarted = views.fault_window(events, crash)
    cut_at = views.fault_event(events, cut)
    cut_healed = views.fault_window(events, cut)[1]
    spans = views.leader_timeline(events, run.topic, 0, process="introspect")
    timeline = [(s.leader, round(s.first_mono - crashed, 1), s.samples) for s in spans]
    refused = [e for e in views.outcomes(events) if e.outcome != "ok"]
    # Acknowledged while the ISR held one replica (with a 1 s margin on the 0.5 s readings on each side).
    narrow = _single_replica_window(events, run.topic)
    start, end = narrow
    acked_narrow = (
        []
        if start is None or end is None
        else [e for e in views.outcomes(events, "ok") if start + 1.0 < e.mono < end - 1.0]
    )
    span = None if start is None or end is None else end - start
    print(
        f"{variant}: leader {leader}, follower {follower}; ISR shrink {_secs(shrink_s)} s after the cut; "
        f"leader moved off {leader} {_secs(fence_s)} s after the crash; leader timeline (leader, s from "
        f"crash, samples) {timeline}; old leader back at +{_secs(restarted and restarted - crashed)} s; "
        f"non-ok sends {len(refused)} {sorted({e.error or '' for e in refused})}; ISR of one replica for "
        f"{_secs(span)} s; acks inside: {len(acked_narrow)}"
    )

    # Elections happen when the controller fences the old leader; the restart begins after the cut's heal.
    down = [s for s in spans if cut_healed is not None and crashed < s.first_mono < cut_healed]
    leaders_down = {s.leader for s in down}
    case = [
        result.precondition(
            f"follower {follower} left the ISR within 40 s of the replication cut",
            shrink_s is not None,
            f"{_secs(shrink_s)} s",
        ),
        result.precondition(
            f"the leadership moved off the crashed leader {leader} within 40 s",
            fence_s is not None,
            f"{_secs(fence_s)} s",
        ),
        result.precondition(
            "the replication cut was healed and the old leader restarted",
            cut_healed is not None and restarted is not None,
            (cut_healed, restarted),
        ),
        result.precondition(
            "the introspection saw the ISR shrink to one replica and grow back to two",
            start is not None and end is not None,
            narrow,
        ),
        result.precondition(
            "the introspection read the partition while the old leader was down", bool(down), timeline
        ),
    ]
    if variant != "remediated":
        case.append(
            result.precondition(
                "acks=1 kept acknowledging with one replica in sync", bool(acked_narrow), len(acked_narrow)
            )
        )
    if not all(case):
        return
    if variant == "vulnerable":
        # The stale follower was elected (unclean) and the writes only the old leader had are gone.
        if not result.precondition(
            f"the stale follower {follower} was elected (unclean) while the old leader was down",
            follower in leaders_down and leaders_down <= {follower, None},
            timeline,
        ):
            return
        assert result.count("lost_acked") > 0
        assert "lost_acked" in result.audit.failed_by
        lost = dict(result.audit.facts.anomalies)["lost_acked"].examples
        assert lost
        assert all(e.ts is not None and e.ts >= cut_at.ts for e in lost), (
            "a value acked before the cut was lost"
        )
        # The incident report of this real run names the case, the failed verdict, the loss and the symptom.
        page = render_run(result.run_dir).page.read_text()
        assert '<section id="verdict" class="banner fail">' in page
        assert "<tr><th>catalog case</th><td>ISR2" in page
        row = re.search(r'<td class="mono">lost_acked</td><td class="num">([\d,]+)</td>', page)
        assert row is not None
        assert int(row.group(1).replace(",", "")) == result.count("lost_acked")
        shown = re.search(r'Shrinking ISR</span>.*?<span class="tag (\w+)">([^<]+)</span>', page, re.S)
        result.symptom(
            "the incident report shows the broker log line 'Shrinking ISR' as observed",
            shown is not None and shown.group(1) == "yes",
            shown.group(2) if shown else "no 'Shrinking ISR' row in the report",
        )
    elif variant == "remediated":
        # acks=all with min.insync.replicas=2: nothing is acknowledged while one replica is in sync (ISR3);
        # the producer's retries hold the writes (NOT_ENOUGH_REPLICAS) until the ISR is back to 2 ...
        assert acked_narrow == [], acked_narrow[:3]
        # ... and Kafka 4.1's ELR (KIP-966) let the follower lead cleanly before the old leader returned.
        result.symptom(
            f"Kafka's ELR elected follower {follower} cleanly while the old leader was down",
            follower in leaders_down and leaders_down <= {follower, None},
            timeline,
        )
    else:
        # The seed's case: offline from the fencing until the old leader itself is back.
        assert leaders_down == {None}, timeline
        back = [s for s in spans if cut_healed is not None and s.first_mono > cut_healed]
        result.symptom(
            f"the old leader {leader} led the partition again once back",
            bool(back) and back[0].leader == leader,
            timeline,
        )
