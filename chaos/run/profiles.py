"""The run's two profile registries, read by every stage that needs them.

**Time profiles** (``ci``, ``faithful``): how fast a run detects a failure, on both sides of the wire. A
:class:`TimeProfile` scales every client timeout by one factor, keeping their ratios (docs/workload.md),
and names the broker detection timeouts it changes from Kafka's defaults. The cluster reads
:attr:`TimeProfile.broker_config` (``chaos.cluster.config``), the workload the client timeouts
(``chaos.workload.configs``), so the two cannot drift apart.

``faithful`` keeps the seed's Java client defaults and Kafka's broker defaults: detection takes as long as in
production. ``ci`` scales the client timeouts by 0.2 and shortens only the *broker detection* timeouts a
fault test waits on, keeping their ordering (heartbeat < session, fetch wait < lag time):

* ``replica.lag.time.max.ms`` 30000 → 6000: how long a follower may fall behind (or be cut off) before its
  leader drops it from the ISR. Tests of ISR shrink wait about this long.
* ``broker.session.timeout.ms`` 9000 → 6000 and ``broker.heartbeat.interval.ms`` 2000 → 1000: how long the
  active controller waits for a silent broker before fencing it and moving its leaderships. A crashed
  leader is replaced after about this long. Not lower: on a 2-core machine a GC pause or a busy JVM must
  not fence a healthy broker.
* ``group.initial.rebalance.delay.ms`` 3000 → 0: the first consumer-group join is not held back.
* ``offsets.topic.num.partitions`` 50 → 6: the consumer-offsets topic is created on the first group
  operation; 50 partitions × RF 3 take seconds on a small machine and make every health check slower.
* ``group.consumer.session.timeout.ms`` 45000 → 9000 and ``group.consumer.heartbeat.interval.ms``
  5000 → 1000 (their minimums 45000 / 5000 → 6000 / 1000): under the consumer group protocol (KIP-848,
  ``group.protocol=consumer``) the broker, not the client, sets a member's session and heartbeat; the ``ci``
  session is the classic protocol's (45000 × 0.2).
* ``log.retention.check.interval.ms`` 300000 → 1000 and ``log.cleaner.backoff.ms`` 15000 → 1000: how often
  a broker deletes segments past a topic's retention and its cleaner looks for logs to compact. A run on a
  topic with a short ``retention.ms`` or ``cleanup.policy=compact`` sees them act within a second, as a
  production topic does within its (longer) own timescale; topics with Kafka's default retention are not
  touched.
* ``log.initial.task.delay.ms`` 30000 → 1000: a broker's first retention check waits this long after it
  starts (its other periodic log tasks too). With Kafka's default, a topic's retention never acts in the
  first 30 s of a cluster — most of a short run.

**Client profiles**: a :class:`ClientProfile` is a named producer (and, where it matters, consumer)
configuration plus the delivery guarantee it claims; the audit judges a run against that claim.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Final, Literal

from chaos.errors import ConfigError
from chaos.run.terms import GUARANTEES, Guarantee

ConfigValue = str | int | float | bool
ConfigItems = tuple[tuple[str, ConfigValue], ...]

GroupProtocol = Literal["classic", "consumer"]
GROUP_PROTOCOLS: Final[tuple[GroupProtocol, ...]] = ("classic", "consumer")
"""librdkafka's ``group.protocol``: the classic rebalance protocol, or KIP-848's consumer protocol (the
broker assigns partitions and sets the session; Kafka 4.0 and later)."""


def group_protocol_of(settings: Mapping[str, ConfigValue]) -> GroupProtocol:
    """The protocol librdkafka speaks with these consumer settings (``group.protocol``, default classic)."""
    return "consumer" if str(settings.get("group.protocol", "")).lower() == "consumer" else "classic"


CLASSIC_ONLY_CONSUMER_KEYS: Final[tuple[str, ...]] = (
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "partition.assignment.strategy",
    "group.protocol.type",
)
"""Consumer settings of the classic protocol that librdkafka refuses with ``group.protocol=consumer``."""

# ---- time profiles ---------------------------------------------------------------------------------

TimeProfileName = Literal["ci", "faithful"]
TIME_PROFILE_NAMES: Final[tuple[TimeProfileName, ...]] = ("ci", "faithful")

# The seed's (Java client) defaults, in milliseconds: the `faithful` profile. librdkafka has no
# default.api.timeout.ms: `api_timeout_ms` is the timeout the workload passes to each blocking call.
FAITHFUL_MS: Final[Mapping[str, int]] = MappingProxyType(
    {
        "request_timeout_ms": 30_000,
        "api_timeout_ms": 60_000,
        "max_poll_interval_ms": 300_000,
        "session_timeout_ms": 45_000,
        "heartbeat_interval_ms": 3_000,
        "message_timeout_ms": 300_000,
        "transaction_timeout_ms": 60_000,
        "socket_timeout_ms": 60_000,
        "socket_connection_setup_timeout_ms": 30_000,
    }
)

KAFKA_BROKER_DEFAULTS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "replica.lag.time.max.ms": "30000",
        "broker.session.timeout.ms": "9000",
        "broker.heartbeat.interval.ms": "2000",
        "group.initial.rebalance.delay.ms": "3000",
        "offsets.topic.num.partitions": "50",
        "group.consumer.session.timeout.ms": "45000",
        "group.consumer.min.session.timeout.ms": "45000",
        "group.consumer.heartbeat.interval.ms": "5000",
        "group.consumer.min.heartbeat.interval.ms": "5000",
        "log.retention.check.interval.ms": "300000",
        "log.cleaner.backoff.ms": "15000",
        "log.initial.task.delay.ms": "30000",
    }
)
"""Kafka's own defaults of the broker settings a time profile may change (the ``faithful`` values)."""

