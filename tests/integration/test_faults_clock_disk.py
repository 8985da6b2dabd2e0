"""Clock and disk faults on the real cluster: each proves it landed the way its own measure says, then heals.

A clock jump moves the leader's log timestamps and the LogAppendTime it gives a record; a drift makes that
offset grow; a full log directory makes the broker log the storage error and give up its leaderships; a
slow disk slows the leader's acknowledgements; an unwritable disk makes the broker log the storage error;
a power loss of every replica loses the acknowledged records that were never fsynced, and none of a topic
that flushes each one. Numbers are printed (run with ``-s``) and logged in docs/measurements.md. The tests
share a cluster of their own that opts in to all (``fake_clock=True``, ``log_dir_mb``, ``disk_layer``),
started once for the module and closed after it.
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from chaos.cluster.cluster import KafkaCluster
from chaos.cluster.config import ClusterConfig
from chaos.faults.base import Fault, FaultLog
from chaos.faults.clock import RELOAD_S, SETTLE_S, ClockDrift, ClockJump, log_skews
from chaos.faults.disk import STORAGE_ERROR, DiskFull
from chaos.faults.disk_layer import DiskError, PowerLoss, SlowDisk
from chaos.faults.heal import heal_all
from chaos.faults.targets import LeaderOf, resolve

if TYPE_CHECKING:
    from chaos.cluster.images import ImageSet

pytestmark = [pytest.mark.integration, pytest.mark.own_cluster]

JUMP_S = 120.0
LOG_APPEND_TIME = {"message.timestamp.type": "LogAppendTime"}


@pytest.fixture(scope="module")
def own_cluster(
    chaos_images: ImageSet, chaos_cluster_config: ClusterConfig, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KafkaCluster]:
    """A cluster whose brokers read a fakeable clock and keep their data in 256 MB directories of their
    own, mounted through the fault layer."""
    config = ClusterConfig(
        profile=chaos_cluster_config.profile, log_dir_mb=256, fake_clock=True, disk_layer=True
    )
    cluster = KafkaCluster(chaos_images, config, run_dir=Path(tmp_path_factory.mktemp("clock-disk")))
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def kafka_cluster(own_cluster: KafkaCluster) -> Iterator[KafkaCluster]:
    """The module's cluster, healed after each test."""
    try:
        yield own_cluster
    finally:
        heal_all(own_cluster)
        own_cluster.wait_healthy(60)


def wait_for_storage_error(
    cluster: KafkaCluster, broker_id: int, fault: Fault, timeout_s: float = 20
) -> float:
    """Seconds until broker ``broker_id`` logged a storage error after ``fault``'s inject."""
    container = cluster.broker(broker_id).docker

    def logged() -> bool:
        assert fault.record is not None
        text = container.logs(since=fault.record.injected_at).decode(errors="replace")
        return bool(STORAGE_ERROR.search(text))

    return wait_for(logged, timeout_s, "the storage error in the broker's log")


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str, interval_s: float = 0.2) -> float:
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"{what} did not happen within {timeout_s} s")
        time.sleep(interval_s)
    return time.monotonic() - started


def append_time_offset(bootstrap: str, topic: str) -> float:
    """Produce one record to partition 0 and read it back: its LogAppendTime (the leader's clock) less the
    real time it was sent at, in seconds."""
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "log_level": 0})
    delivered: list[Any] = []
    sent = time.time()
    producer.produce(
        topic, value=b"tick", partition=0, on_delivery=lambda err, msg: delivered.append((err, msg))
    )
    assert producer.flush(15) == 0
    acked = time.time()
    ((err, msg),) = delivered
    assert err is None, err
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"clock-{uuid.uuid4().hex[:8]}", "log_level": 0}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, msg.offset())])
        record = None
        deadline = time.monotonic() + 15
        while record is None and time.monotonic() < deadline:
            record = consumer.poll(0.5)
        assert record is not None
        assert record.error() is None
        kind, stamp_ms = record.timestamp()
        assert kind == TIMESTAMP_LOG_APPEND_TIME
    finally:
        consumer.close()
    return stamp_ms / 1000 - (sent + acked) / 2


