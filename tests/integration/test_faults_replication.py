"""Replication under faults: a cut follower leaves the ISR and returns; a crashed leader is replaced."""

from __future__ import annotations

import time
from typing import Any

import pytest

from chaos.cluster.cluster import KafkaCluster
from chaos.faults.network import NetworkCut
from chaos.faults.process import Crash
from chaos.faults.targets import FollowerOf, LeaderOf

pytestmark = pytest.mark.integration

MARGIN_S = 10.0  # the leader checks lag every replica.lag.time.max.ms / 2, then asks the controller


def wait_for(condition: Any, timeout_s: float, what: str) -> float:
    started = time.monotonic()
    deadline = started + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return time.monotonic() - started
        time.sleep(0.2)
    raise AssertionError(f"{what} did not happen within {timeout_s} s")


def test_cut_follower_leaves_isr_within_lag_time_and_rejoins(kafka_cluster: KafkaCluster) -> None:
    topic = "isr-cut"
    kafka_cluster.create_topic(topic, partitions=1, replication_factor=3, config={"min.insync.replicas": "2"})
    lag_s = kafka_cluster.config.detection_timeout_s("replica.lag.time.max.ms", 30000)
    # A follower that is not the active controller: cutting the controller adds a quorum election
    # (measured 15-18 s in all on a loaded machine); that is another scenario with another margin.
    followers = kafka_cluster.partition(topic, 0).followers
    index = 1 if followers[0] == kafka_cluster.controller_id() else 0
    fault = NetworkCut(kafka_cluster, FollowerOf(topic, 0, index))
    with fault:
        (follower,) = fault.brokers
        shrink_s = wait_for(
            lambda: follower not in kafka_cluster.partition(topic, 0).isr, lag_s + MARGIN_S, "ISR shrink"
        )
        print(f"follower {follower} left the ISR {shrink_s:.1f} s after the cut (lag time {lag_s:.0f} s)")
        assert len(kafka_cluster.partition(topic, 0).isr) == 2
    rejoin_s = wait_for(lambda: len(kafka_cluster.partition(topic, 0).isr) == 3, 60, "ISR back to 3")
    print(f"ISR back to 3 {rejoin_s:.1f} s after heal")


def test_crashed_leader_is_replaced_acks_all_continues_and_it_rejoins(kafka_cluster: KafkaCluster) -> None:
    from confluent_kafka import Producer

    topic = "leader-crash"
    kafka_cluster.create_topic(topic, partitions=1, replication_factor=3, config={"min.insync.replicas": "2"})
    producer = Producer(
        {
            "bootstrap.servers": kafka_cluster.bootstrap_servers,
            "acks": "all",
            "enable.idempotence": True,
            "message.timeout.ms": 30000,
            "socket.connection.setup.timeout.ms": 3000,
        }
    )
    delivered: list[int] = []
    errors: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            delivered.append(msg.offset())

    def produce(count: int, tag: str) -> None:
        for i in range(count):
            producer.produce(topic, value=f"{tag}-{i}".encode(), on_delivery=on_delivery)
        assert producer.flush(40) == 0

    produce(50, "before")
    fault = Crash(kafka_cluster, LeaderOf(topic, 0))
    with fault:
        (old_leader,) = fault.brokers
        failover_s = wait_for(
            lambda: kafka_cluster.partition(topic, 0).leader not in (None, old_leader), 30, "leader election"
        )
        state = kafka_cluster.partition(topic, 0)
        print(
            f"leader {old_leader} crashed; broker {state.leader} leads after {failover_s:.1f} s, "
            f"isr {state.isr}"
        )
        produce(50, "during")
        assert old_leader not in kafka_cluster.partition(topic, 0).isr
    rejoin_s = wait_for(
        lambda: old_leader in kafka_cluster.partition(topic, 0).isr, 60, "old leader rejoins ISR"
    )
    print(
        f"broker {old_leader} restarted in {fault.restart_s:.1f} s and rejoined the ISR "
        f"{rejoin_s:.1f} s later"
    )
    assert errors == []
    assert len(delivered) == 100
    assert sorted(delivered) == list(range(100))
