"""The consumer-group protocol of KIP-848 on the real cluster: members on
``group.protocol=consumer`` share a topic and hand a leaving member's partitions to the one that stays;
the variant's classic session settings became its group's configs (the broker reads them back), the
clients ran without them, and the audit finds nothing lost."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from chaos.cluster.cluster import KafkaCluster
from chaos.run.manifest import read_scenario
from chaos.scenario import Scenario, ScenarioRun, Variant, views
from chaos.workload import IDEMPOTENT

pytestmark = pytest.mark.integration

SESSION_MS, HEARTBEAT_MS = 6000, 1000
PROTOCOL = Scenario(
    scenario_id="consumer_protocol_handover",
    case_id="X19",
    title="Two members on the consumer group protocol; one leaves, the other takes its partitions",
    source="tests/integration/test_group_protocol.py",
    symptom="a group moved to group.protocol=consumer keeps consuming through a member's departure",
    client=IDEMPOTENT,
    guarantee="at_least_once",
    expected_verdict="pass",
    consumer_config={"session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": HEARTBEAT_MS},
    variants=(Variant("consumer", "members on group.protocol=consumer (KIP-848)"),),
)


def group_configs(cluster: KafkaCluster, group: str) -> dict[str, str]:
    from confluent_kafka.admin import ConfigResource, ResourceType  # type: ignore[attr-defined]

    futures = cluster.admin().describe_configs(
        [ConfigResource(ResourceType.GROUP, group)], request_timeout=10
    )
    (future,) = futures.values()
    return {name: entry.value for name, entry in future.result(timeout=15).items()}


def test_members_on_the_consumer_protocol_hand_over_and_keep_the_variants_session(
    request: pytest.FixtureRequest, kafka_cluster: KafkaCluster, run_dir: Path
) -> None:
    nodeid = request.node.nodeid
    with ScenarioRun(
        PROTOCOL,
        "consumer",
        kafka_cluster,
        run_dir,
        nodeid=nodeid,
        group_protocol="consumer",
        engine="reference",  # as every integration test's run (tests/integration/conftest.py)
    ) as run:
        run.create_topic(partitions=4, replication_factor=3)
        leaving = run.member("leaving")
        run.member("staying")
        producer = run.producer(rate=100.0, duration_s=20.0)
        run.wait_for(
            "both members consuming",
            lambda ev: all(views.deliveries(ev, p) for p in ("leaving", "staying")),
            45,
        )
        configs = group_configs(kafka_cluster, run.group)
        time.sleep(1.0)
        leaving.stop()
        run.note("leaving stopped")
        producer.join()
        run.wait_caught_up(45)
        result = run.finish()

    events = list(result.events)
    left = next(e for e in views.client_logs(events, facility="SCENARIO") if e.message == "leaving stopped")
    late = {d.partition for d in views.deliveries(events, "staying") if d.mono > left.mono}
    info = read_scenario(result.run_dir)
    assert info is not None
    clients = {c.process: c for c in info.clients if c.role == "member"}
    assert set(clients) == {"leaving", "staying"}
    print(f"\ngroup configs {configs}; staying read partitions {sorted(late)} after; {result.summary()}")
    assert configs["consumer.session.timeout.ms"] == str(SESSION_MS)
    assert configs["consumer.heartbeat.interval.ms"] == str(HEARTBEAT_MS)
    for member in clients.values():
        assert member.settings["group.protocol"] == "consumer"
        assert "session.timeout.ms" not in member.settings
    assert any("left out of the client" in e.message for e in views.client_logs(events, facility="SCENARIO"))
    assert late == {0, 1, 2, 3}, "the staying member took over every partition once the other left"
    assert result.audit.verdict == "pass", result.audit.failed_by
