"""The run context: what every worker of one run shares — Jepsen's ``test`` map, handed to every call.

A worker (producer, group member, reader, drain, sampler, probe, transactional worker) takes a
:class:`RunContext` and only its own options: the run id its events carry, the bootstrap servers, the run's
topic and group, its time and client profiles, and the sink its events go to come from the context. A
child-process worker receives the context as JSON (:meth:`RunContext.to_data`, without the sink: a child
writes its events to its pipe) and rebuilds it with :meth:`RunContext.from_data`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from chaos.errors import ConfigError
from chaos.run.events import NAME_PATTERN, Event
from chaos.run.profiles import CI, ClientProfile, TimeProfile

Sink = Callable[[Event], None]
"""Where workload events go: the run's recorder in-process, a pipe writer in a child process."""

_TOPIC: Final = re.compile(r"[A-Za-z0-9._\-]{1,249}")


def bootstrap_addresses(bootstrap_servers: str) -> list[tuple[str, int]]:
    """``host:port,host:port`` -> [(host, port), ...]; a malformed entry raises :class:`ConfigError`."""
    addresses = []
    for entry in bootstrap_servers.split(","):
        host, sep, port = entry.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ConfigError(f"bootstrap.servers entry {entry!r}: expected host:port")
        addresses.append((host, int(port)))
    if not addresses:
        raise ConfigError("bootstrap.servers is empty")
    return addresses


@dataclass(frozen=True)
class RunContext:
    """One run as its workers see it. Frozen and validated; ``dataclasses.replace`` derives a variant
    (another sink, another client profile for one worker).

    :param run_id: carried by every event and every produced value id (``[A-Za-z0-9_.-]``).
    :param bootstrap_servers: ``host:port[,host:port]`` of the cluster (its proxies).
    :param topic: the run's topic: what producers write, members read and the drain audits, unless a
        worker's spec names another one.
    :param group: the run's consumer group.
    :param client: the client profile (settings and the guarantee they claim).
    :param sink: where events go.
    :param time: the time profile that scales every client timeout.
    :param run_dir: the run's directory, when it has one.
    :param seed: the run's seed (fault plans), when it has one.
    """

    run_id: str
    bootstrap_servers: str
    topic: str
    group: str
    client: ClientProfile
    sink: Sink
    time: TimeProfile = CI
    run_dir: Path | None = None
    seed: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.run_id, str) or re.fullmatch(NAME_PATTERN, self.run_id) is None:
            raise ConfigError(
                f"RunContext.run_id: expected 1-128 characters of [A-Za-z0-9_.-]; got {self.run_id!r}"
            )
        if not isinstance(self.bootstrap_servers, str) or not self.bootstrap_servers.strip():
            raise ConfigError(
                "RunContext.bootstrap_servers: expected 'host:port[,host:port]' (the cluster's "
                f"bootstrap_servers, once it is started); got {self.bootstrap_servers!r}"
            )
        bootstrap_addresses(self.bootstrap_servers)
        if not isinstance(self.topic, str) or _TOPIC.fullmatch(self.topic) is None:
            raise ConfigError(
                f"RunContext.topic: expected a Kafka topic name (1-249 of [A-Za-z0-9._-]); got {self.topic!r}"
            )
        if not isinstance(self.group, str) or not self.group:
            raise ConfigError(f"RunContext.group: expected a non-empty group id; got {self.group!r}")
        if not isinstance(self.client, ClientProfile):
            raise ConfigError(
                f"RunContext.client: expected a ClientProfile (e.g. chaos.workload.IDEMPOTENT); "
                f"got {self.client!r}"
            )
        if not callable(self.sink):
            raise ConfigError(f"RunContext.sink: expected a callable taking an Event; got {self.sink!r}")
        if not isinstance(self.time, TimeProfile):
            raise ConfigError(
                f"RunContext.time: expected a TimeProfile (chaos.workload.CI or FAITHFUL); got {self.time!r}"
            )
        if self.run_dir is not None:
            if not isinstance(self.run_dir, str | os.PathLike):
                raise ConfigError(f"RunContext.run_dir: expected a path or None; got {self.run_dir!r}")
            object.__setattr__(self, "run_dir", Path(self.run_dir))
        if self.seed is not None and (type(self.seed) is not int):
            raise ConfigError(f"RunContext.seed: expected an int or None; got {self.seed!r}")

    def to_data(self) -> dict[str, Any]:
        """Everything but the sink, as JSON-able data (for a child process)."""
        return {
            "run_id": self.run_id,
            "bootstrap_servers": self.bootstrap_servers,
            "topic": self.topic,
            "group": self.group,
            "client": self.client.to_data(),
            "time": self.time.to_data(),
            "run_dir": str(self.run_dir) if self.run_dir is not None else None,
            "seed": self.seed,
        }

    @classmethod
    def from_data(cls, data: Mapping[str, Any], sink: Sink) -> RunContext:
        """The context :meth:`to_data` described, with ``sink``."""
        try:
            return cls(
                run_id=data["run_id"],
                bootstrap_servers=data["bootstrap_servers"],
                topic=data["topic"],
                group=data["group"],
                client=ClientProfile.from_data(data["client"]),
                sink=sink,
                time=TimeProfile.from_data(data["time"]),
                run_dir=data.get("run_dir"),
                seed=data.get("seed"),
            )
        except (KeyError, TypeError) as exc:
            raise ConfigError(f"RunContext: not RunContext.to_data() output: missing or bad {exc}") from None