CI_BROKER_CONFIG: Final[Mapping[str, str]] = MappingProxyType(
    {
        "replica.lag.time.max.ms": "6000",
        "broker.session.timeout.ms": "6000",
        "broker.heartbeat.interval.ms": "1000",
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.num.partitions": "6",
        "group.consumer.session.timeout.ms": "9000",
        "group.consumer.min.session.timeout.ms": "6000",
        "group.consumer.heartbeat.interval.ms": "1000",
        "group.consumer.min.heartbeat.interval.ms": "1000",
        "log.retention.check.interval.ms": "1000",
        "log.cleaner.backoff.ms": "1000",
        "log.initial.task.delay.ms": "1000",
    }
)
"""Broker settings the ``ci`` profile changes from Kafka's defaults (see the module docstring)."""

BROKER_MIN_SESSION_TIMEOUT_MS: Final = 6_000  # Kafka's group.min.session.timeout.ms default
CI_SCALE: Final = 0.2  # the smallest round factor that keeps session.timeout.ms above the broker minimum


@dataclass(frozen=True)
class TimeProfile:
    """Client timeouts — the seed's defaults (:data:`FAITHFUL_MS`) times ``scale``, ratios kept — and the
    broker settings (``broker``: server.properties key → value; a mapping is stored as sorted pairs) the
    profile changes from :data:`KAFKA_BROKER_DEFAULTS`.

    ``scale`` must keep ``session.timeout.ms`` at or above the broker's ``group.min.session.timeout.ms``
    (6000 ms by default), so it is at least 6000 / 45000 ≈ 0.134.
    """

    name: str
    scale: float
    broker: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not self.name:
            raise ConfigError("TimeProfile.name: expected a non-empty name such as 'ci' or 'faithful'")
        if not isinstance(self.scale, int | float) or not math.isfinite(self.scale) or self.scale <= 0:
            raise ConfigError(f"TimeProfile.scale: expected a positive finite number; got {self.scale!r}")
        if self.session_timeout_ms < BROKER_MIN_SESSION_TIMEOUT_MS:
            lowest = BROKER_MIN_SESSION_TIMEOUT_MS / FAITHFUL_MS["session_timeout_ms"]
            raise ConfigError(
                f"TimeProfile.scale: {self.scale} gives session.timeout.ms={self.session_timeout_ms}, below "
                f"the broker's group.min.session.timeout.ms ({BROKER_MIN_SESSION_TIMEOUT_MS}); use a scale "
                f">= {lowest:.3f} or lower that broker setting"
            )
        pairs = tuple(self.broker.items()) if isinstance(self.broker, Mapping) else self.broker
        if not all(
            isinstance(p, tuple) and len(p) == 2 and all(isinstance(s, str) and s for s in p) for p in pairs
        ):
            raise ConfigError(
                f"TimeProfile.broker: expected server.properties settings as strings, e.g. "
                f"{{'replica.lag.time.max.ms': '6000'}}; got {self.broker!r}"
            )
        object.__setattr__(self, "broker", tuple(sorted(pairs)))

    @property
    def broker_config(self) -> Mapping[str, str]:
        """The broker settings this profile changes from Kafka's defaults."""
        return MappingProxyType(dict(self.broker))

    def broker_ms(self, key: str) -> int:
        """A broker detection timeout in milliseconds under this profile (Kafka's default if unchanged)."""
        value = self.broker_config.get(key, KAFKA_BROKER_DEFAULTS.get(key))
        if value is None:
            raise ConfigError(
                f"TimeProfile.broker_ms: unknown broker timeout {key!r}; expected one of "
                f"{', '.join(KAFKA_BROKER_DEFAULTS)}"
            )
        return int(value)

    def ms(self, name: str) -> int:
        """One scaled client timeout in milliseconds, by its :data:`FAITHFUL_MS` key."""
        try:
            base = FAITHFUL_MS[name]
        except KeyError:
            raise ConfigError(
                f"TimeProfile.ms: unknown timeout {name!r}; expected one of {', '.join(FAITHFUL_MS)}"
            ) from None
        return max(1, round(base * self.scale))

    @property
    def request_timeout_ms(self) -> int:
        return self.ms("request_timeout_ms")

    @property
    def api_timeout_s(self) -> float:
        """Timeout for one blocking client call (list offsets, committed, describe…), in seconds."""
        return self.ms("api_timeout_ms") / 1000

    @property
    def max_poll_interval_ms(self) -> int:
        return self.ms("max_poll_interval_ms")

    @property
    def session_timeout_ms(self) -> int:
        return self.ms("session_timeout_ms")

    @property
    def heartbeat_interval_ms(self) -> int:
        return self.ms("heartbeat_interval_ms")

    @property
    def message_timeout_ms(self) -> int:
        return self.ms("message_timeout_ms")

    @property
    def transaction_timeout_ms(self) -> int:
        return self.ms("transaction_timeout_ms")

    @property
    def socket_timeout_ms(self) -> int:
        return self.ms("socket_timeout_ms")

    @property
    def socket_connection_setup_timeout_ms(self) -> int:
        return self.ms("socket_connection_setup_timeout_ms")

    def to_data(self) -> dict[str, Any]:
        return {"name": self.name, "scale": self.scale, "broker": [list(p) for p in self.broker]}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> TimeProfile:
        try:
            return cls(str(data["name"]), data["scale"], tuple(tuple(p) for p in data.get("broker", ())))
        except (KeyError, TypeError) as exc:
            raise ConfigError(f"TimeProfile: {data!r} is not TimeProfile.to_data() output ({exc})") from None


