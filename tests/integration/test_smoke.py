"""End-to-end smoke: one real broker of each supported Kafka version
(``chaos.versions.SUPPORTED_KAFKA_VERSIONS``) from the selected image source, confluent-kafka both ways,
Spark's Kafka source."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from chaos import versions
from chaos.cluster.config import ClusterConfig
from chaos.cluster.images import ImageSet, Role, ensure_images
from chaos.cluster.single import SingleBroker, single_broker

pytestmark = [pytest.mark.integration, pytest.mark.smoke]

TOPIC = "smoke"
COUNT = 1000
PARTITIONS = 3


@pytest.fixture(scope="module", params=versions.SUPPORTED_KAFKA_VERSIONS)
def broker(
    request: pytest.FixtureRequest, chaos_images: ImageSet, chaos_cluster_config: ClusterConfig
) -> Iterator[SingleBroker]:
    """A broker of each supported version: the session's images for the session's version, the others
    made present from the same source (pulled, or built locally and cached per version)."""
    version: str = request.param
    images = chaos_images
    if version != chaos_cluster_config.kafka_version:
        images = ensure_images(chaos_images.source(Role.KAFKA), kafka_version=version)
    with single_broker(images) as running:
        yield running


def test_the_broker_runs_the_version_its_image_names(broker: SingleBroker) -> None:
    """The broker's own startup line names the release its image is tagged with (the local build's jars,
    or the official image)."""
    from chaos.cluster.engine import docker_client

    container = docker_client().containers.get(broker.container_name)
    version = container.image.tags[0].rpartition(":")[2]
    assert version in versions.SUPPORTED_KAFKA_VERSIONS
    assert f"Kafka version: {version}" in container.logs().decode("utf-8", "replace")


@pytest.fixture(scope="module")
def produced_ids(broker: SingleBroker) -> list[str]:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    futures = admin.create_topics(
        [NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)],
        operation_timeout=30,
        request_timeout=30,
    )
    futures[TOPIC].result(timeout=60)

    acked: list[str] = []
    errors: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked.append(msg.value().decode())

    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "acks": "all",
            "enable.idempotence": True,
            "message.timeout.ms": 30000,
        }
    )
    ids = [f"smoke:{i:05d}" for i in range(COUNT)]
    for value in ids:
        producer.produce(TOPIC, key=value[-2:].encode(), value=value.encode(), on_delivery=on_delivery)
        producer.poll(0)
    remaining = producer.flush(60)
    assert remaining == 0, f"{remaining} messages still in flight after 60 s"
    assert errors == []
    assert sorted(acked) == ids
    return ids


def test_broker_starts_on_loopback(broker: SingleBroker) -> None:
    host, _, port = broker.bootstrap_servers.partition(":")
    assert host == "127.0.0.1"
    assert int(port) > 0
    assert broker.started_in_s < 90


def test_consume_back_exactly_the_produced_ids(broker: SingleBroker, produced_ids: list[str]) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "smoke-reader",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        seen: list[str] = []
        for _ in range(200):
            for msg in consumer.consume(num_messages=500, timeout=0.5):
                assert msg.error() is None, msg.error()
                value = msg.value()
                assert value is not None
                seen.append(value.decode())
            if len(seen) >= COUNT:
                break
    finally:
        consumer.close()
    assert len(seen) == COUNT, f"read {len(seen)} records, expected {COUNT}"
    assert sorted(seen) == produced_ids


def test_spark_kafka_source_counts_exactly(
    broker: SingleBroker, produced_ids: list[str], spark_session: Any
) -> None:
    frame = (
        spark_session.read.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", TOPIC)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    values = [row.v for row in frame.selectExpr("CAST(value AS STRING) AS v").collect()]
    assert len(values) == COUNT
    assert sorted(values) == produced_ids
