"""What each client of a run really runs with: the final configuration dict handed to confluent-kafka's
``Producer`` / ``Consumer`` and, per key, the layer that set it last.

The builders (:mod:`chaos.workload.configs`) lay a configuration out in :class:`Layers` — the harness's
defaults, the time profile's bounded timeouts, the client profile (a scenario variant's settings arrive
through it), the worker's overrides — and the workers add what they force (a member's commit strategy, the
transactional worker's ``read_committed``…). Callbacks (``logger``, ``error_cb``, ``on_commit``…) are not
configuration and are never part of it.

Every worker *announces* its clients' :class:`ClientConfig` when it is built (:func:`announce`), in the
process that builds it: a child-process worker's clients are announced by its parent, which computes the
very dict the child builds (the same function over the same spec and context, handed to the child as its
payload). The run that owns ``run_id`` takes them when it ends (:func:`take_announced`) and writes them,
redacted, into its ``scenario.json`` — nothing here writes a file, so no secret leaves the process from here.

librdkafka's own view (``debug=conf`` logs "Client configuration" at creation) lists only the properties
that were set, under librdkafka's names (``queue.buffering.max.ms`` for ``linger.ms``, ``auto.offset.reset
= smallest``), without what they imply: it holds nothing this dict does not, so the dict is the record.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal

from chaos.errors import ConfigError
from chaos.run.context import RunContext
from chaos.run.manifest import CLIENT_ROLES, ClientRole
from chaos.run.profiles import ConfigValue

CONSUMER_ROLES: Final = frozenset({"member", "transform_consumer"})

HARNESS: Final = "harness"
"""Set by the harness itself: bootstrap servers, client id, the run's group, the consumer's defaults."""
MAX_RUNS: Final = 64
"""Runs whose announced clients are kept until taken (the oldest run is forgotten beyond this)."""


def time_origin(profile: str) -> str:
    return f"time profile {profile}"


def client_origin(profile: str) -> str:
    return f"client profile {profile}"


class Layers:
    """A configuration built in layers: each key's value and the origin of the layer that set it last."""

    def __init__(self) -> None:
        self.settings: dict[str, ConfigValue] = {}
        self.origins: dict[str, str] = {}

    def put(self, origin: str, settings: Mapping[str, ConfigValue]) -> Layers:
        """Set every key of ``settings`` (over what an earlier layer set), with ``origin``."""
        for key, value in settings.items():
            self.settings[key] = value
            self.origins[key] = origin
        return self

    def default(self, origin: str, key: str, value: ConfigValue) -> ConfigValue:
        """Set ``key`` unless a layer already did; its value now."""
        if key not in self.settings:
            self.put(origin, {key: value})
        return self.settings[key]

    def client(self, process: str, role: ClientRole, profile: str) -> ClientConfig:
        """The configuration so far as the :class:`ClientConfig` of one client."""
        return ClientConfig(process, role, profile, dict(self.settings), dict(self.origins))


@dataclass(frozen=True)
class ClientConfig:
    """One client's effective configuration.

    :param process: the worker's actor name (a transform's two clients share it).
    :param role: ``producer``, ``member`` (a consumer-group member), ``transform_producer`` or
        ``transform_consumer`` (the two clients of a transactional / at-least-once transform).
    :param profile: the name of the client profile the worker ran with (the variant's, unless the worker
        was handed another one).
    :param settings: the dict handed to the client, callbacks excluded.
    :param origins: per key of ``settings``, who set it (:data:`HARNESS`, ``time profile ci``, ``client
        profile …``, ``overrides of …``, ``commit strategy …``, ``transactional worker``…).
    """

    process: str
    role: ClientRole
    profile: str
    settings: Mapping[str, ConfigValue]
    origins: Mapping[str, str]

    def __post_init__(self) -> None:
        if not isinstance(self.process, str) or not self.process:
            raise ConfigError(f"ClientConfig.process: expected a worker name; got {self.process!r}")
        if self.role not in CLIENT_ROLES:
            raise ConfigError(
                f"ClientConfig.role: expected one of {', '.join(CLIENT_ROLES)}; got {self.role!r}"
            )
        if set(self.origins) != set(self.settings):
            raise ConfigError(
                f"ClientConfig {self.process}: every setting needs its origin and only those; "
                f"settings {sorted(self.settings)}, origins {sorted(self.origins)}"
            )
        object.__setattr__(self, "settings", MappingProxyType(dict(self.settings)))
        object.__setattr__(self, "origins", MappingProxyType(dict(self.origins)))

    @property
    def side(self) -> Literal["producer", "consumer"]:
        return "consumer" if self.role in CONSUMER_ROLES else "producer"

    def forced(self, origin: str, settings: Mapping[str, ConfigValue]) -> ClientConfig:
        """This configuration with ``settings`` forced over it by ``origin`` (a worker's own settings)."""
        layers = Layers()
        layers.settings, layers.origins = dict(self.settings), dict(self.origins)
        return layers.put(origin, settings).client(self.process, self.role, self.profile)


_lock = threading.Lock()
_runs: dict[str, list[ClientConfig]] = {}


def announce(context: RunContext, *configs: ClientConfig) -> None:
    """Record that a worker of ``context``'s run builds clients with ``configs`` (an identical
    configuration of the same worker and role is kept once)."""
    with _lock:
        known = _runs.pop(context.run_id, [])
        _runs[context.run_id] = known  # most recently announced run last
        for config in configs:
            if config not in known:
                known.append(config)
        while len(_runs) > MAX_RUNS:
            del _runs[next(iter(_runs))]


def announced(run_id: str) -> tuple[ClientConfig, ...]:
    """The clients announced for ``run_id`` so far, in announcement order."""
    with _lock:
        return tuple(_runs.get(run_id, ()))


def take_announced(run_id: str) -> tuple[ClientConfig, ...]:
    """The clients announced for ``run_id``, forgotten here (the run records them)."""
    with _lock:
        return tuple(_runs.pop(run_id, ()))
