"""A cluster's configuration: a frozen dataclass validated at construction, with named profiles.

Profiles
--------
The profile is a time profile of :mod:`chaos.run.profiles` — the one registry the clients read too.
``faithful`` keeps Kafka's own defaults, so detection takes as long as in production; ``ci`` shortens only
the *detection* timeouts a fault test waits on (``replica.lag.time.max.ms``, ``broker.session.timeout.ms``,
``broker.heartbeat.interval.ms``, ``group.initial.rebalance.delay.ms``, ``offsets.topic.num.partitions``:
:data:`chaos.run.profiles.CI_BROKER_CONFIG`, with the reasons in that module's docstring).

Both profiles make the internal topics as durable as the cluster allows (RF = min(3, brokers),
min.insync.replicas = RF - 1).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from chaos import versions
from chaos.errors import ConfigError
from chaos.run.profiles import (
    CI_BROKER_CONFIG,
    TIME_PROFILE_NAMES,
    TimeProfile,
    TimeProfileName,
    time_profile,
)

__all__ = ["CI_BROKER_CONFIG", "PROFILES", "ClusterConfig", "Profile", "env_name"]

Profile = TimeProfileName
PROFILES: tuple[Profile, ...] = TIME_PROFILE_NAMES

MIN_BROKERS = 3
MAX_BROKERS = 5
MAX_CLIENT_PATHS = 4
DEFAULT_LOG_DIR_MB = 1024
"""What a cluster that runs disk faults is suggested (the log directory is 0, off, by default)."""
MIN_LOG_DIR_MB = 64

_PROPERTY = re.compile(r"^[a-z][a-z0-9]*([._-][a-z0-9]+)*$")
# Set by the cluster itself from its topology; an override would break the proxies.
RESERVED_PROPERTIES = frozenset(
    {
        "node.id",
        "process.roles",
        "listeners",
        "advertised.listeners",
        "listener.security.protocol.map",
        "controller.listener.names",
        "inter.broker.listener.name",
        "controller.quorum.voters",
        "controller.quorum.bootstrap.servers",
    }
)
LOG_DIR_PROPERTIES = frozenset({"log.dirs", "log.dir", "metadata.log.dir"})
"""Where a broker keeps its data: the cluster's own log directory (``log_dir_mb``) unless that is 0."""
# C1 only and the serial collector: a broker starts with less CPU on a 2-core machine; the throughput a
# chaos test needs is tiny. log4j2's own shutdown hook is off: it stops logging while Kafka's shutdown hook
# still runs, so a SIGTERM-stopped broker lost its controlled-shutdown lines (measured: 20 log lines after
# SIGTERM with the hook, 194 without). The console appender flushes every line, so nothing waits on it.
DEFAULT_JVM_OPTS = (
    "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true -Dlog4j2.shutdownHookEnabled=false"
)
_HEAP = re.compile(r"^\d+[mMgG]$")


def _frozen(mapping: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(sorted(mapping.items())))


def _check_disk_and_clock(owner: str, log_dir_mb: object, fake_clock: object, disk_layer: object) -> None:
    """``log_dir_mb`` 0 or at least :data:`MIN_LOG_DIR_MB`, ``fake_clock`` and ``disk_layer`` bools, a disk
    layer only over a log directory of its own (ConfigError otherwise)."""
    if (
        isinstance(log_dir_mb, bool)
        or not isinstance(log_dir_mb, int)
        or (log_dir_mb != 0 and log_dir_mb < MIN_LOG_DIR_MB)
    ):
        raise ConfigError(
            f"{owner}log_dir_mb={log_dir_mb!r} must be 0 (no log directory of its own) or an int >= "
            f"{MIN_LOG_DIR_MB} (MB; {DEFAULT_LOG_DIR_MB} is the usual size)"
        )
    if not isinstance(fake_clock, bool):
        raise ConfigError(f"{owner}fake_clock must be True or False, not {fake_clock!r}")
    if not isinstance(disk_layer, bool):
        raise ConfigError(f"{owner}disk_layer must be True or False, not {disk_layer!r}")
    if disk_layer and not log_dir_mb:
        raise ConfigError(
            f"{owner}disk_layer=True needs a log directory of the broker's own under it: set log_dir_mb "
            f"(e.g. {DEFAULT_LOG_DIR_MB})"
        )


