"""ClusterConfig validates at construction and says how to fix a bad value."""

from __future__ import annotations

import pytest

from chaos import versions
from chaos.cluster.config import CI_BROKER_CONFIG, ClusterConfig, ClusterNeeds, env_name
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


def test_log_directories_of_their_own_and_the_fake_clock_are_asked_for() -> None:
    assert ClusterConfig().log_dir_mb == 0
    assert ClusterConfig().fake_clock is False
    assert ClusterConfig(log_dir_mb=256, fake_clock=True).log_dir_mb == 256
    own = ClusterConfig(log_dir_mb=0, broker_overrides={"log.dirs": "/data"})
    assert own.broker_overrides["log.dirs"] == "/data"


@pytest.mark.parametrize("size", [-1, 1, 63, True, 1.5])
def test_a_log_directory_too_small_or_not_a_size_is_refused(size: object) -> None:
    with pytest.raises(ConfigError, match="log_dir_mb"):
        ClusterConfig(log_dir_mb=size)  # type: ignore[arg-type]


@pytest.mark.parametrize("key", ["log.dirs", "log.dir", "metadata.log.dir"])
def test_moving_the_log_directory_needs_the_clusters_own_turned_off(key: str) -> None:
    with pytest.raises(ConfigError, match="log_dir_mb=0"):
        ClusterConfig(log_dir_mb=256, broker_overrides={key: "/elsewhere"})


def test_cluster_needs_are_met_or_added_without_taking_anything_away() -> None:
    plain = ClusterConfig()
    disk = ClusterNeeds(log_dir_mb=256)
    clock = ClusterNeeds(fake_clock=True)
    assert ClusterNeeds().met_by(plain)
    assert not disk.met_by(plain)
    assert not clock.met_by(plain)
    with_disk = disk.applied_to(plain)
    assert (with_disk.log_dir_mb, with_disk.fake_clock) == (256, False)
    both = clock.applied_to(with_disk)
    assert (both.log_dir_mb, both.fake_clock) == (256, True)
    assert disk.met_by(both)
    assert clock.met_by(both)
    assert ClusterNeeds(log_dir_mb=128).met_by(both)  # a larger directory serves a smaller need
    assert ClusterNeeds(log_dir_mb=128).applied_to(both) == both
    assert not ClusterNeeds(log_dir_mb=512).met_by(both)
    assert disk.describe() == "log directories of 256 MB"
    assert ClusterNeeds(True, 1024).describe() == "a fakeable wall clock and log directories of 1024 MB"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"log_dir_mb": 10}, "must be 0 .* or an int >= 64"),
        ({"log_dir_mb": True}, "must be 0"),
        ({"fake_clock": "yes"}, "must be True or False"),
    ],
)
def test_cluster_needs_refuse_what_no_cluster_could_be(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ClusterNeeds(**kwargs)  # type: ignore[arg-type]
