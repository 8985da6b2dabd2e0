"""The faults not covered elsewhere, each with a measured effect and then its healing.

stop (clean SIGTERM), bandwidth, reset_peer, slicer, limit_data, a minority/majority partition, a fault
aimed at a group's coordinator by role, and a 5-broker cluster start. Numbers are printed (run with
``-s``) and summarised in docs/measurements.md.
"""

from __future__ import annotations

import contextlib
import math
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from chaos.cluster import introspect, wire
from chaos.cluster.cluster import KafkaCluster
from chaos.cluster.config import ClusterConfig
from chaos.cluster.engine import LABEL, docker_client, labelled_containers
from chaos.cluster.introspect import PartitionState
from chaos.errors import ClusterError
from chaos.faults.network import Partition
from chaos.faults.process import Stop
from chaos.faults.targets import CoordinatorOf, resolve
from chaos.faults.toxics import Bandwidth, LimitData, ResetPeer, Slicer

if TYPE_CHECKING:
    from chaos.cluster.images import ImageSet

pytestmark = pytest.mark.integration

GRACE_S = 15  # docker stop's SIGKILL deadline; a controlled shutdown here takes a few seconds
CLIENT_ID = b"chaos-more"


# ---------------------------------------------------------------- helpers


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str, interval_s: float = 0.1) -> float:
    """Seconds until ``condition()`` held; AssertionError after ``timeout_s``."""
    started = time.monotonic()
    deadline = started + timeout_s
    for _ in range(int(timeout_s / interval_s) + 2):
        if condition():
            return time.monotonic() - started
        if time.monotonic() > deadline:
            break
        time.sleep(interval_s)
    raise AssertionError(f"{what} did not happen within {timeout_s} s")


def api_versions_frame(correlation: int) -> bytes:
    """A length-prefixed ApiVersions v0 request (its answer lists every API the broker serves)."""
    request = struct.pack(">hhih", 18, 0, correlation, len(CLIENT_ID)) + CLIENT_ID
    return struct.pack(">i", len(request)) + request


def read_response(sock: socket.socket, deadline: float) -> tuple[str, bytes, int]:
    """Read one length-prefixed response: (outcome, bytes incl. the size prefix, recv calls with data).

    outcome: "answered" (complete), "closed" (EOF first), "reset" (RST first) or "silent" (deadline).
    """
    chunks: list[bytes] = []
    data = b""
    expected: int | None = None
    for _ in range(100_000):
        if expected is not None and len(data) >= expected:
            return "answered", data, len(chunks)
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            return "silent", data, len(chunks)
        except ConnectionResetError:
            return "reset", data, len(chunks)
        if not chunk:
            return "closed", data, len(chunks)
        chunks.append(chunk)
        data = b"".join(chunks)
        if expected is None and len(data) >= 4:
            expected = 4 + struct.unpack(">i", data[:4])[0]
    raise AssertionError("read_response: too many recv calls")


def exchange(port: int, wait_s: float = 5.0, host: str = "127.0.0.1") -> tuple[str, bytes, int, float]:
    """One ApiVersions request on a new connection: (outcome, response bytes, recv calls, seconds)."""
    started = time.monotonic()
    with socket.create_connection((host, port), timeout=wait_s) as sock:
        sock.sendall(api_versions_frame(1))
        outcome, data, recvs = read_response(sock, started + wait_s)
    return outcome, data, recvs, time.monotonic() - started


def parse_api_versions(data: bytes) -> list[tuple[int, int, int]]:
    """(api key, min version, max version) of an ApiVersions v0 answer (size prefix included)."""
    (error,) = struct.unpack_from(">h", data, 8)
    assert error == 0, f"ApiVersions error code {error}"
    (count,) = struct.unpack_from(">i", data, 10)
    return [struct.unpack_from(">hhh", data, 14 + 6 * i) for i in range(count)]