def test_a_clock_jump_moves_the_leaders_log_timestamps_and_log_append_time(
    kafka_cluster: KafkaCluster,
) -> None:
    cluster = kafka_cluster
    topic = f"clock-{uuid.uuid4().hex[:6]}"
    cluster.create_topic(topic, partitions=1, replication_factor=3, config=LOG_APPEND_TIME)
    bootstrap = cluster.bootstrap_servers
    leader = resolve(cluster, LeaderOf(topic, 0))
    before = append_time_offset(bootstrap, topic)
    log = FaultLog()
    jump = ClockJump(cluster, leader, by=JUMP_S, log=log)
    with jump:
        time.sleep(RELOAD_S + 0.5)
        during = append_time_offset(bootstrap, topic)
        # a topic created now makes every broker log a few lines with its own clock
        cluster.create_topic(f"{topic}-x", partitions=1, replication_factor=3)
        assert jump.set_at is not None
        lines = log_skews(cluster, leader, since=jump.set_at + SETTLE_S)
    time.sleep(RELOAD_S + 0.5)
    after = append_time_offset(bootstrap, topic)
    record = log.records()[0]
    assert record.effect is not None
    print(
        f"\nMEASURED clock_jump +{JUMP_S:.0f} s on broker {leader}: LogAppendTime - send time "
        f"{before:+.3f} s before, {during:+.3f} s during, {after:+.3f} s after; log lines in the window "
        f"{len(lines)}, median skew {statistics.median(s.ahead_s for s in lines):+.3f} s; "
        f"effect: {record.effect.evidence}"
    )
    assert abs(before) < 1.0
    assert abs(during - JUMP_S) < 1.0
    assert abs(after) < 1.0
    assert lines, "the leader logged nothing while the jump held"
    assert abs(statistics.median(s.ahead_s for s in lines) - JUMP_S) < 1.0
    assert record.effect.observed, record.effect.evidence
    assert record.healed_at is not None


def test_a_clock_drift_makes_the_leaders_offset_grow(kafka_cluster: KafkaCluster) -> None:
    cluster = kafka_cluster
    topic = f"drift-{uuid.uuid4().hex[:6]}"
    cluster.create_topic(topic, partitions=1, replication_factor=3, config=LOG_APPEND_TIME)
    bootstrap = cluster.bootstrap_servers
    leader = resolve(cluster, LeaderOf(topic, 0))
    log = FaultLog()
    drift = ClockDrift(cluster, leader, rate=3.0, log=log)
    samples: list[tuple[float, float, float]] = []  # (seconds since set, measured, expected)
    with drift:
        assert drift.set_at is not None
        for _ in range(3):
            time.sleep(2.0)
            offset = append_time_offset(bootstrap, topic)
            now = time.time()
            samples.append((now - drift.set_at, offset, drift.offset_at(now)))
        cluster.create_topic(f"{topic}-x", partitions=1, replication_factor=3)
    time.sleep(RELOAD_S + 0.5)
    after = append_time_offset(bootstrap, topic)
    record = log.records()[0]
    assert record.effect is not None
    shown = ", ".join(f"{t:.1f} s: {m:+.2f} (expected {e:+.2f})" for t, m, e in samples)
    print(
        f"\nMEASURED clock_drift x3 on broker {leader}: {shown}; after heal {after:+.3f} s; "
        f"effect: {record.effect.evidence}"
    )
    measured = [m for _, m, _ in samples]
    assert measured == sorted(measured)
    assert measured[-1] > measured[0] + 2.0
    # the offset is rewritten every 0.5 s and read by the JVM within a second: it lags by up to 3 s here
    assert all(abs(m - e) < 3.5 for _, m, e in samples)
    assert abs(after) < 1.0
    assert record.effect.observed, record.effect.evidence


