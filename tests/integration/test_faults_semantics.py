"""The seed's distinction at the TCP level: crash is refused fast, network cut and pause are silent.

Measured through the broker's client proxy with one raw ApiVersions request on a new connection.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable

import pytest

from chaos.cluster import wire
from chaos.cluster.cluster import KafkaCluster
from chaos.faults.base import Fault
from chaos.faults.network import NetworkCut
from chaos.faults.process import Crash, Pause
from chaos.faults.toxics import Latency

pytestmark = pytest.mark.integration

SILENCE_S = 3.0


def probe(port: int, wait_s: float = SILENCE_S) -> tuple[str, float]:
    """Open a connection, send ApiVersions; ("answered"|"closed"|"silent"|"refused", seconds)."""
    started = time.monotonic()
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=wait_s)
    except ConnectionRefusedError:
        return "refused", time.monotonic() - started
    except TimeoutError:
        return "silent", time.monotonic() - started
    try:
        request = struct.pack(">hhih", 18, 0, 7, 5) + b"probe"
        sock.sendall(struct.pack(">i", len(request)) + request)
        try:
            data = sock.recv(4)
        except TimeoutError:
            return "silent", time.monotonic() - started
        except ConnectionResetError:
            return "closed", time.monotonic() - started
        return ("answered" if data else "closed"), time.monotonic() - started
    finally:
        sock.close()


def fresh_client_metadata_s(bootstrap: str) -> float:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(
        {"bootstrap.servers": bootstrap, "socket.connection.setup.timeout.ms": 5000, "log_level": 0}
    )
    started = time.monotonic()
    admin.list_topics(timeout=10)
    return time.monotonic() - started


FAULTS: dict[str, Callable[[KafkaCluster, int], Fault]] = {
    "crash": lambda c, b: Crash(c, b),
    "network_cut": lambda c, b: NetworkCut(c, b),
    "pause": lambda c, b: Pause(c, b),
}


@pytest.mark.parametrize("kind", ["crash", "network_cut", "pause"])
def test_crash_refuses_fast_cut_and_pause_are_silent(kafka_cluster: KafkaCluster, kind: str) -> None:
    broker = kafka_cluster.brokers[-1]
    assert probe(broker.ext_port)[0] == "answered"
    fault = FAULTS[kind](kafka_cluster, broker.node_id)
    with fault:
        outcome, seconds = probe(broker.ext_port)
        print(f"{kind}: new connection through the proxy -> {outcome} after {seconds * 1000:.0f} ms")
        if kind == "crash":
            assert outcome in ("closed", "refused")
            assert seconds < 0.1
        else:
            assert outcome == "silent"
            assert seconds >= SILENCE_S - 0.05
        # Client level: librdkafka connects to every bootstrap address at once and asks whichever is up
        # first, so b listed first does not hold a *new* client up in any of the three (docs/faults.md).
        client_s = fresh_client_metadata_s(f"{broker.bootstrap},{kafka_cluster.brokers[0].bootstrap}")
        print(f"{kind}: fresh client (b first, healthy second) got metadata in {client_s * 1000:.0f} ms")
        assert client_s < 2.0
    assert not fault.active
    record = fault.record
    assert record is not None
    assert record.healed_at is not None
    assert record.healed_at > record.injected_at
    outcome, seconds = probe(broker.ext_port, wait_s=10)
    assert outcome == "answered", f"after healing {kind}: {outcome} in {seconds:.2f} s"
    fault.heal()  # idempotent


def test_latency_adds_500_ms_to_a_metadata_request_and_heal_removes_it(kafka_cluster: KafkaCluster) -> None:
    broker = kafka_cluster.brokers[0]

    def timed_metadata() -> float:
        started = time.monotonic()
        wire.metadata("127.0.0.1", broker.ext_port, [], timeout_s=5)
        return time.monotonic() - started

    baseline = min(timed_metadata() for _ in range(3))
    with Latency(kafka_cluster, broker.node_id, ms=500):
        slowed = min(timed_metadata() for _ in range(3))
    healed = min(timed_metadata() for _ in range(3))
    print(
        f"metadata request: {baseline * 1000:.0f} ms, with latency {slowed * 1000:.0f} ms, "
        f"healed {healed * 1000:.0f} ms"
    )
    # Toxiproxy delays a chunk until `latency` after it *entered* the proxy, so the broker's own
    # processing time overlaps the delay: the request takes >= 500 ms, i.e. about 500 ms more than
    # before minus the few ms of processing (measured: 7 ms -> 505 ms). See docs/faults.md.
    assert slowed >= 0.5
    assert slowed - baseline >= 0.5 - 0.02
    assert healed < baseline + 0.2
    assert kafka_cluster.toxiproxy.toxics(broker.proxy("ext")) == []


def test_a_fresh_restart_replaces_a_running_broker_process(kafka_cluster: KafkaCluster) -> None:
    """What a retried crash heal does to a broker an earlier start left running but stuck: the container
    is killed and started again, and the new process logs started and answers through its proxy."""
    broker = kafka_cluster.brokers[-1]
    broker.docker.reload()
    assert broker.docker.status == "running"
    before = broker.docker.attrs["State"]["StartedAt"]
    seconds = kafka_cluster.restart_broker(broker.node_id, fresh=True)
    broker.docker.reload()
    assert broker.docker.attrs["State"]["StartedAt"] != before  # a new process, not the old one waited on
    print(f"fresh restart of broker {broker.node_id}: started in {seconds:.1f} s")
    outcome, waited = probe(broker.ext_port, wait_s=10)
    assert outcome == "answered", f"after a fresh restart: {outcome} in {waited:.2f} s"
    kafka_cluster.wait_healthy(60)  # the next test gets a whole cluster
