"""The run context every worker takes, and the one registry of time profiles the cluster and the clients
both read."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import chaos.cluster.config
import chaos.workload
from chaos.cluster.config import ClusterConfig
from chaos.errors import ConfigError, WorkloadError
from chaos.run import profiles
from chaos.run.context import RunContext
from chaos.run.events import Event
from chaos.workload import AT_LEAST_ONCE, FAITHFUL, IDEMPOTENT, TRANSACTIONAL, custom_profile
from chaos.workload.common import child_payload, read_child_payload


def sink(event: Event) -> None:
    pass


def context(**changes: Any) -> RunContext:
    fields: dict[str, Any] = {
        "run_id": "r-1",
        "bootstrap_servers": "127.0.0.1:9092,127.0.0.1:9093",
        "topic": "t-r-1",
        "group": "g-r-1",
        "client": IDEMPOTENT,
        "sink": sink,
    }
    return RunContext(**{**fields, **changes})


@pytest.mark.parametrize("name", profiles.TIME_PROFILE_NAMES)
def test_the_cluster_and_the_clients_read_one_registry(name: profiles.TimeProfileName) -> None:
    registered = profiles.TIME_PROFILES[name]
    assert chaos.workload.time_profile(name) is registered
    assert ClusterConfig(profile=name).time_profile is registered
    broker = ClusterConfig(profile=name).broker_config()
    assert {k: broker[k] for k in registered.broker_config} == dict(registered.broker_config)
    for key, default in profiles.KAFKA_BROKER_DEFAULTS.items():
        expected = registered.broker_config.get(key, default)
        assert broker.get(key, default) == expected
        assert ClusterConfig(profile=name).detection_timeout_s(key) == int(expected) / 1000
    assert chaos.workload.CI is profiles.CI
    assert chaos.workload.FAITHFUL is profiles.FAITHFUL
    assert chaos.cluster.config.CI_BROKER_CONFIG is profiles.CI_BROKER_CONFIG
    assert chaos.cluster.config.PROFILES == profiles.TIME_PROFILE_NAMES


def test_the_profiles_keep_their_values() -> None:
    """The scenarios depend on these numbers and their ratios."""
    assert dict(profiles.CI.broker_config) == {
        "replica.lag.time.max.ms": "6000",
        "broker.session.timeout.ms": "6000",
        "broker.heartbeat.interval.ms": "1000",
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.num.partitions": "6",
        # the consumer group protocol's session and heartbeat (KIP-848: the broker's), and their minimums
        "group.consumer.session.timeout.ms": "9000",
        "group.consumer.min.session.timeout.ms": "6000",
        "group.consumer.heartbeat.interval.ms": "1000",
        "group.consumer.min.heartbeat.interval.ms": "1000",
        # retention and compaction act within a second on topics that ask for them
        "log.retention.check.interval.ms": "1000",
        "log.cleaner.backoff.ms": "1000",
        # and from a broker's first second, not after Kafka's 30-s initial delay
        "log.initial.task.delay.ms": "1000",
    }
    assert profiles.FAITHFUL.broker == ()
    assert "replica.lag.time.max.ms" not in ClusterConfig(profile="faithful").broker_config()
    assert (profiles.CI.scale, profiles.FAITHFUL.scale) == (0.2, 1.0)
    assert (profiles.CI.session_timeout_ms, profiles.CI.heartbeat_interval_ms) == (9_000, 600)
    assert (profiles.CI.request_timeout_ms, profiles.CI.api_timeout_s) == (6_000, 12.0)
    assert profiles.FAITHFUL.broker_ms("broker.session.timeout.ms") == 9_000
    assert profiles.CI.broker_ms("broker.session.timeout.ms") == 6_000
    assert ClusterConfig(profile="faithful").detection_timeout_s("broker.session.timeout.ms", 9000) == 9.0
    with pytest.raises(ConfigError, match="unknown broker timeout"):
        profiles.CI.broker_ms("nope")


def test_a_context_is_validated() -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"run_id": "a:b"}, "run_id"),
        ({"bootstrap_servers": ""}, "bootstrap_servers"),
        ({"bootstrap_servers": "no-port"}, "host:port"),
        ({"topic": "bad topic"}, "topic"),
        ({"group": ""}, "group"),
        ({"client": "idempotent"}, "ClientProfile"),
        ({"sink": None}, "sink"),
        ({"time": "ci"}, "TimeProfile"),
        ({"seed": True}, "seed"),
        ({"run_dir": 3}, "run_dir"),
    ]
    for changes, message in cases:
        with pytest.raises(ConfigError, match=message):
            context(**changes)
    assert context(run_dir="/tmp/x").run_dir == Path("/tmp/x")
    with pytest.raises(AttributeError):
        context().topic = "other"  # type: ignore[misc]


def test_a_context_crosses_into_a_child_process_without_its_sink() -> None:
    mine = custom_profile("team", "at_least_once", {"acks": "all", "retries": 3}, {"fetch.min.bytes": 1})
    parent = context(client=mine, time=FAITHFUL, run_dir=Path("/tmp/run"), seed=42)
    line = child_payload(parent, {"name": "consumer-0"})
    assert "sink" not in json.loads(line)["context"]

    def pipe(event: Event) -> None:
        pass

    child, spec = read_child_payload(line, pipe)
    assert child == replace(parent, sink=pipe)
    assert spec == {"name": "consumer-0"}
    for client in (AT_LEAST_ONCE, TRANSACTIONAL):
        assert RunContext.from_data(context(client=client).to_data(), sink).client == client
    with pytest.raises(WorkloadError, match="child payload"):
        read_child_payload('{"spec": {}}', pipe)