def test_a_full_log_directory_stops_the_broker_and_moves_its_leaderships(kafka_cluster: KafkaCluster) -> None:
    cluster = kafka_cluster
    topic = f"disk-{uuid.uuid4().hex[:6]}"
    cluster.create_topic(topic, partitions=3, replication_factor=3, config={"min.insync.replicas": "2"})
    controller = cluster.controller_id()
    states = cluster.describe_partitions([topic])
    leaders = {s.leader for s in states if s.leader is not None and s.leader != controller}
    target = min(leaders) if leaders else next(b.node_id for b in cluster.brokers if b.node_id != controller)
    led = [s.partition for s in states if s.leader == target]
    via = next(b.node_id for b in cluster.brokers if b.node_id not in (target,))
    log = FaultLog()
    full = DiskFull(cluster, target, log=log)
    started = time.monotonic()
    with full:
        container = cluster.broker(target).docker
        logged = wait_for_storage_error(cluster, target, full)

        def moved() -> bool:
            now = {s.partition: s.leader for s in cluster.describe_partitions([topic], via=via)}
            return all(now.get(p) not in (target, None) for p in led)

        moved_s = wait_for(moved, 30, "the leaderships of its partitions moving")
        container.reload()
        status = container.status
    healed_s = time.monotonic() - started
    record = log.records()[0]
    assert record.effect is not None
    print(
        f"\nMEASURED disk_full on broker {target} (led partitions {led}): storage error logged after "
        f"{logged:.1f} s, its leaderships moved after {moved_s:.1f} s more, container {status}; healed "
        f"(ballast removed, restart) {healed_s:.1f} s after the inject; notes {record.notes}; "
        f"effect: {record.effect.evidence}"
    )
    assert record.effect.observed, record.effect.evidence
    assert full.restarted
    assert cluster.broker(target).status() == "running"
    assert record.healed_at is not None


def produce_acked(bootstrap: str, topic: str, count: int, *, one_by_one: bool = False) -> list[float]:
    """Produce ``count`` records to partition 0 with acks=all, each acknowledged; their ack latencies (s)
    when sent ``one_by_one`` (each waits for the last), else one batch's."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "log_level": 0})
    errors: list[Any] = []
    latencies: list[float] = []
    for i in range(count):
        sent = time.monotonic()
        producer.produce(
            topic, value=f"v{i}".encode(), partition=0, on_delivery=lambda err, msg: errors.append(err)
        )
        if one_by_one:
            assert producer.flush(30) == 0
            latencies.append(time.monotonic() - sent)
    assert producer.flush(30) == 0
    assert errors == [None] * count, [e for e in errors if e is not None][:3]
    return latencies


def read_values(bootstrap: str, topic: str) -> list[bytes]:
    """Every value in partition 0, from its start to its high watermark."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex[:8]}", "log_level": 0}
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        consumer.assign([TopicPartition(topic, 0, low)])
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while low + len(values) < high and time.monotonic() < deadline:
            record = consumer.poll(0.5)
            if record is not None and record.error() is None:
                values.append(record.value() or b"")
        return values
    finally:
        consumer.close()


