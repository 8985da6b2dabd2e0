"""A cluster's configuration: a frozen dataclass validated at construction, with named profiles.

Profiles
--------
``faithful`` keeps Kafka's own defaults, so detection takes as long as in production.

``ci`` shortens only the *detection* timeouts a fault test waits on, and keeps their ordering
(heartbeat < session, fetch wait < lag time):

* ``replica.lag.time.max.ms`` 30000 → 6000: how long a follower may fall behind (or be cut off)
  before its leader drops it from the ISR. Tests of ISR shrink wait about this long.
* ``broker.session.timeout.ms`` 9000 → 6000 and ``broker.heartbeat.interval.ms`` 2000 → 1000: how long
  the active controller waits for a silent broker before fencing it and moving its leaderships.
  A crashed leader is replaced after about this long. Not lower: on a 2-core machine a GC pause or
  a busy JVM must not fence a healthy broker.
* ``group.initial.rebalance.delay.ms`` 3000 → 0: the first consumer-group join is not held back.
* ``offsets.topic.num.partitions`` 50 → 6: the consumer-offsets topic is created on the first group
  operation; 50 partitions × RF 3 take seconds on a small machine and make every health check slower.

Both profiles make the internal topics as durable as the cluster allows (RF = min(3, brokers),
min.insync.replicas = RF - 1).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from chaos import versions
from chaos.errors import ConfigError

Profile = Literal["ci", "faithful"]
PROFILES: tuple[Profile, ...] = ("ci", "faithful")

MIN_BROKERS = 3
MAX_BROKERS = 5

CI_BROKER_CONFIG: Mapping[str, str] = MappingProxyType(
    {
        "replica.lag.time.max.ms": "6000",
        "broker.session.timeout.ms": "6000",
        "broker.heartbeat.interval.ms": "1000",
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.num.partitions": "6",
    }
)
"""Broker settings the ``ci`` profile changes from Kafka's defaults (see the module docstring)."""

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


@dataclass(frozen=True)
class ClusterConfig:
    """What cluster to start. Invalid values raise ConfigError at construction, saying what is accepted.

    ``broker_overrides`` are server.properties settings (``replica.lag.time.max.ms`` style keys,
    string values) applied on top of the profile's; topology settings (listeners, voters, node id) are
    reserved for the cluster.
    """

    brokers: int = 3
    profile: Profile = "ci"
    kafka_version: str = versions.KAFKA_VERSION
    broker_overrides: Mapping[str, str] = field(default_factory=dict)
    heap: str = "448m"
    jvm_opts: str = DEFAULT_JVM_OPTS
    start_timeout_s: float = 120.0

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
        if self.kafka_version != versions.KAFKA_VERSION:
            raise ConfigError(
                f"kafka_version {self.kafka_version!r} is not supported yet: only the pinned "
                f"{versions.KAFKA_VERSION} (chaos/versions.py) has an image; drop --kafka-version or pass "
                f"{versions.KAFKA_VERSION}"
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
        if not _HEAP.match(self.heap):
            raise ConfigError(f"heap {self.heap!r} must look like '448m' or '1g'")
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
        if self.profile == "ci":
            merged.update(CI_BROKER_CONFIG)
        merged.update(self.broker_overrides)
        return _frozen(merged)

    def detection_timeout_s(self, key: str, default_ms: int) -> float:
        """A broker timeout in seconds as configured (``default_ms`` when Kafka's default applies)."""
        return int(self.broker_config().get(key, str(default_ms))) / 1000.0


def env_name(prop: str) -> str:
    """The KAFKA_* environment variable that both Kafka images turn into ``prop`` in server.properties."""
    return "KAFKA_" + prop.replace("_", "__").replace("-", "___").replace(".", "_").upper()
