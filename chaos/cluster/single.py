"""A one-broker KRaft cluster, for smoke tests of the images and the clients."""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from chaos.cluster.containers import labelled, log_tail, publish_on_loopback, wait_for_log
from chaos.cluster.ports import start_on_free_ports
from chaos.cluster.reaper import Reaper
from chaos.cluster.sweep import sweep
from chaos.errors import ClusterStartTimeout

if TYPE_CHECKING:
    from testcontainers.core.container import DockerContainer

    from chaos.cluster.images.catalog import ImageSet

READY_LOG = r"Kafka Server started"


@dataclass(frozen=True)
class SingleBroker:
    """A running single broker: where clients connect, and the container's name."""

    bootstrap_servers: str
    container_name: str
    started_in_s: float


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (22 characters).

    It never starts with "-": the storage tool (``format --cluster-id <id>``, in both images) would
    read such an id as an option and fail, one cluster start in 64. Kafka's own ``Uuid.randomUuid()``
    redraws those ids for the same reason; clearing the first bit does it without a loop (the first
    character is then one of A-Z, a-f).
    """
    raw = bytearray(uuid.uuid4().bytes)
    raw[0] &= 0x7F
    return base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()


@contextmanager
def single_broker(
    images: ImageSet, run_id: str | None = None, start_timeout_s: float = 90
) -> Iterator[SingleBroker]:
    """Start one combined broker/controller on a fixed 127.0.0.1 port; always removed on exit, and by
    its reaper if this process dies (the run is live for ``chaos clean`` while the reaper runs). A chosen
    port taken before Docker binds it means a fresh start on fresh ports (:func:`start_on_free_ports`)."""
    run = run_id or f"smoke-{uuid.uuid4().hex[:8]}"
    name = f"chaos-{run}-kafka-1"
    started = time.monotonic()
    attempt: list[tuple[Reaper, DockerContainer]] = []  # the current start's reaper and broker

    def start(ports: list[int]) -> int:
        port, reaper_port = ports
        reaper = Reaper(images.reaper, run, reaper_port)
        container = _broker_container(images, run, name, port)
        attempt.append((reaper, container))
        reaper.start()
        try:
            container.start()
        except Exception as exc:
            raise ClusterStartTimeout(f"{name} failed to start: {exc}\n{log_tail(container)}") from exc
        return port

    def undo() -> None:
        reaper, _ = attempt.pop()
        reaper.close()
        sweep(run)  # by label: a container whose start failed is created, and holds its name

    try:
        port = start_on_free_ports(2, start, undo, what=f"single broker {run}")
        wait_for_log(attempt[-1][1], READY_LOG, start_timeout_s)
        yield SingleBroker(f"127.0.0.1:{port}", name, time.monotonic() - started)
    finally:
        for reaper, container in attempt:
            try:
                if container.get_wrapped_container() is not None:
                    container.stop()
            finally:
                reaper.close()


def _broker_container(images: ImageSet, run: str, name: str, port: int) -> DockerContainer:
    container = labelled(images.kafka, run, name).with_envs(
        CLUSTER_ID=new_cluster_id(),
        KAFKA_NODE_ID="1",
        KAFKA_PROCESS_ROLES="broker,controller",
        KAFKA_LISTENERS="PLAINTEXT://0.0.0.0:9092,CONTROLLER://0.0.0.0:9093",
        KAFKA_ADVERTISED_LISTENERS=f"PLAINTEXT://127.0.0.1:{port}",
        KAFKA_LISTENER_SECURITY_PROTOCOL_MAP="PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        KAFKA_CONTROLLER_LISTENER_NAMES="CONTROLLER",
        KAFKA_INTER_BROKER_LISTENER_NAME="PLAINTEXT",
        KAFKA_CONTROLLER_QUORUM_VOTERS="1@localhost:9093",
        KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR="1",
        KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR="1",
        KAFKA_TRANSACTION_STATE_LOG_MIN_ISR="1",
        KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS="0",
        KAFKA_HEAP_OPTS="-Xmx512m -Xms512m",
    )
    return publish_on_loopback(container, 9092, port)