def test_a_power_loss_of_every_replica_loses_what_was_never_fsynced(kafka_cluster: KafkaCluster) -> None:
    cluster = kafka_cluster
    default, flushed = f"power-{uuid.uuid4().hex[:6]}", f"flushed-{uuid.uuid4().hex[:6]}"
    cluster.create_topic(default, partitions=1, replication_factor=3, config={"min.insync.replicas": "2"})
    cluster.create_topic(
        flushed,
        partitions=1,
        replication_factor=3,
        config={"min.insync.replicas": "2", "flush.messages": "1"},
    )
    bootstrap = cluster.bootstrap_servers
    produce_acked(bootstrap, default, 500)
    produce_acked(bootstrap, flushed, 500)
    log = FaultLog()
    loss = PowerLoss(cluster, LeaderOf(default, 0), every_replica=True, log=log)
    started = time.monotonic()
    with loss:
        cut = loss.dropped_from(default, 0), loss.dropped_from(flushed, 0)
    healed_s = time.monotonic() - started
    cluster.wait_healthy(60)
    left = read_values(bootstrap, default), read_values(bootstrap, flushed)
    record = log.records()[0]
    assert record.effect is not None
    print(
        f"\nMEASURED power_loss of brokers {loss.brokers}: 500 acked records each; bytes written and never "
        f"fsynced cut from {default}-0 {cut[0]}, from {flushed}-0 (flush.messages=1) {cut[1]}; after the "
        f"restart {len(left[0])} and {len(left[1])} records left; healed {healed_s:.1f} s after the inject; "
        f"effect: {record.effect.evidence}"
    )
    assert loss.brokers == (1, 2, 3)
    assert record.effect.observed, record.effect.evidence
    assert cut[0] > 0
    assert cut[1] == 0
    assert len(left[0]) < 500  # acknowledged by every replica, lost by every replica
    assert sorted(left[1]) == sorted(f"v{i}".encode() for i in range(500))
    assert all(cluster.broker(b).status() == "running" for b in loss.brokers)


def test_a_slow_disk_slows_the_leaders_acknowledgements(kafka_cluster: KafkaCluster) -> None:
    cluster = kafka_cluster
    topic = f"slow-{uuid.uuid4().hex[:6]}"
    cluster.create_topic(topic, partitions=1, replication_factor=3)
    bootstrap = cluster.bootstrap_servers
    leader = resolve(cluster, LeaderOf(topic, 0))
    before = produce_acked(bootstrap, topic, 10, one_by_one=True)
    log = FaultLog()
    with SlowDisk(cluster, leader, write_bps=0, write_ms=300.0, fsync_ms=0.0, log=log):
        during = produce_acked(bootstrap, topic, 10, one_by_one=True)
    after = produce_acked(bootstrap, topic, 10, one_by_one=True)
    record = log.records()[0]
    assert record.effect is not None
    medians = [statistics.median(x) for x in (before, during, after)]
    print(
        f"\nMEASURED slow_disk write_ms=300 on leader {leader}: median ack latency "
        f"{medians[0] * 1000:.0f} ms before, {medians[1] * 1000:.0f} ms during, {medians[2] * 1000:.0f} ms "
        f"after; effect: {record.effect.evidence}"
    )
    assert record.effect.observed, record.effect.evidence
    assert medians[1] > medians[0] + 0.25
    assert medians[2] < medians[1] - 0.2


def test_an_unwritable_disk_makes_the_broker_log_the_storage_error(kafka_cluster: KafkaCluster) -> None:
    cluster = kafka_cluster
    topic = f"eio-{uuid.uuid4().hex[:6]}"
    cluster.create_topic(topic, partitions=1, replication_factor=3, config={"min.insync.replicas": "2"})
    bootstrap = cluster.bootstrap_servers
    produce_acked(bootstrap, topic, 1)  # its ISR full and its leader writing: the fault meets a write
    cluster.wait_healthy(60)
    leader = resolve(cluster, LeaderOf(topic, 0))
    log = FaultLog()
    error = DiskError(cluster, leader, error="unwritable", log=log)
    with error:
        produce_acked(bootstrap, topic, 50)  # acknowledged by the new leader once this one gave up
        logged = wait_for_storage_error(cluster, leader, error)
    record = log.records()[0]
    assert record.effect is not None
    print(
        f"\nMEASURED disk_error unwritable on leader {leader}: storage error logged {logged:.1f} s after the "
        f"records were acknowledged; restarted {error.restarted}; effect: {record.effect.evidence}"
    )
    assert record.effect.observed, record.effect.evidence
    assert error.restarted
    assert cluster.broker(leader).status() == "running"
    assert len(read_values(bootstrap, topic)) == 51
