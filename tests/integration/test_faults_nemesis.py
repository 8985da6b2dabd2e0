"""The nemesis runs a plan on its thread and leaves the cluster healed; a quorum-only isolation keeps
the broker serving clients while it drops out of replication."""

from __future__ import annotations

import time

import pytest

from chaos.cluster import wire
from chaos.cluster.cluster import KafkaCluster
from chaos.faults.base import DEFAULT_LOG
from chaos.faults.nemesis import Nemesis
from chaos.faults.network import IsolateFromQuorum
from chaos.faults.plan import FaultStep, Plan
from chaos.faults.targets import ActiveController, LeaderOf

pytestmark = pytest.mark.integration


def test_nemesis_runs_the_plan_and_heals(kafka_cluster: KafkaCluster, nemesis: Nemesis) -> None:
    topic = "nemesis-ops"
    kafka_cluster.create_topic(topic, partitions=1, replication_factor=3)
    replicas = kafka_cluster.partition(topic, 0).replicas
    moved = (*replicas[1:], replicas[0])  # another preferred leader
    plan = Plan(
        seed=0,
        brokers=3,
        steps=(
            FaultStep(0.0, 1.0, "reassign_replicas", LeaderOf(topic, 0), (("replicas", moved),)),
            FaultStep(1.5, 1.0, "preferred_election", LeaderOf(topic, 0)),
            FaultStep(3.0, 1.0, "latency", 2, (("direction", "both"), ("ms", 200), ("paths", ("ext",)))),
            FaultStep(4.5, 1.0, "pause", ActiveController()),
            FaultStep(6.0, 1.0, "refuse", 1, (("paths", ("ext",)),)),
            FaultStep(7.5, 1.0, "remove_broker", 3),
        ),
    )
    before = len(DEFAULT_LOG.records())
    nemesis.start(Plan.from_json(plan.to_json()))
    assert nemesis.wait(120)
    # the reassignment's revert may hand leadership back to the preferred replica: then the election has
    # nothing to move and is skipped (Fault.idle_reason), never run as a fault that cannot land
    idle = (
        "preferred_election at 1.5s: skipped, every partition asked is led by its preferred replica already"
    )
    assert nemesis.errors in ([], [idle])
    records = DEFAULT_LOG.records()[before:]
    kinds = ["reassign_replicas", "preferred_election", "latency", "pause", "refuse", "remove_broker"]
    if nemesis.errors:
        kinds.remove("preferred_election")
    assert [r.kind for r in records] == kinds
    assert all(r.healed_at is not None and r.error is None for r in records)
    assert records[0].target == f"topic {topic}"
    paused = next(r for r in records if r.kind == "pause")
    assert paused.brokers[0] in {1, 2, 3}
    assert kafka_cluster.partition(topic, 0).replicas == replicas  # the reassignment reverted
    for broker in kafka_cluster.brokers:
        assert broker.status() == "running"
        assert wire.api_versions("127.0.0.1", broker.ext_port, timeout_s=5).request_s < 0.2


def test_isolated_from_quorum_still_serves_clients_but_leaves_isr(kafka_cluster: KafkaCluster) -> None:
    topic = "isolated"
    kafka_cluster.create_topic(topic, partitions=1, replication_factor=3)
    lag_s = kafka_cluster.config.detection_timeout_s("replica.lag.time.max.ms", 30000)
    # not the active controller: isolating it adds an election (see test_faults_replication.py)
    controller = kafka_cluster.controller_id()
    target = next(f for f in kafka_cluster.partition(topic, 0).followers if f != controller)
    broker = kafka_cluster.broker(target)
    # the isolated broker answers clients from a stale cache: read the quorum side's view
    observer = next(b.node_id for b in kafka_cluster.brokers if b.node_id != target)
    with IsolateFromQuorum(kafka_cluster, target):
        started = time.monotonic()
        while target in kafka_cluster.partition(topic, 0, via=observer).isr:
            assert time.monotonic() - started < lag_s + 10, "isolated follower stayed in the ISR"
            time.sleep(0.2)
        shrink_s = time.monotonic() - started
        # the client path is untouched: the broker still answers on its ext proxy
        answer = wire.api_versions("127.0.0.1", broker.ext_port, timeout_s=3)
        print(
            f"isolated broker {target} left the ISR after {shrink_s:.1f} s; "
            f"its ext proxy answers in {answer.request_s:.3f} s"
        )
    deadline = time.monotonic() + 60
    while len(kafka_cluster.partition(topic, 0).isr) < 3:
        assert time.monotonic() < deadline, "ISR not back to 3 within 60 s of healing"
        time.sleep(0.2)
