"""The session cluster is a real 3-broker KRaft quorum behind Toxiproxy, reachable only through proxies."""

from __future__ import annotations

import pytest

from chaos.cluster import introspect, wire
from chaos.cluster.cluster import KafkaCluster

pytestmark = pytest.mark.integration


def test_cluster_ready_with_quorum_leader_and_all_brokers(kafka_cluster: KafkaCluster) -> None:
    assert kafka_cluster.start_duration_s is not None
    print(f"cluster start: {kafka_cluster.start_duration_s:.1f} s")
    assert kafka_cluster.start_duration_s < 60
    assert introspect.registered_brokers(kafka_cluster) == {1, 2, 3}
    assert kafka_cluster.controller_id() in {1, 2, 3}
    assert kafka_cluster.offline_partitions() == []
    assert kafka_cluster.under_replicated_partitions() == []


def test_topic_with_per_topic_config_and_group_coordinator(kafka_cluster: KafkaCluster) -> None:
    from confluent_kafka.admin._config import ConfigResource
    from confluent_kafka.admin._resource import ResourceType

    kafka_cluster.create_topic(
        "topology-configs", partitions=3, replication_factor=3, config={"min.insync.replicas": "2"}
    )
    states = kafka_cluster.describe_partitions(["topology-configs"])
    assert [s.partition for s in states] == [0, 1, 2]
    assert all(sorted(s.replicas) == [1, 2, 3] and sorted(s.isr) == [1, 2, 3] for s in states)
    resource = ConfigResource(ResourceType.TOPIC, "topology-configs")
    configs = (
        kafka_cluster.admin().describe_configs([resource], request_timeout=15)[resource].result(timeout=20)
    )
    assert configs["min.insync.replicas"].value == "2"
    assert kafka_cluster.group_coordinator("topology-group") in {1, 2, 3}


def test_client_through_one_proxy_only_learns_proxy_addresses(kafka_cluster: KafkaCluster) -> None:
    from confluent_kafka.admin import AdminClient

    proxies = {("127.0.0.1", b.ext_port) for b in kafka_cluster.brokers}
    first = kafka_cluster.brokers[0]
    # what the broker advertises, read on the wire
    advertised = {
        (host, port) for _, host, port in introspect.advertised_addresses(kafka_cluster, first.node_id)
    }
    assert advertised == proxies
    # and what librdkafka learns when bootstrapped through that one proxy only
    admin = AdminClient({"bootstrap.servers": first.bootstrap})
    metadata = admin.list_topics(timeout=15)
    learned: set[tuple[str, int]] = {(str(b.host), int(b.port)) for b in metadata.brokers.values()}
    assert learned == proxies
    # the brokers' own container ports are not reachable from the host at all
    for port in (9092, 9093, 9094):
        with pytest.raises(ConnectionRefusedError):
            wire.api_versions("127.0.0.1", port, timeout_s=1)
