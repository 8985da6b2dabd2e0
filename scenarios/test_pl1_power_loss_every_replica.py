"""PL1 `power_loss_of_every_replica` — every replica of a partition loses power after acknowledged writes.

docs/catalog.md 5 PL1. Not a case from the seeds: the case Kafka's durability debate is about. Kafka
acknowledges a write once the in-sync replicas have it in their *page cache*: by default it never fsyncs a
segment until the segment rolls (``flush.messages`` / ``flush.ms`` are off), trusting replication instead
— copies on several machines will not all vanish at once. A correlated power loss (one rack, one power
feed, one availability zone, a hypervisor host under all three brokers) breaks that trust: every replica
loses what it had not written to disk, and ``acks=all`` with ``min.insync.replicas=2`` saves nothing.

Topology: topic of 1 partition, RF 3, ``min.insync.replicas=2``; an idempotent producer (acks=all) at
50 msg/s; a group of one member committing after processing. Each broker's log directory is mounted through
the fault layer (``Scenario(cluster=ClusterNeeds(log_dir_mb=1024, disk_layer=True))``: the session's
cluster starts again with it once, docs/faults.md "Disk faults through the fault layer"), which keeps
track of what each file had fsynced.

Timeline (ci):

1. warm-up: :data:`WARM` values acknowledged and delivered;
2. **every replica of the partition loses power at once** (``PowerLoss(LeaderOf(topic, 0),
   every_replica=True)``): each broker's layer drops what was written and never fsynced, then the three
   brokers are killed;
3. heal: the three start together (a quorum of them); the producer's retries and the group resume; wait for
   :data:`WARM` more acknowledgements (``vulnerable``: the idempotent producer may stop there instead, its
   sequence numbers ahead of a log that lost them — a fatal error it reports); stop the producer; the group
   catches up; final drain; audit.

Variants (both claim ``at_least_once``: every acknowledged value stays readable and reaches the group):

- ``vulnerable`` — the default flush settings. The acknowledged values since the partition's last roll were
  in every replica's page cache and nowhere else. Audit: ``lost_acked`` > 0 — acknowledged by all three
  replicas, in none after the restart; verdict **fail**.
- ``remediated`` — ``flush.messages=1`` on the topic: each replica fsyncs every append before the leader
  counts it as replicated, so nothing acknowledged was only in a page cache. Audit: ``lost_acked`` = 0;
  verdict **pass** (the group may read some values twice: its own committed offsets, in
  ``__consumer_offsets`` under the default flush settings, lost their last commits).

Expected symptoms: the brokers restart after an unclean shutdown and recover their logs ("Recovering
unflushed segment" / "Loading producer state"); the fault's proof of landing is every layer's power loss
and the brokers killed; the bytes it cut from the partition's directory are a precondition of
``vulnerable`` (none cut: nothing was at risk, the run is inconclusive).
"""

from __future__ import annotations

import contextlib

from chaos.faults.disk_layer import PowerLoss
from chaos.faults.targets import LeaderOf
from chaos.scenario import ClusterNeeds, Scenario, ScenarioRun, Variant, chaos_scenario, views

RATE = 50.0
WARM = 50

SCENARIO = Scenario(
    scenario_id="power_loss_of_every_replica",
    case_id="PL1",
    title="Every replica of a partition loses power right after acknowledged writes",
    source="Kafka's flush policy (flush.messages / flush.ms off by default): acks=all trusts page caches",
    symptom="after a correlated power loss, writes acknowledged with acks=all are missing on every replica",
    guarantee="at_least_once",
    client_profile="idempotent",
    producer_config={"acks": "all", "enable.idempotence": True},
    topic_config={"min.insync.replicas": 2},
    cluster=ClusterNeeds(log_dir_mb=1024, disk_layer=True),
    variants=(
        Variant(
            "vulnerable",
            "acks=all, min.insync.replicas=2, the default flush settings; every replica loses power",
            expected_verdict="fail",
        ),
        Variant(
            "remediated",
            "flush.messages=1 on the topic (each append fsynced by every replica); the same power loss",
            expected_verdict="pass",
            topic_config={"flush.messages": 1},
        ),
    ),
    remediation=(
        "Keep the replicas of a partition in separate failure domains (broker.rack with rack-aware "
        "placement across power feeds or zones): replication is Kafka's durability, and it holds only while "
        "the copies cannot fail together.",
        "Where a correlated loss must not lose acknowledged writes, flush each one (flush.messages=1, or a "
        "small flush.ms) on the topics that need it, and measure the throughput it costs.",
    ),
    related=("L2", "DF1"),
)


@chaos_scenario(SCENARIO)
def test_pl1(run: ScenarioRun) -> None:
    variant = run.variant.name
    run.create_topic(partitions=1, replication_factor=3)
    run.introspect(interval_s=0.5)
    run.member("consumer-0", duration_s=180.0)
    producer = run.producer(rate=RATE, duration_s=180.0, flush_timeout_s=15.0)
    run.wait_for("values acknowledged and delivered", lambda ev: len(views.delivered_ids(ev)) >= WARM, 30)
    acked = len(views.acked_ids(run.events()))
    with run.fault(PowerLoss, LeaderOf(run.topic, 0), every_replica=True) as loss:
        assert isinstance(loss, PowerLoss)
        cut = loss.dropped_from(run.topic, 0)
    run.note(f"{acked} values acknowledged before the power loss; {cut} bytes of the partition cut")
    resumed = False
    with contextlib.suppress(AssertionError):  # vulnerable: the producer may stop on a fatal error
        run.wait_for(
            "writes acknowledged after the restart",
            lambda ev: len(views.acked_ids(ev)) >= acked + WARM,
            60,
        )
        resumed = True
    producer.stop()
    run.wait_caught_up(60)
    result = run.finish()

    print(f"\n{variant}: {result.summary()}; {cut} bytes cut from the partition; resumed {resumed}")
    if variant == "vulnerable":
        happened = result.precondition(
            "the power loss cut acknowledged writes from the partition's replicas",
            cut > 0,
            f"{cut} bytes written and never fsynced cut from {run.topic}-0 across its replicas",
        )
        if happened:
            assert result.count("lost_acked") > 0
            assert "lost_acked" in result.audit.failed_by
    else:
        assert resumed, "the producer did not resume after the restart"
        assert cut == 0, f"flush.messages=1 left {cut} bytes of the partition unsynced"
        assert result.count("lost_acked") == 0
