"""ClusterConfig validates at construction and says how to fix a bad value."""

from __future__ import annotations

import pytest

from chaos import versions
from chaos.cluster.config import CI_BROKER_CONFIG, ClusterConfig, env_name
from chaos.errors import ConfigError


def test_defaults_are_three_brokers_ci() -> None:
    config = ClusterConfig()
    assert config.brokers == 3
    assert config.broker_config()["replica.lag.time.max.ms"] == CI_BROKER_CONFIG["replica.lag.time.max.ms"]
    assert config.broker_config()["offsets.topic.replication.factor"] == "3"


def test_faithful_keeps_kafka_defaults() -> None:
    assert "replica.lag.time.max.ms" not in ClusterConfig(profile="faithful").broker_config()


@pytest.mark.parametrize("brokers", [1, 2, 6])
def test_broker_count_out_of_range(brokers: int) -> None:
    with pytest.raises(ConfigError, match=r"3\.\.5"):
        ClusterConfig(brokers=brokers)


@pytest.mark.parametrize("version", versions.SUPPORTED_KAFKA_VERSIONS)
def test_every_supported_kafka_version_is_accepted(version: str) -> None:
    assert ClusterConfig(kafka_version=version).kafka_version == version


def test_an_unsupported_kafka_version_names_the_supported_ones() -> None:
    with pytest.raises(
        ConfigError, match=r"'3\.9\.0' is not supported: choose one of 3\.9\.2, 4\.0\.2, 4\.1\.1"
    ):
        ClusterConfig(kafka_version="3.9.0")


def test_topology_properties_are_reserved() -> None:
    with pytest.raises(ConfigError, match="reserved"):
        ClusterConfig(broker_overrides={"advertised.listeners": "PLAINTEXT://x:1"})


def test_overrides_win_and_are_frozen() -> None:
    config = ClusterConfig(broker_overrides={"replica.lag.time.max.ms": "9000"})
    assert config.broker_config()["replica.lag.time.max.ms"] == "9000"
    with pytest.raises(TypeError):
        config.broker_overrides["x"] = "y"  # type: ignore[index]


def test_env_name_matches_the_image_convention() -> None:
    assert env_name("replica.lag.time.max.ms") == "KAFKA_REPLICA_LAG_TIME_MAX_MS"
    assert env_name("a_b.c-d") == "KAFKA_A__B_C___D"