def produce(bootstrap: str, topic: str, count: int, partitions: int = 1, size: int = 100) -> float:
    """Produce ``count`` acks=all records of ``size`` bytes round-robin over partitions; seconds taken."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 15000,
            "socket.connection.setup.timeout.ms": 3000,
            "log_level": 0,
        }
    )
    errors: list[str] = []
    delivered: list[tuple[int, int]] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            delivered.append((msg.partition(), msg.offset()))

    tag = uuid.uuid4().hex[:8]
    started = time.monotonic()
    for i in range(count):
        value = f"{tag}-{i}-".encode().ljust(size, b"x")
        producer.produce(topic, value=value, partition=i % partitions, on_delivery=on_delivery)
        producer.poll(0)
    remaining = producer.flush(20)
    seconds = time.monotonic() - started
    assert remaining == 0, f"{remaining} records still in flight after 20 s"
    assert errors == []
    assert len(delivered) == count
    return seconds


def timed_fetch(bootstrap: str, topic: str, count: int, timeout_s: float = 20.0) -> tuple[float, int]:
    """A fresh consumer reads partition 0 from the beginning: (seconds to the last record, value bytes)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"more-fetch-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "socket.connection.setup.timeout.ms": 3000,
            "log_level": 0,
        }
    )
    started = time.monotonic()
    got = 0
    size = 0
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = started + timeout_s
        for _ in range(1000):
            if got >= count or time.monotonic() > deadline:
                break
            for msg in consumer.consume(num_messages=count - got, timeout=0.2):
                assert msg.error() is None, msg.error()
                got += 1
                size += len(msg.value() or b"")
        seconds = time.monotonic() - started
    finally:
        consumer.close()
    assert got == count, f"fetched {got} of {count} records within {timeout_s} s"
    return seconds, size


def docker_time(text: str) -> float:
    """Epoch seconds of a Docker RFC 3339 time with nanoseconds (``2026-11-25T23:30:01.123456789Z``)."""
    main, _, fraction = text.rstrip("Z").partition(".")
    whole = datetime.strptime(main, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC).timestamp()
    return whole + (float(f"0.{fraction}") if fraction else 0.0)


