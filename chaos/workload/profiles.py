"""Named client profiles and time profiles that build confluent-kafka configuration dicts.

A :class:`ClientProfile` is a named producer (and, where it matters, consumer) configuration plus the
delivery guarantee it claims; the audit judges a run against that claim. A :class:`TimeProfile` scales
every client timeout by one factor, keeping their ratios (DESIGN.md, "Time"). The builders
(:func:`producer_config`, :func:`consumer_config`, :func:`admin_config`) always set bounded timeouts:
librdkafka's defaults (e.g. ``message.timeout.ms`` = 300 s) make a chaos test hang.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from chaos.errors import ConfigError
from chaos.run.terms import GUARANTEES
from chaos.run.terms import Guarantee as Guarantee  # re-exported by chaos.workload

ConfigValue = str | int | float | bool
ConfigItems = tuple[tuple[str, ConfigValue], ...]

# Keys the workload sets itself; a profile or user configuration must not set them.
RESERVED_KEYS: Final = frozenset(
    {"bootstrap.servers", "on_delivery", "error_cb", "logger", "on_commit", "stats_cb", "throttle_cb"}
)

# The seed's (Java client) defaults, in milliseconds: the `faithful` profile. librdkafka has no
# default.api.timeout.ms: `api_timeout_ms` is the timeout the workload passes to each blocking call.
FAITHFUL_MS: Final[Mapping[str, int]] = {
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

BROKER_MIN_SESSION_TIMEOUT_MS: Final = 6_000  # Kafka's group.min.session.timeout.ms default
CI_SCALE: Final = 0.2  # the smallest round factor that keeps session.timeout.ms above the broker minimum


@dataclass(frozen=True)
class TimeProfile:
    """Client timeouts: the seed's defaults (:data:`FAITHFUL_MS`) times ``scale``, ratios kept.

    ``scale`` must keep ``session.timeout.ms`` at or above the broker's ``group.min.session.timeout.ms``
    (6000 ms by default), so it is at least 6000 / 45000 ≈ 0.134.
    """

    name: str
    scale: float

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

    def ms(self, name: str) -> int:
        """One scaled timeout in milliseconds, by its :data:`FAITHFUL_MS` key."""
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


FAITHFUL: Final = TimeProfile("faithful", 1.0)
CI: Final = TimeProfile("ci", CI_SCALE)
TIME_PROFILES: Final[Mapping[str, TimeProfile]] = {"faithful": FAITHFUL, "ci": CI}


def time_profile(name: str) -> TimeProfile:
    """The named time profile (``ci`` or ``faithful``)."""
    try:
        return TIME_PROFILES[name]
    except KeyError:
        raise ConfigError(f"time profile: expected one of {', '.join(TIME_PROFILES)}; got {name!r}") from None


def _items(owner: str, name: str, value: object) -> ConfigItems:
    if isinstance(value, Mapping):
        pairs = tuple(value.items())
    elif isinstance(value, tuple):
        pairs = value
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
        object.__setattr__(self, "producer", _items("ClientProfile", "producer", self.producer))
        object.__setattr__(self, "consumer", _items("ClientProfile", "consumer", self.consumer))
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
PROFILES: Final[Mapping[str, ClientProfile]] = {
    p.name: p for p in (FIRE_AND_FORGET, ACKS1, AT_LEAST_ONCE, IDEMPOTENT, TRANSACTIONAL)
}


def profile(name: str) -> ClientProfile:
    """A built-in profile by name."""
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


def _common(bootstrap_servers: str, client_id: str, time: TimeProfile) -> dict[str, ConfigValue]:
    if not bootstrap_servers:
        raise ConfigError("bootstrap_servers: expected 'host:port[,host:port]'; got an empty string")
    return {
        "bootstrap.servers": bootstrap_servers,
        "client.id": client_id,
        "socket.timeout.ms": time.socket_timeout_ms,
        "socket.connection.setup.timeout.ms": time.socket_connection_setup_timeout_ms,
        # A dead or cut broker must not stall reconnects for long: cap the backoff below the request timeout.
        "reconnect.backoff.max.ms": min(10_000, time.request_timeout_ms),
    }


def producer_config(
    client: ClientProfile,
    bootstrap_servers: str,
    client_id: str,
    time: TimeProfile = CI,
    overrides: Mapping[str, ConfigValue] | None = None,
) -> dict[str, ConfigValue]:
    """A confluent-kafka Producer configuration: bounded timeouts, then the profile, then ``overrides``.

    A transactional profile gets a ``transactional.id`` unique to ``client_id`` unless one is given, and
    ``message.timeout.ms`` no larger than ``transaction.timeout.ms`` (librdkafka refuses otherwise).
    """
    config = _common(bootstrap_servers, client_id, time)
    config.update(
        {
            "message.timeout.ms": time.message_timeout_ms,
            "request.timeout.ms": time.request_timeout_ms,
        }
    )
    config.update(client.producer_settings)
    if client.transactional:
        config.setdefault("transactional.id", f"chaos-{client_id}")
        config.setdefault("transaction.timeout.ms", time.transaction_timeout_ms)
        config["message.timeout.ms"] = min(
            int(config["message.timeout.ms"]), int(config["transaction.timeout.ms"])
        )
    config.update(_items("producer_config", "overrides", dict(overrides or {})))
    return config


def consumer_config(
    client: ClientProfile,
    bootstrap_servers: str,
    client_id: str,
    group_id: str,
    time: TimeProfile = CI,
    overrides: Mapping[str, ConfigValue] | None = None,
) -> dict[str, ConfigValue]:
    """A confluent-kafka Consumer configuration: bounded group timeouts, then the profile, then overrides.

    ``isolation.level`` is set explicitly (librdkafka defaults to read_committed, Java to read_uncommitted):
    read_committed only for the transactional profile unless the profile or overrides say otherwise.
    """
    config = _common(bootstrap_servers, client_id, time)
    config.update(
        {
            "group.id": group_id,
            "session.timeout.ms": time.session_timeout_ms,
            "heartbeat.interval.ms": time.heartbeat_interval_ms,
            "max.poll.interval.ms": time.max_poll_interval_ms,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_uncommitted",
        }
    )
    config.update(client.consumer_settings)
    config.update(_items("consumer_config", "overrides", dict(overrides or {})))
    return config


def admin_config(bootstrap_servers: str, client_id: str, time: TimeProfile = CI) -> dict[str, ConfigValue]:
    """An AdminClient configuration with bounded socket timeouts."""
    return _common(bootstrap_servers, client_id, time)