@dataclass(frozen=True)
class ClusterNeeds:
    """What a scenario needs of the cluster it runs on, beyond what any cluster has: a wall clock the clock
    faults can move (``fake_clock``), log directories of the brokers' own at least ``log_dir_mb`` large for
    the disk faults, mounted through the fault layer (``disk_layer``, which needs ``log_dir_mb``) for the
    slow-disk, disk-error and power-loss faults. The pytest plugin starts the session's cluster again with
    them when a scenario needs what it lacks, and keeps them for the rest of the session
    (``Scenario(cluster=ClusterNeeds(...))``)."""

    fake_clock: bool = False
    log_dir_mb: int = 0
    disk_layer: bool = False

    def __post_init__(self) -> None:
        _check_disk_and_clock("ClusterNeeds.", self.log_dir_mb, self.fake_clock, self.disk_layer)

    def met_by(self, config: ClusterConfig) -> bool:
        """A cluster of ``config`` has everything needed."""
        return (
            (config.fake_clock or not self.fake_clock)
            and (config.disk_layer or not self.disk_layer)
            and config.log_dir_mb >= self.log_dir_mb
        )

    def applied_to(self, config: ClusterConfig) -> ClusterConfig:
        """``config`` with what is needed added (nothing it has is taken away)."""
        return replace(
            config,
            fake_clock=config.fake_clock or self.fake_clock,
            log_dir_mb=max(config.log_dir_mb, self.log_dir_mb),
            disk_layer=config.disk_layer or self.disk_layer,
        )

    def describe(self) -> str:
        parts = (
            (["a fakeable wall clock"] if self.fake_clock else [])
            + ([f"log directories of {self.log_dir_mb} MB"] if self.log_dir_mb else [])
            + (["the fault layer under them"] if self.disk_layer else [])
        )
        return " and ".join(parts) or "nothing special"


