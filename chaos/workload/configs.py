"""The client configuration builders: confluent-kafka configuration dicts from a client profile and a
time profile.

The profiles themselves live in :mod:`chaos.run.profiles` (one registry, which the cluster reads too) and
are re-exported here. The builders (:func:`producer_config`, :func:`consumer_config`,
:func:`admin_config`) always set bounded timeouts: librdkafka's defaults (e.g. ``message.timeout.ms`` =
300 s) make a chaos test hang. The producer and consumer configurations they return are librdkafka's
choice too: one it refuses raises :class:`~chaos.workload.clientconf.ClientConfigError` naming the key,
before any client starts (:mod:`chaos.workload.clientconf`, about a millisecond). :func:`producer_layers`
and :func:`consumer_layers` build the same dicts with the origin of every key (what the run records as a
client's effective configuration: :mod:`chaos.workload.effective`).
"""

from __future__ import annotations

from collections.abc import Mapping

from chaos.errors import ConfigError
from chaos.run.profiles import (
    ACKS1,
    AT_LEAST_ONCE,
    BROKER_MIN_SESSION_TIMEOUT_MS,
    CI,
    CI_SCALE,
    CLASSIC_ONLY_CONSUMER_KEYS,
    FAITHFUL,
    FAITHFUL_MS,
    FIRE_AND_FORGET,
    IDEMPOTENT,
    PROFILES,
    RESERVED_KEYS,
    TIME_PROFILES,
    TRANSACTIONAL,
    ClientProfile,
    ConfigItems,
    ConfigValue,
    TimeProfile,
    config_items,
    custom_profile,
    group_protocol_of,
    profile,
    time_profile,
)
from chaos.run.terms import Guarantee
from chaos.workload.clientconf import Side, check_client_config
from chaos.workload.effective import HARNESS, Layers, client_origin, time_origin

__all__ = [
    "ACKS1",
    "AT_LEAST_ONCE",
    "BROKER_MIN_SESSION_TIMEOUT_MS",
    "CI",
    "CI_SCALE",
    "FAITHFUL",
    "FAITHFUL_MS",
    "FIRE_AND_FORGET",
    "IDEMPOTENT",
    "PROFILES",
    "RESERVED_KEYS",
    "TIME_PROFILES",
    "TRANSACTIONAL",
    "ClientProfile",
    "ConfigItems",
    "ConfigValue",
    "Guarantee",
    "TimeProfile",
    "admin_config",
    "config_items",
    "consumer_config",
    "consumer_layers",
    "custom_profile",
    "producer_config",
    "producer_layers",
    "profile",
    "time_profile",
]


def _common(bootstrap_servers: str, client_id: str, time: TimeProfile) -> Layers:
    if not bootstrap_servers:
        raise ConfigError("bootstrap_servers: expected 'host:port[,host:port]'; got an empty string")
    return (
        Layers()
        .put(HARNESS, {"bootstrap.servers": bootstrap_servers, "client.id": client_id})
        .put(
            time_origin(time.name),
            {
                "socket.timeout.ms": time.socket_timeout_ms,
                "socket.connection.setup.timeout.ms": time.socket_connection_setup_timeout_ms,
                # A dead or cut broker must not stall reconnects for long: cap the backoff below the request
                # timeout.
                "reconnect.backoff.max.ms": min(10_000, time.request_timeout_ms),
            },
        )
    )


def producer_layers(
    client: ClientProfile,
    bootstrap_servers: str,
    client_id: str,
    time: TimeProfile = CI,
    overrides: Mapping[str, ConfigValue] | None = None,
    owner: str | None = None,
) -> Layers:
    """:func:`producer_config`'s dict with the origin of each key (:mod:`chaos.workload.effective`);
    ``owner`` names the overrides' origin (default ``overrides of <client_id>``)."""
    layers = _common(bootstrap_servers, client_id, time)
    layers.put(
        time_origin(time.name),
        {"message.timeout.ms": time.message_timeout_ms, "request.timeout.ms": time.request_timeout_ms},
    )
    layers.put(client_origin(client.name), client.producer_settings)
    if client.transactional:
        layers.default(HARNESS, "transactional.id", f"chaos-{client_id}")
        limit = int(
            layers.default(time_origin(time.name), "transaction.timeout.ms", time.transaction_timeout_ms)
        )
        if int(layers.settings["message.timeout.ms"]) > limit:
            layers.put(
                f"{HARNESS}: message.timeout.ms <= transaction.timeout.ms", {"message.timeout.ms": limit}
            )
    return _overridden(layers, "producer", client, client_id, overrides, owner)


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
    Raises :class:`~chaos.workload.clientconf.ClientConfigError` when librdkafka refuses the result.
    """
    return producer_layers(client, bootstrap_servers, client_id, time, overrides).settings


def consumer_layers(
    client: ClientProfile,
    bootstrap_servers: str,
    client_id: str,
    group_id: str,
    time: TimeProfile = CI,
    overrides: Mapping[str, ConfigValue] | None = None,
    owner: str | None = None,
) -> Layers:
    """:func:`consumer_config`'s dict with the origin of each key (:mod:`chaos.workload.effective`);
    ``owner`` names the overrides' origin (default ``overrides of <client_id>``)."""
    layers = _common(bootstrap_servers, client_id, time)
    layers.put(HARNESS, {"group.id": group_id})
    timeouts: dict[str, ConfigValue] = {
        "session.timeout.ms": time.session_timeout_ms,
        "heartbeat.interval.ms": time.heartbeat_interval_ms,
        "max.poll.interval.ms": time.max_poll_interval_ms,
    }
    if (
        group_protocol_of({**client.consumer_settings, **dict(overrides or {})}) == "consumer"
    ):  # the broker sets session and heartbeat: the profile's broker side
        timeouts = {k: v for k, v in timeouts.items() if k not in CLASSIC_ONLY_CONSUMER_KEYS}
    layers.put(time_origin(time.name), timeouts)
    layers.put(HARNESS, {"auto.offset.reset": "earliest", "isolation.level": "read_uncommitted"})
    layers.put(client_origin(client.name), client.consumer_settings)
    return _overridden(layers, "consumer", client, client_id, overrides, owner)


def _overridden(
    layers: Layers,
    side: Side,
    client: ClientProfile,
    client_id: str,
    overrides: Mapping[str, ConfigValue] | None,
    owner: str | None,
) -> Layers:
    """``layers`` with the worker's ``overrides`` on top (their origin ``owner``, default ``overrides of
    <client_id>``), checked as librdkafka would check the result."""
    layers.put(
        owner or f"overrides of {client_id}",
        dict(config_items(f"{side}_config", "overrides", dict(overrides or {}))),
    )
    check_client_config(side, layers.settings, f"{side} {client_id} (client profile {client.name})")
    return layers


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
    Raises :class:`~chaos.workload.clientconf.ClientConfigError` when librdkafka refuses the result.
    """
    return consumer_layers(client, bootstrap_servers, client_id, group_id, time, overrides).settings


def admin_config(bootstrap_servers: str, client_id: str, time: TimeProfile = CI) -> dict[str, ConfigValue]:
    """An AdminClient configuration with bounded socket timeouts."""
    return _common(bootstrap_servers, client_id, time).settings
