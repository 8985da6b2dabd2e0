"""DF1 `leader_disk_full_before_replication` — the leader's log directory fills up while its followers lag.

docs/catalog.md 5 DF1. Not a case from the seeds: L2's loss, with the leader lost to a full disk instead
of a kill. Kafka writes every partition of a broker into its log directory; when a write there fails
("No space left on device") Kafka marks the directory failed (``KafkaStorageException``) and, as that
directory also holds the broker's KRaft metadata log, the broker shuts itself down: its partitions lose
their leader exactly as if it had been killed — and what it had acknowledged alone goes with it.

Topology: topic of 3 partitions, RF 3; unclean leader election off. Each broker's log directory is a
filesystem of its own (``Scenario(cluster=ClusterNeeds(log_dir_mb=1024))``: the session's cluster starts
again with them once, docs/cluster.md); the target is broker L, the leader of one partition P, not the
active controller; F1, F2 are P's followers.

Timeline (ci; a producer sends 50 msg/s with 10 retries throughout; a one-member group consumes with
commit-after-processing; the runner's introspection reads leaders and ISRs every 0.5 s):

1. warm-up: 50 values acknowledged and delivered;
2. the followers lag: a **replication cut** F1→L and F2→L, shorter than ``replica.lag.time.max.ms`` (6 s
   ``ci``), so both stay in P's ISR;
3. 2.5 s after the second cut, **L's log directory fills** (``DiskFull``: a ballast file takes its last
   byte); L's next write fails, it logs the storage error and shuts itself down;
4. the controller fences L after ``broker.session.timeout.ms`` (6 s) and elects F1 or F2 — a **clean**
   election from the ISR; heal both cuts;
5. heal the disk: the ballast removed, L started again (it truncates its log to the new leader's); wait
   for 50 more acknowledgements; stop the producer; the group catches up; final drain; audit.

Variants (both claim ``at_least_once``):

- ``vulnerable`` — ``acks=1``, ``min.insync.replicas=1``. L acknowledges every write to P during the cut
  by itself; the new leader never had them. Audit: ``lost_acked`` > 0, each lost value in a partition L
  led, acknowledged between the cut and the fill; verdict **fail**.
- ``remediated`` — ``acks=all`` (idempotent), ``min.insync.replicas=2``. Nothing written to P is
  acknowledged while the followers cannot fetch; the writes wait, are retried on the new leader and
  acknowledged there. Audit: ``lost_acked`` = 0; verdict **pass**.

Expected symptoms: L logs the failed write ("No space left on device") in both variants; the fault's own
proof of landing is that storage error and the leaderships that moved.

What the test checks: as L2 — the audit, and the preconditions (the followers still in P's ISR when the
disk filled, a follower elected, in ``vulnerable`` L acknowledged writes alone during the cut, in
``remediated`` none); the disk fault's proof of landing (the storage error) is one more: unmet, the run
is inconclusive.
"""

from __future__ import annotations

from chaos.faults.disk import DiskFull
from chaos.scenario import ClusterNeeds, ExpectedSymptom, Scenario, ScenarioRun, Variant, chaos_scenario
from chaos.scenario.leaderloss import leader_lost_before_replication

SCENARIO = Scenario(
    scenario_id="leader_disk_full_before_replication",
    case_id="DF1",
    title="A leader's log directory fills up before its followers replicated acknowledged writes",
    source="Kafka's log directory failure handling (KafkaStorageException); L2's loss by another cause",
    symptom="a broker whose disk filled shuts down; acks=1 writes it alone had taken are gone",
    guarantee="at_least_once",
    topic_config={"unclean.leader.election.enable": False},
    cluster=ClusterNeeds(log_dir_mb=1024),
    expected_symptoms=(
        ExpectedSymptom("broker_log", "No space left on device", "the leader's write to its full disk fails"),
    ),
    variants=(
        Variant(
            "vulnerable",
            "acks=1, min.insync.replicas=1, unclean election off; followers lag, the leader's disk fills",
            expected_verdict="fail",
            client_profile="acks1_retries",
            producer_config={"acks": 1, "retries": 10, "retry.backoff.ms": 100, "enable.idempotence": False},
            topic_config={"min.insync.replicas": 1},
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
        "acks=all with min.insync.replicas=2 (RF 3): a write is acknowledged only once the ISR has it, so "
        "a leader lost to a full disk takes nothing acknowledged with it.",
        "Alert on log directory usage well before it is full (Kafka's LogDirsUnavailable / offline log "
        "directory metrics, the filesystem's free space); size retention.bytes to the disk.",
    ),
    related=("L2", "ISR2"),
)


@chaos_scenario(SCENARIO)
def test_df1(run: ScenarioRun) -> None:
    leader_lost_before_replication(run, DiskFull, "lost to a full disk")