def reported_coordinator(bootstrap: str, group: str, timeout_s: float = 15.0) -> int:
    """The group's coordinator as librdkafka's admin client reports it (its own FindCoordinator)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(
        {"bootstrap.servers": bootstrap, "socket.connection.setup.timeout.ms": 3000, "log_level": 0}
    )
    description = admin.describe_consumer_groups([group], request_timeout=timeout_s)[group].result(
        timeout=timeout_s + 5
    )
    return int(description.coordinator.id)


# ---------------------------------------------------------------- a 5-broker cluster (its own, first)


@pytest.mark.own_cluster
def test_five_broker_cluster_starts(
    chaos_images: ImageSet, chaos_cluster_config: ClusterConfig, run_dir: Path
) -> None:
    """Runs before the session cluster exists (``own_cluster``), so the two do not share the CPUs."""
    config = ClusterConfig(brokers=5, profile=chaos_cluster_config.profile)
    cluster = KafkaCluster(chaos_images, config, run_dir=run_dir / "cluster")
    try:
        cluster.start()
        assert cluster.start_duration_s is not None
        print(f"MEASURED 5-broker cluster ready in {cluster.start_duration_s:.1f} s")
        assert cluster.start_duration_s < 90
        assert introspect.registered_brokers(cluster) == {1, 2, 3, 4, 5}
        assert cluster.controller_id() in {1, 2, 3, 4, 5}
        proxies = {("127.0.0.1", b.ext_port) for b in cluster.brokers}
        for broker in cluster.brokers:
            advertised = {(h, p) for _, h, p in introspect.advertised_addresses(cluster, broker.node_id)}
            assert advertised == proxies
        cluster.create_topic("five", partitions=5, replication_factor=3, config={"min.insync.replicas": "2"})
        states = cluster.describe_partitions(["five"])
        assert len(states) == 5
        assert all(len(s.isr) == 3 for s in states)
        assert {s.leader for s in states} <= {1, 2, 3, 4, 5}
    finally:
        cluster.close()
    selector = {"label": f"{LABEL}={cluster.run_id}"}
    assert labelled_containers(f"{LABEL}={cluster.run_id}") == []
    assert docker_client().networks.list(filters=selector) == []


# ---------------------------------------------------------------- stop (SIGTERM)


def test_stop_hands_leadership_over_before_exit_and_restart_rejoins(kafka_cluster: KafkaCluster) -> None:
    topic = "more-stop"
    kafka_cluster.create_topic(topic, partitions=3, replication_factor=3, config={"min.insync.replicas": "2"})
    controller = kafka_cluster.controller_id()
    states = kafka_cluster.describe_partitions([topic])
    # a partition leader that is not the active controller (stopping the controller adds an election)
    led = sorted({s.leader for s in states if s.leader is not None} - {controller})
    assert led, f"every partition of {topic} is led by the controller {controller}: {states}"
    target = led[0]
    led_before = [s.partition for s in states if s.leader == target]
    container = kafka_cluster.broker(target).docker

    samples: list[tuple[float, tuple[PartitionState, ...]]] = []

    def sample() -> None:
        with contextlib.suppress(OSError, ClusterError):
            samples.append((time.time(), tuple(kafka_cluster.describe_partitions([topic], via=controller))))

    fault = Stop(kafka_cluster, target, grace_s=GRACE_S)
    errors: list[BaseException] = []

    def stop() -> None:
        try:
            fault.inject()
        except BaseException as exc:
            errors.append(exc)

    stopper = threading.Thread(target=stop, name="stop-broker", daemon=True)
    since = time.time()
    stopper.start()
    try:
        deadline = time.monotonic() + GRACE_S + 10
        for _ in range(5000):
            if not stopper.is_alive() or time.monotonic() > deadline:
                break
            sample()
            time.sleep(0.02)
        stopper.join(timeout=max(deadline - time.monotonic(), 0.1))
        assert not stopper.is_alive(), f"docker stop of broker {target} did not return"
        assert errors == []
        returned = time.time()
        for _ in range(5):
            sample()
            time.sleep(0.05)
        container.reload()
        exit_code = int(container.attrs["State"]["ExitCode"])
        exited = docker_time(container.attrs["State"]["FinishedAt"])
        logs = container.logs(since=since).decode(errors="replace")
        controller_logs = kafka_cluster.broker(controller).docker.logs(since=since).decode(errors="replace")

        print(f"MEASURED stop: broker {target} exited {exited - since:.2f} s after SIGTERM, code {exit_code}")
        assert exit_code != 137, "SIGKILLed after the grace period: no clean shutdown"
        assert returned - since < GRACE_S
        # the broker asks for a controlled shutdown, the controller moves its leaderships and grants it
        assert "Terminating process due to signal SIGTERM" in logs
        assert "Beginning controlled shutdown." in logs
        assert "The controller has asked us to exit controlled shutdown." in logs
        assert (
            f"Unfenced broker {target} has requested and been granted a controlled shutdown"
            in controller_logs
        )
        assert f"enterControlledShutdown[{target}]" in controller_logs
        assert f"The request from broker {target} to shut down has been granted" in controller_logs

        assert samples, "no metadata sample while the broker stopped"
        assert all(not s.offline for _, states_ in samples for s in states_), "a partition went offline"
        moved = [t for t, states_ in samples if all(s.leader != target for s in states_)]
        assert moved, f"leadership never left broker {target}"
        moved_at = moved[0]
        after_move = [states_ for t, states_ in samples if t >= moved_at]
        assert all(s.leader != target for states_ in after_move for s in states_)
        print(
            f"MEASURED stop: leadership of {topic} partitions {led_before} left broker {target} "
            f"{moved_at - since:.2f} s after SIGTERM, {exited - moved_at:.2f} s before the process exited; "
            f"{len(samples)} samples, none offline"
        )
        assert moved_at < exited
        final = samples[-1][1]
        print(f"MEASURED stop: after exit leaders {[s.leader for s in final]}, isr {[s.isr for s in final]}")
        assert all(target not in s.isr for s in final)
    finally:
        stopper.join(timeout=GRACE_S + 10)
        fault.heal()
    restarted = time.monotonic()
    rejoin_s = wait_for(
        lambda: all(target in s.isr for s in kafka_cluster.describe_partitions([topic], via=controller)),
        30,
        f"broker {target} back in every ISR",
    )
    print(
        f"MEASURED stop: restart took {fault.restart_s:.1f} s; back in every ISR {rejoin_s:.1f} s later "
        f"({time.monotonic() - restarted:.1f} s after heal returned)"
    )


# ---------------------------------------------------------------- bandwidth


def test_bandwidth_limits_a_fetch_to_the_rate_and_heal_restores_speed(kafka_cluster: KafkaCluster) -> None:
    topic = "more-bandwidth"
    count, record_size, rate_kb_s = 100, 3000, 100  # 300 kB at 100 kB/s: >= 3.0 s
    kafka_cluster.create_topic(topic, partitions=1, replication_factor=3)
    produce(kafka_cluster.bootstrap_servers, topic, count, size=record_size)
    leader_id = kafka_cluster.partition(topic, 0).leader
    assert leader_id is not None, f"{topic}-0 has no leader"
    leader = kafka_cluster.broker(leader_id)

    baseline_s, size = timed_fetch(leader.bootstrap, topic, count)
    assert size == count * record_size
    # Toxiproxy's rate is in bytes per millisecond: "KB" here means 1000 bytes.
    floor_s = size / (rate_kb_s * 1000)
    with Bandwidth(kafka_cluster, leader.node_id, rate_kb_s=rate_kb_s):
        limited_s, _ = timed_fetch(leader.bootstrap, topic, count)
    healed_s, _ = timed_fetch(leader.bootstrap, topic, count)
    print(
        f"MEASURED bandwidth {rate_kb_s} kB/s on broker {leader.node_id}: fetch of {size} B took "
        f"{baseline_s:.2f} s before, {limited_s:.2f} s limited (floor {floor_s:.2f} s), "
        f"{healed_s:.2f} s healed"
    )
    assert limited_s >= floor_s
    assert healed_s < floor_s / 2
    assert kafka_cluster.toxiproxy.toxics(leader.proxy("ext")) == []


# ---------------------------------------------------------------- reset_peer


def toxiproxy_ip(cluster: KafkaCluster) -> str:
    """The Toxiproxy container's address on the cluster network (reachable from the host's bridge)."""
    container = docker_client().containers.get(f"chaos-{cluster.run_id}-toxiproxy")
    return str(container.attrs["NetworkSettings"]["Networks"][f"chaos-{cluster.run_id}"]["IPAddress"])


def test_reset_peer_resets_a_new_connection_within_its_timeout_and_heal(kafka_cluster: KafkaCluster) -> None:
    broker = kafka_cluster.brokers[0]
    direct = toxiproxy_ip(kafka_cluster)
    outcome, data, _, baseline_s = exchange(broker.ext_port)
    assert outcome == "answered"
    assert exchange(broker.ext_port, host=direct)[0] == "answered"
    for timeout_ms in (0, 500):
        window = (timeout_ms / 1000 - 0.01, timeout_ms / 1000 + 0.3)
        with ResetPeer(kafka_cluster, broker.node_id, timeout_ms=timeout_ms):
            # Straight to the proxy (as a peer on the cluster network sees it): a TCP reset.
            outcome, data, _, seconds = exchange(broker.ext_port, host=direct)
            print(
                f"MEASURED reset_peer {timeout_ms} ms, proxy direct: {outcome} after {seconds * 1000:.0f} ms"
            )
            assert outcome == "reset"
            assert data == b""
            assert window[0] <= seconds <= window[1]
            # Through the published 127.0.0.1 port, Docker's userland proxy relays the reset as a plain
            # close: host clients see EOF with no answer byte, not ECONNRESET (docs/faults.md).
            outcome, data, _, seconds = exchange(broker.ext_port)
            print(f"MEASURED reset_peer {timeout_ms} ms, host port: {outcome} after {seconds * 1000:.0f} ms")
            assert outcome in ("closed", "reset")
            assert data == b""
            assert window[0] <= seconds <= window[1]
            with pytest.raises(ConnectionError):  # a Kafka request through the proxy fails the same way
                wire.metadata("127.0.0.1", broker.ext_port, [], timeout_s=5)
        for host in ("127.0.0.1", direct):
            outcome, data, _, healed_s = exchange(broker.ext_port, host=host)
            assert outcome == "answered"
            assert parse_api_versions(data)
    print(
        f"MEASURED reset_peer: ApiVersions {baseline_s * 1000:.0f} ms before, {healed_s * 1000:.0f} ms healed"
    )


# ---------------------------------------------------------------- slicer and limit_data


def test_slicer_slices_responses_that_still_arrive_complete(kafka_cluster: KafkaCluster) -> None:
    broker = kafka_cluster.brokers[1]
    average, variation, delay_us = 32, 8, 20_000
    outcome, baseline, baseline_recvs, baseline_s = exchange(broker.ext_port)
    assert outcome == "answered"
    apis = parse_api_versions(baseline)
    meta = wire.metadata("127.0.0.1", broker.ext_port, None, timeout_s=5)
    with Slicer(kafka_cluster, broker.node_id, average, variation, delay_us):
        outcome, sliced, recvs, sliced_s = exchange(broker.ext_port, wait_s=10)
        sliced_meta = wire.metadata("127.0.0.1", broker.ext_port, None, timeout_s=10)
    healed_outcome, healed, healed_recvs, healed_s = exchange(broker.ext_port)
    # every slice is at most average + variation bytes, and each is followed by `delay`
    min_slices = math.ceil(len(baseline) / (average + variation))
    print(
        f"MEASURED slicer {average}±{variation} B / {delay_us // 1000} ms: ApiVersions answer of "
        f"{len(baseline)} B in {baseline_recvs} recv(s) {baseline_s * 1000:.0f} ms before, {recvs} recvs "
        f"{sliced_s * 1000:.0f} ms sliced (>= {min_slices} slices), {healed_recvs} recv(s) "
        f"{healed_s * 1000:.0f} ms healed"
    )
    assert outcome == "answered"
    assert parse_api_versions(sliced) == apis
    assert recvs >= 3
    assert sliced_s >= (min_slices - 1) * delay_us / 1e6
    assert sliced_meta.brokers == meta.brokers
    assert [(p.topic, p.partition, p.replicas) for p in sliced_meta.partitions] == [
        (p.topic, p.partition, p.replicas) for p in meta.partitions
    ]
    assert healed_outcome == "answered"
    assert parse_api_versions(healed) == apis
    assert healed_s < sliced_s / 2


def test_limit_data_closes_the_connection_after_n_bytes_and_heal(kafka_cluster: KafkaCluster) -> None:
    broker = kafka_cluster.brokers[2]
    limit = 1000
    outcome, baseline, _, _ = exchange(broker.ext_port)
    assert outcome == "answered"
    answer_size = len(baseline)
    assert answer_size < limit < 4 * answer_size

    def until_closed(requests: int) -> tuple[int, int, str, float]:
        """ApiVersions requests on one connection: (complete answers, bytes, last outcome, seconds)."""
        started = time.monotonic()
        complete = total = 0
        outcome = "answered"
        with socket.create_connection(("127.0.0.1", broker.ext_port), timeout=5) as sock:
            for i in range(requests):
                sock.sendall(api_versions_frame(i + 1))
                outcome, data, _ = read_response(sock, time.monotonic() + 5)
                total += len(data)
                if outcome != "answered":
                    break
                complete += 1
        return complete, total, outcome, time.monotonic() - started

    with LimitData(kafka_cluster, broker.node_id, bytes_=limit):
        complete, total, outcome, seconds = until_closed(4)
        print(
            f"MEASURED limit_data {limit} B: {complete} complete answers of {answer_size} B, "
            f"{total} B in all, then {outcome} ({seconds * 1000:.0f} ms)"
        )
        assert total == limit
        assert complete == limit // answer_size
        assert outcome in ("closed", "reset")
    small = 100
    # each new connection gets `small` bytes: the 4-byte size, then 96 bytes of a longer answer
    short = f"closed after {small - 4} of {answer_size - 4} bytes"
    with LimitData(kafka_cluster, broker.node_id, bytes_=small), pytest.raises(ConnectionError, match=short):
        wire.api_versions("127.0.0.1", broker.ext_port, timeout_s=5)
    complete, total, outcome, seconds = until_closed(4)
    print(f"MEASURED limit_data healed: {complete} answers, {total} B ({seconds * 1000:.0f} ms)")
    assert (complete, total, outcome) == (4, 4 * answer_size, "answered")


# ---------------------------------------------------------------- partition by shape


def test_minority_leaves_the_isrs_majority_serves_acks_all_and_heal(kafka_cluster: KafkaCluster) -> None:
    topic = "more-partition"
    kafka_cluster.create_topic(topic, partitions=3, replication_factor=3, config={"min.insync.replicas": "2"})
    controller = kafka_cluster.controller_id()
    # the minority is not the active controller: cutting it would add a quorum election (see faults.md)
    minority = max(b.node_id for b in kafka_cluster.brokers if b.node_id != controller)
    majority = tuple(sorted(b.node_id for b in kafka_cluster.brokers if b.node_id != minority))
    lag_s = kafka_cluster.config.detection_timeout_s("replica.lag.time.max.ms", 30000)
    session_s = kafka_cluster.config.detection_timeout_s("broker.session.timeout.ms", 9000)
    majority_bootstrap = ",".join(kafka_cluster.broker_bootstrap(b) for b in majority)

    def majority_view() -> list[PartitionState]:
        return kafka_cluster.describe_partitions([topic], via=controller)

    fault = Partition(kafka_cluster, [[minority], list(majority)])
    with fault:
        assert fault.resolved == [(minority,), majority]
        shrink_s = wait_for(
            lambda: all(minority not in s.isr and s.leader in majority for s in majority_view()),
            max(lag_s, session_s) + 10,
            f"broker {minority} out of every ISR",
        )
        states = majority_view()
        produce_s = produce(majority_bootstrap, topic, 60, partitions=3)
        print(
            f"MEASURED partition {minority} | {','.join(map(str, majority))}: minority out of every ISR "
            f"{shrink_s:.1f} s after the cut (lag {lag_s:.0f} s, session {session_s:.0f} s); isr "
            f"{[list(s.isr) for s in states]}; 60 acks=all records in {produce_s:.2f} s"
        )
        assert all(len(s.isr) == 2 for s in states)
        # the minority still answers clients (with its own stale view): only peer paths are cut
        assert wire.api_versions("127.0.0.1", kafka_cluster.broker(minority).ext_port, timeout_s=2)
    rejoin_s = wait_for(
        lambda: all(len(s.isr) == 3 for s in majority_view()), 30, f"broker {minority} back in every ISR"
    )
    print(f"MEASURED partition healed: every ISR back to 3 after {rejoin_s:.1f} s")


# ---------------------------------------------------------------- role targeting


def test_coordinator_of_targets_the_reported_coordinator_and_the_group_moves(
    kafka_cluster: KafkaCluster,
) -> None:
    from confluent_kafka import Consumer, KafkaException

    topic = "more-coordinator"
    kafka_cluster.create_topic(topic, partitions=1, replication_factor=3, config={"min.insync.replicas": "2"})
    controller = kafka_cluster.controller_id()
    # a group whose coordinator is not the active controller (stopping that adds an election)
    prefix = f"more-coord-{uuid.uuid4().hex[:6]}"
    candidates = [f"{prefix}-{i}" for i in range(20)]
    group = next((g for g in candidates if kafka_cluster.group_coordinator(g) != controller), None)
    assert group is not None, f"every candidate group is coordinated by the controller {controller}"
    produce(kafka_cluster.bootstrap_servers, topic, 10)

    consumer = Consumer(
        {
            "bootstrap.servers": kafka_cluster.bootstrap_servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 1000,
            "socket.connection.setup.timeout.ms": 3000,
            "log_level": 0,
        }
    )

    def consume_and_commit(count: int, timeout_s: float) -> float:
        """Read ``count`` records and commit them synchronously, retrying the commit; seconds taken."""
        started = time.monotonic()
        deadline = started + timeout_s
        got = 0
        for _ in range(1000):
            if got >= count or time.monotonic() > deadline:
                break
            for msg in consumer.consume(num_messages=count - got, timeout=0.2):
                assert msg.error() is None, msg.error()
                got += 1
        assert got == count, f"consumed {got} of {count} within {timeout_s} s"
        last = ""
        for _ in range(100):
            if time.monotonic() > deadline:
                break
            try:
                consumer.commit(asynchronous=False)
                return time.monotonic() - started
            except KafkaException as exc:
                last = str(exc)
                consumer.poll(0.2)
        raise AssertionError(f"commit did not succeed within {timeout_s} s: {last}")

    try:
        consumer.subscribe([topic])
        join_s = consume_and_commit(10, 20)
        reported = reported_coordinator(kafka_cluster.bootstrap_servers, group)
        resolved = resolve(kafka_cluster, CoordinatorOf(group))
        print(
            f"MEASURED coordinator of {group}: resolved {resolved}, admin reports {reported} "
            f"(joined and committed in {join_s:.1f} s)"
        )
        assert resolved == reported

        fault = Stop(kafka_cluster, CoordinatorOf(group), grace_s=GRACE_S)
        entered = time.monotonic()
        with fault:
            stop_s = time.monotonic() - entered
            assert fault.brokers == (reported,)
            survivors = [b.node_id for b in kafka_cluster.brokers if b.node_id != reported]
            survivors_bootstrap = ",".join(kafka_cluster.broker_bootstrap(b) for b in survivors)
            move_s = wait_for(
                lambda: kafka_cluster.group_coordinator(group) in survivors, 15, "a new coordinator"
            )
            moved_to = kafka_cluster.group_coordinator(group)
            produce(survivors_bootstrap, topic, 10)
            refind_s = consume_and_commit(10, 15)
            during = reported_coordinator(survivors_bootstrap, group)
            print(
                f"MEASURED coordinator stop: broker {reported} stopped in {stop_s:.1f} s; "
                f"coordinator moved to {moved_to} {move_s:.2f} s after exit; the member consumed and "
                f"committed again {refind_s:.2f} s later; admin reports {during}"
            )
            assert moved_to != reported
            assert during == moved_to
        produce(kafka_cluster.bootstrap_servers, topic, 10)
        healed_s = consume_and_commit(10, 15)
        assert fault.restart_s is not None
        # the restarted broker may take its offsets partition back (preferred leader) between two reads —
        # seen in CI: reported 3, resolved 2 a moment later — so both are read again until they agree
        seen: list[tuple[int, int]] = []

        def agree() -> bool:
            seen.append(
                (
                    reported_coordinator(kafka_cluster.bootstrap_servers, group),
                    resolve(kafka_cluster, CoordinatorOf(group)),
                )
            )
            return seen[-1][0] == seen[-1][1]

        wait_for(agree, 20, f"the resolved coordinator agreeing with the reported one (seen {seen})", 0.5)
        print(
            f"MEASURED coordinator heal: broker {reported} restarted in {fault.restart_s:.1f} s; coordinator "
            f"{seen[-1][0]} (resolved {seen[-1][1]}, {len(seen)} reads); commit {healed_s:.2f} s"
        )
    finally:
        consumer.close()


def test_a_toxic_whose_removal_hangs_is_healed_by_restarting_toxiproxy(
    kafka_cluster: KafkaCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Toxiproxy#558 (a wedged link never lets a toxic's removal return) cannot be provoked on
    demand; the removal's failure is simulated, the recovery (restart + proxies recreated) is real."""
    from chaos.errors import ToxiproxyError
    from chaos.faults.toxics import Latency

    broker = kafka_cluster.brokers[0]
    fault = Latency(kafka_cluster, broker.node_id, 200, paths=("ext",), direction="downstream")
    fault.inject()
    assert [t["name"] for t in kafka_cluster.toxiproxy.toxics(broker.proxy("ext"))] == [
        "chaos-latency-downstream"
    ]

    def wedged(proxy: str, name: str, missing_ok: bool = True) -> None:
        raise ToxiproxyError(f"Toxiproxy did not answer DELETE /proxies/{proxy}/toxics/{name} within 5.0 s")

    monkeypatch.setattr(kafka_cluster.toxiproxy, "remove_toxic", wedged)
    started = time.monotonic()
    fault.heal()
    took = time.monotonic() - started
    monkeypatch.undo()
    print(f"\nToxiproxy restarted and {3 * len(kafka_cluster.brokers)} proxies recreated in {took:.1f} s")
    proxies = kafka_cluster.toxiproxy.proxies()
    assert {b.proxy(p) for b in kafka_cluster.brokers for p in ("ext", "int", "ctl")} <= set(proxies)
    assert all(kafka_cluster.toxiproxy.toxics(name) == [] for name in proxies)
    assert fault.active is False
    kafka_cluster.wait_healthy(60)
    rtt = wire.api_versions("127.0.0.1", broker.ext_port, timeout_s=5.0)
    assert rtt.request_s < 0.2, rtt  # the 200 ms latency is gone
