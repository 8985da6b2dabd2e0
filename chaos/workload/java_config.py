"""One configuration, two clients: a librdkafka producer's or group member's configuration (what the variant
and the profiles give) as the Java client's properties.

The same key where both clients have it; a renamed one with its origin saying so (``message.timeout.ms`` is
``delivery.timeout.ms``; ``socket.timeout.ms``, librdkafka's client-side bound of a request, is the Java
client's ``request.timeout.ms``, which it also sends as a produce request's ack timeout — librdkafka's own
broker-side ``request.timeout.ms`` is then left out); a key with no Java counterpart left out with the reason
(the run notes it); a key neither table knows refused, naming it; librdkafka's default kept where the Java
client's differs and the configuration is silent, so a profile claims the same guarantee on both clients.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from chaos.errors import ConfigError
from chaos.run.profiles import ConfigValue
from chaos.workload.effective import ClientConfig

_SHARED: Final = (
    "bootstrap.servers",
    "client.id",
    "retry.backoff.ms",
    "retry.backoff.max.ms",
    "socket.connection.setup.timeout.ms",
    "socket.connection.setup.timeout.max.ms",
    "reconnect.backoff.ms",
    "reconnect.backoff.max.ms",
    "metadata.max.age.ms",
)
_TIMEOUTS: Final[Mapping[str, str]] = {
    "socket.timeout.ms": "request.timeout.ms",
    "request.timeout.ms": "request.timeout.ms",
    "topic.metadata.refresh.interval.ms": "metadata.max.age.ms",
}
PRODUCER_KEYS: Final[Mapping[str, str]] = {
    **{
        key: key
        for key in (
            *_SHARED,
            "acks",
            "enable.idempotence",
            "retries",
            "max.in.flight.requests.per.connection",
            "transactional.id",
            "transaction.timeout.ms",
            "linger.ms",
            "batch.size",
            "compression.type",
            "delivery.timeout.ms",
        )
    },
    **_TIMEOUTS,
    "message.timeout.ms": "delivery.timeout.ms",
    "queue.buffering.max.ms": "linger.ms",
    "compression.codec": "compression.type",
}
"""librdkafka producer key -> the Java producer's key."""
MEMBER_KEYS: Final[Mapping[str, str]] = {
    **{
        key: key
        for key in (
            *_SHARED,
            "group.id",
            "group.instance.id",
            "group.protocol",
            "group.remote.assignor",
            "session.timeout.ms",
            "heartbeat.interval.ms",
            "max.poll.interval.ms",
            "auto.offset.reset",
            "isolation.level",
            "enable.auto.commit",
            "auto.commit.interval.ms",
            "fetch.min.bytes",
            "fetch.max.bytes",
            "max.partition.fetch.bytes",
            "partition.assignment.strategy",
        )
    },
    **_TIMEOUTS,
    "fetch.wait.max.ms": "fetch.max.wait.ms",
}
"""librdkafka consumer key -> the Java consumer's key."""
_LEFT_OUT: Final[Mapping[str, str]] = {
    "api.version.request": "the Java client always asks",
    "broker.address.family": "the JVM's resolver decides",
    "enable.auto.offset.store": "the Java client keeps no offset store: the worker commits by its strategy",
}
_PRODUCER_DEFAULTS: Final[Mapping[str, str]] = {"enable.idempotence": "false"}
_ASSIGNORS: Final[Mapping[str, str]] = {
    "range": "org.apache.kafka.clients.consumer.RangeAssignor",
    "roundrobin": "org.apache.kafka.clients.consumer.RoundRobinAssignor",
    "cooperative-sticky": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
}


@dataclass(frozen=True)
class JavaConfig:
    """A client's configuration for the Java client: ``settings`` as handed to it, ``origins`` per key (the
    librdkafka key's origin, with the key it came from), ``dropped``: librdkafka key -> why it is left out."""

    settings: Mapping[str, str]
    origins: Mapping[str, str]
    dropped: Mapping[str, str]


JAVA_LINGER_MS: Final = 5
"""The Java producer's ``linger.ms`` default (Kafka 4.0 on)."""


def java_producer_config(config: ClientConfig) -> JavaConfig:
    """The Java producer's configuration for a librdkafka producer's (see the module docstring).

    The Java producer refuses a ``delivery.timeout.ms`` below ``linger.ms + request.timeout.ms``, a bound
    librdkafka does not have (a transactional profile's ``message.timeout.ms`` is capped at
    ``transaction.timeout.ms``, which can equal the request timeout): it is then raised to that sum, its
    origin saying so."""
    java = _translate(config, PRODUCER_KEYS, _PRODUCER_DEFAULTS)
    settings, origins = dict(java.settings), dict(java.origins)
    delivery, request = settings.get("delivery.timeout.ms"), settings.get("request.timeout.ms")
    if delivery is not None and request is not None:
        floor = int(settings.get("linger.ms", JAVA_LINGER_MS)) + int(request)
        if int(delivery) < floor:
            settings["delivery.timeout.ms"] = str(floor)
            origins["delivery.timeout.ms"] = (
                f"harness: raised from {delivery} to linger.ms + request.timeout.ms, the Java producer's "
                f"lower bound (was: {origins['delivery.timeout.ms']})"
            )
    return JavaConfig(settings, origins, java.dropped)


def java_member_config(config: ClientConfig) -> JavaConfig:
    """The Java consumer's configuration for a librdkafka group member's (see the module docstring)."""
    return _translate(config, MEMBER_KEYS, {}, {"partition.assignment.strategy": _assignors})


def _assignors(value: str) -> str:
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in _ASSIGNORS]
    if unknown:
        raise ConfigError(
            f"partition.assignment.strategy: no Java assignor for {', '.join(unknown)} (known: "
            f"{', '.join(_ASSIGNORS)})"
        )
    return ",".join(_ASSIGNORS[name] for name in names)


def _java_value(value: ConfigValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _translate(
    config: ClientConfig,
    keys: Mapping[str, str],
    defaults: Mapping[str, str],
    values: Mapping[str, Callable[[str], str]] | None = None,
) -> JavaConfig:
    settings: dict[str, str] = {}
    origins: dict[str, str] = {}
    dropped: dict[str, str] = {}
    for key, value in config.settings.items():
        if key == "request.timeout.ms" and "socket.timeout.ms" in config.settings:
            dropped[key] = (
                "librdkafka's broker-side ack timeout; the Java client's request.timeout.ms, from "
                "socket.timeout.ms, bounds the request and is sent as its ack timeout"
            )
            continue
        if key in _LEFT_OUT:
            dropped[key] = _LEFT_OUT[key]
            continue
        java_key = keys.get(key)
        if java_key is None:
            raise ConfigError(
                f"{config.role} {config.process}: librdkafka's {key!r} (from {config.origins[key]}) has no "
                f"Java client equivalent the harness knows\n  fix: drop it, or run this worker on librdkafka "
                f"(keys it translates: {', '.join(sorted(keys))})"
            )
        text = _java_value(value)
        settings[java_key] = (values or {}).get(java_key, str)(text)
        origins[java_key] = config.origins[key] + ("" if java_key == key else f" (as librdkafka's {key})")
    for key, value in defaults.items():
        if key not in settings:
            settings[key] = value
            origins[key] = "harness: librdkafka's default, which the Java client's differs from"
    return JavaConfig(settings, origins, dropped)