FAITHFUL: Final = TimeProfile("faithful", 1.0)
CI: Final = TimeProfile("ci", CI_SCALE, tuple(CI_BROKER_CONFIG.items()))
TIME_PROFILES: Final[Mapping[str, TimeProfile]] = MappingProxyType({"faithful": FAITHFUL, "ci": CI})


def time_profile(name: str) -> TimeProfile:
    """The named time profile (``ci`` or ``faithful``)."""
    try:
        return TIME_PROFILES[name]
    except KeyError:
        raise ConfigError(
            f"time profile: expected one of {', '.join(TIME_PROFILE_NAMES)}; got {name!r}"
        ) from None


# ---- client profiles -------------------------------------------------------------------------------

# Keys the workload sets itself; a profile or user configuration must not set them.
RESERVED_KEYS: Final = frozenset(
    {"bootstrap.servers", "on_delivery", "error_cb", "logger", "on_commit", "stats_cb", "throttle_cb"}
)


def config_items(owner: str, name: str, value: object) -> ConfigItems:
    """librdkafka settings (a mapping or ``(key, value)`` pairs) as sorted pairs, validated: scalar values,
    none of :data:`RESERVED_KEYS`. ``owner.name`` names the field in the error."""
    if isinstance(value, Mapping):
        pairs = tuple(value.items())
    elif isinstance(value, tuple | list):
        pairs = tuple(tuple(p) if isinstance(p, list) else p for p in value)
    else:
        raise ConfigError(f"{owner}.{name}: expected a mapping of librdkafka settings; got {value!r}")
    for pair in pairs:
        if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)):
            raise ConfigError(f"{owner}.{name}: expected (key, value) pairs; got {pair!r}")
        key, item = pair
        if key in RESERVED_KEYS:
            raise ConfigError(f"{owner}.{name}: {key!r} is set by the workload itself; remove it")
        if not isinstance(item, str | int | float | bool):
            raise ConfigError(f"{owner}.{name}[{key!r}]: expected a str, int, float or bool; got {item!r}")
    return tuple(sorted(pairs))