@dataclass(frozen=True)
class ClusterConfig:
    """What cluster to start. Invalid values raise ConfigError at construction, saying what is accepted.

    ``broker_overrides`` are server.properties settings (``replica.lag.time.max.ms`` style keys,
    string values) applied on top of the profile's; topology settings (listeners, voters, node id) are
    reserved for the cluster.

    ``client_paths`` extra client paths besides the shared one (``ext``): path ``extK`` is its own listener on
    every broker behind its own proxies, so a network fault on it hits only the clients started on it
    (:meth:`KafkaCluster.bootstrap`).

    ``log_dir_mb``: each broker's log directory is a filesystem of its own of this many MB (a tmpfs
    volume that outlives the broker's container: docs/cluster.md, "Log directories"), so a disk fault can
    fill it without filling the host's disk; memory is used only by what is written. 0 (the default): the
    log directory stays in the container's own layer, and disk faults refuse this cluster.

    ``fake_clock``: each broker's JVM reads its wall clock through libfaketime (the local Kafka image), so
    clock faults can move it (chaos.faults.clock); off, they refuse this cluster.

    ``disk_layer``: each broker's log directory (``log_dir_mb`` > 0) is mounted through the fault layer
    (faultfs, in the local Kafka image), so the slow-disk, disk-error and power-loss faults can act on it
    (chaos.faults.disk_layer); off, they refuse this cluster. Its brokers get ``/dev/fuse`` and
    ``CAP_SYS_ADMIN``.
    """

    brokers: int = 3
    profile: Profile = "ci"
    kafka_version: str = versions.KAFKA_VERSION
    broker_overrides: Mapping[str, str] = field(default_factory=dict)
    heap: str = "448m"
    jvm_opts: str = DEFAULT_JVM_OPTS
    start_timeout_s: float = 120.0
    client_paths: int = 2
    log_dir_mb: int = 0
    fake_clock: bool = False
    disk_layer: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.brokers, bool) or not isinstance(self.brokers, int):
            raise ConfigError(
                f"brokers must be an int from {MIN_BROKERS} to {MAX_BROKERS}, not {self.brokers!r}"
            )
        if not MIN_BROKERS <= self.brokers <= MAX_BROKERS:
            raise ConfigError(
                f"brokers={self.brokers} is out of range: a quorum with faults needs "
                f"{MIN_BROKERS}..{MAX_BROKERS} brokers (pass e.g. --chaos-brokers 3)"
            )
        if self.profile not in PROFILES:
            raise ConfigError(
                f"profile {self.profile!r} is not one of {', '.join(PROFILES)} (--chaos-profile)"
            )
        if self.kafka_version not in versions.SUPPORTED_KAFKA_VERSIONS:
            raise ConfigError(
                f"kafka_version {self.kafka_version!r} is not supported: choose one of "
                f"{', '.join(versions.SUPPORTED_KAFKA_VERSIONS)} (chaos/versions.py), "
                f"or drop --kafka-version for the default {versions.KAFKA_VERSION}"
            )
        for key, value in self.broker_overrides.items():
            if not isinstance(key, str) or not _PROPERTY.match(key):
                raise ConfigError(
                    f"broker override key {key!r} is not a Kafka property name "
                    "(e.g. 'replica.lag.time.max.ms')"
                )
            if key in RESERVED_PROPERTIES:
                raise ConfigError(
                    f"broker override {key!r} is set by the cluster's topology and cannot be overridden; "
                    f"reserved: {', '.join(sorted(RESERVED_PROPERTIES))}"
                )
            if not isinstance(value, str):
                raise ConfigError(f"broker override {key}={value!r} must be a string, e.g. '6000'")
        own_dirs = sorted(LOG_DIR_PROPERTIES & set(self.broker_overrides))
        if own_dirs and self.log_dir_mb:
            raise ConfigError(
                f"broker override {', '.join(own_dirs)} would move the log directory off the one the cluster "
                "gives each broker (log_dir_mb): set log_dir_mb=0 to choose your own (no disk faults then)"
            )
        if not _HEAP.match(self.heap):
            raise ConfigError(f"heap {self.heap!r} must look like '448m' or '1g'")
        if isinstance(self.client_paths, bool) or not isinstance(self.client_paths, int):
            raise ConfigError(
                f"client_paths must be an int from 0 to {MAX_CLIENT_PATHS}, not {self.client_paths!r}"
            )
        if not 0 <= self.client_paths <= MAX_CLIENT_PATHS:
            raise ConfigError(
                f"client_paths={self.client_paths} is out of range: 0..{MAX_CLIENT_PATHS} extra client paths"
            )
        _check_disk_and_clock("", self.log_dir_mb, self.fake_clock, self.disk_layer)
        if not self.start_timeout_s > 0:
            raise ConfigError(f"start_timeout_s must be positive, not {self.start_timeout_s!r}")
        object.__setattr__(self, "broker_overrides", _frozen(self.broker_overrides))

    @property
    def replication_factor(self) -> int:
        """RF of the internal topics: 3 (every cluster here has at least 3 brokers)."""
        return min(3, self.brokers)

    def broker_config(self) -> Mapping[str, str]:
        """Every server.properties setting beyond the topology: internal topics, profile, overrides."""
        rf = self.replication_factor
        merged: dict[str, str] = {
            "offsets.topic.replication.factor": str(rf),
            "transaction.state.log.replication.factor": str(rf),
            "transaction.state.log.min.isr": str(rf - 1),
            "default.replication.factor": str(rf),
            "min.insync.replicas": "1",
        }
        merged.update(self.time_profile.broker_config)
        merged.update(self.broker_overrides)
        return _frozen(merged)

    @property
    def time_profile(self) -> TimeProfile:
        """The profile's entry in the one registry (:mod:`chaos.run.profiles`)."""
        return time_profile(self.profile)

    def detection_timeout_s(self, key: str, default_ms: int | None = None) -> float:
        """A broker timeout in seconds as configured: an override, else the profile's value, else
        ``default_ms`` or Kafka's default (:data:`chaos.run.profiles.KAFKA_BROKER_DEFAULTS`)."""
        value = self.broker_config().get(key)
        if value is not None:
            return int(value) / 1000.0
        if default_ms is not None:
            return default_ms / 1000.0
        return self.time_profile.broker_ms(key) / 1000.0


def env_name(prop: str) -> str:
    """The KAFKA_* environment variable that both Kafka images turn into ``prop`` in server.properties."""
    return "KAFKA_" + prop.replace("_", "__").replace("-", "___").replace(".", "_").upper()
