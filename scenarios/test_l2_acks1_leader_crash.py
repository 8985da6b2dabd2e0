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

from chaos.faults.process import Crash
from chaos.scenario import ExpectedSymptom, Scenario, ScenarioRun, Variant, chaos_scenario
from chaos.scenario.leaderloss import leader_lost_before_replication

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


@chaos_scenario(SCENARIO)
def test_l2(run: ScenarioRun) -> None:
    leader_lost_before_replication(run, Crash, "killed")