@dataclass(frozen=True)
class ClientProfile:
    """A named client configuration and the guarantee it claims.

    ``producer`` / ``consumer`` are librdkafka settings (a mapping is accepted and stored as sorted pairs);
    they override the time profile's timeouts, and the caller's overrides override them.
    """

    name: str
    guarantee: Guarantee
    description: str
    producer: ConfigItems = ()
    consumer: ConfigItems = field(default=())

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("_", "").replace("-", "").isalnum():
            raise ConfigError(f"ClientProfile.name: expected a name of [A-Za-z0-9_-]; got {self.name!r}")
        if self.guarantee not in GUARANTEES:
            raise ConfigError(
                f"ClientProfile.guarantee: expected one of {', '.join(GUARANTEES)}; got {self.guarantee!r}"
            )
        object.__setattr__(self, "producer", config_items("ClientProfile", "producer", self.producer))
        object.__setattr__(self, "consumer", config_items("ClientProfile", "consumer", self.consumer))
        if (
            self.guarantee in ("idempotent", "exactly_once")
            and not _truthy(self.producer_settings.get("enable.idempotence"))
            and "transactional.id" not in self.producer_settings
        ):
            raise ConfigError(
                f"ClientProfile {self.name!r} claims {self.guarantee} "
                "but does not set enable.idempotence=true"
            )

    @property
    def producer_settings(self) -> dict[str, ConfigValue]:
        return dict(self.producer)

    @property
    def consumer_settings(self) -> dict[str, ConfigValue]:
        return dict(self.consumer)

    @property
    def group_protocol(self) -> GroupProtocol:
        """The group members' protocol: ``consumer`` when the consumer settings say so, else ``classic``."""
        return group_protocol_of(self.consumer_settings)

    def with_group_protocol(self, protocol: GroupProtocol) -> ClientProfile:
        """This profile with its members on ``protocol`` (a session's ``--chaos-group-protocol``); a profile
        that sets ``group.protocol`` itself keeps it, and ``classic`` changes nothing. Onto the consumer
        protocol, the classic-only settings (:data:`CLASSIC_ONLY_CONSUMER_KEYS`: the session and heartbeat
        are the broker's then) are left out — :meth:`moved_by` says which."""
        if protocol not in GROUP_PROTOCOLS:
            raise ConfigError(
                f"group protocol: expected one of {', '.join(GROUP_PROTOCOLS)}; got {protocol!r}"
            )
        if protocol == "classic" or "group.protocol" in self.consumer_settings:
            return self
        kept = tuple((k, v) for k, v in self.consumer if k not in CLASSIC_ONLY_CONSUMER_KEYS)
        return replace(self, consumer=(*kept, ("group.protocol", protocol)))

    def moved_by(self, other: ClientProfile) -> dict[str, ConfigValue]:
        """The consumer settings of this profile that ``other`` (:meth:`with_group_protocol` of it) left
        out."""
        theirs = other.consumer_settings
        return {k: v for k, v in self.consumer_settings.items() if k not in theirs}

    @property
    def idempotent(self) -> bool:
        """True when the producer is idempotent (explicitly, or implied by a transactional.id)."""
        settings = self.producer_settings
        return _truthy(settings.get("enable.idempotence")) or "transactional.id" in settings

    @property
    def transactional(self) -> bool:
        return self.guarantee == "exactly_once"

    @property
    def single_attempt(self) -> bool:
        """True when librdkafka sends each message at most once (``retries=0``, not idempotent).

        Only then does a retriable broker rejection in a delivery report prove the message was not
        written: with retries an earlier attempt may have timed out in flight after the broker appended it
        (librdkafka itself never downgrades such a message to NOT_PERSISTED).
        """
        settings = self.producer_settings
        retries = settings.get("retries", settings.get("message.send.max.retries"))
        return not self.idempotent and retries is not None and int(retries) == 0

    def to_data(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "guarantee": self.guarantee,
            "description": self.description,
            "producer": [list(p) for p in self.producer],
            "consumer": [list(p) for p in self.consumer],
        }

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> ClientProfile:
        try:
            return cls(
                data["name"], data["guarantee"], data["description"], data["producer"], data["consumer"]
            )
        except (KeyError, TypeError) as exc:
            raise ConfigError(
                f"ClientProfile: {data!r} is not ClientProfile.to_data() output ({exc})"
            ) from None


def _pairs(settings: Mapping[str, ConfigValue]) -> ConfigItems:
    return tuple(settings.items())


def _truthy(value: ConfigValue | None) -> bool:
    return value is True or (isinstance(value, str) and value.lower() == "true")


FIRE_AND_FORGET: Final = ClientProfile(
    "fire_and_forget",
    "at_most_once",
    "acks=0: a send counts as done once it is written to the socket; no offsets, no retries (L3).",
    producer=_pairs({"acks": 0, "retries": 0, "enable.idempotence": False}),
)
ACKS1: Final = ClientProfile(
    "acks1",
    "at_most_once",
    "acks=1, no retries: the leader alone acknowledges; a leader failover can lose acked writes (L2).",
    producer=_pairs({"acks": 1, "retries": 0, "enable.idempotence": False}),
)
AT_LEAST_ONCE: Final = ClientProfile(
    "at_least_once",
    "at_least_once",
    "acks=all with retries, no idempotence, 5 requests in flight: no loss of acked writes, but "
    "retries after lost acks duplicate and may reorder (D1, O1).",
    producer=_pairs(
        {
            "acks": "all",
            "retries": 10,
            "retry.backoff.ms": 100,
            "enable.idempotence": False,
            "max.in.flight.requests.per.connection": 5,
        }
    ),
)
IDEMPOTENT: Final = ClientProfile(
    "idempotent",
    "idempotent",
    "enable.idempotence=true (acks=all, bounded in-flight, infinite retries): no duplicates, per-partition "
    "order kept; failures surface only as _MSG_TIMED_OUT after message.timeout.ms.",
    producer=_pairs({"enable.idempotence": True, "acks": "all", "max.in.flight.requests.per.connection": 5}),
)
TRANSACTIONAL: Final = ClientProfile(
    "transactional",
    "exactly_once",
    "transactional producer (idempotent, one transactional.id per producer) and read_committed "
    "consumers: exactly-once consume-transform-produce (O6).",
    producer=_pairs({"enable.idempotence": True, "acks": "all"}),
    consumer=_pairs({"isolation.level": "read_committed"}),
)
PROFILES: Final[Mapping[str, ClientProfile]] = MappingProxyType(
    {p.name: p for p in (FIRE_AND_FORGET, ACKS1, AT_LEAST_ONCE, IDEMPOTENT, TRANSACTIONAL)}
)


def profile(name: str) -> ClientProfile:
    """A built-in client profile by name."""
    try:
        return PROFILES[name]
    except KeyError:
        raise ConfigError(f"client profile: expected one of {', '.join(PROFILES)}; got {name!r}") from None


def custom_profile(
    name: str,
    guarantee: Guarantee,
    producer: Mapping[str, ConfigValue],
    consumer: Mapping[str, ConfigValue] | None = None,
    description: str = "user-supplied configuration",
) -> ClientProfile:
    """A user-supplied configuration (e.g. a team's own client settings) and the guarantee it claims."""
    return ClientProfile(
        name,
        guarantee,
        description,
        producer=tuple(producer.items()),
        consumer=tuple((consumer or {}).items()),
    )
