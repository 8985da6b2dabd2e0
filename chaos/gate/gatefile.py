"""The resilience gate's file: a team's own client and broker configuration, the guarantee it claims, the
catalog cases to run, the time profile, the thresholds per fault window, retries and the baseline tolerance.

A TOML file (stdlib :mod:`tomllib`), documented key by key in ``docs/gate.md``. Producer and consumer
settings are librdkafka settings, given inline (``[producer.settings]``) or in a Java ``.properties`` file
(``[producer] file = ...``, relative to the gate file; inline settings override the file's). Every value
keeps where it came from (:class:`Origin`: file and line), so an error or a lint finding can point at it.
Unknown keys are errors — a typo is never ignored — and every error names the file, the key, the line
when known, and the fix.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import re
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Literal, cast, get_args

from chaos import versions
from chaos.errors import ConfigError
from chaos.gate.servicetable import SERVICE_KEYS, GateService, read_service
from chaos.run.terms import GUARANTEES, Guarantee
from chaos.workload.clientconf import librdkafka_value
from chaos.workload.traffic import Traffic

Side = Literal["producer", "consumer"]
Commit = Literal["auto", "after_processing", "before_processing", "transaction"]
COMMITS: Final[tuple[str, ...]] = get_args(Commit)
TimeProfileName = Literal["ci", "faithful"]
TIME_PROFILES: Final[tuple[str, ...]] = get_args(TimeProfileName)
CASE_ID: Final = re.compile(r"[A-Z]{1,4}[0-9]{1,2}")
MAX_RETRIES: Final = 5
NOT_SET_SOURCE: Final = "not set"
"""The :class:`Origin` source of a placeholder for a setting nobody gave and nothing defaults."""

ALIASES: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {
        "acks": ("acks", "request.required.acks"),
        "retries": ("retries", "message.send.max.retries"),
        "max.in.flight.requests.per.connection": ("max.in.flight.requests.per.connection", "max.in.flight"),
        "linger.ms": ("linger.ms", "queue.buffering.max.ms"),
        "message.timeout.ms": ("message.timeout.ms", "delivery.timeout.ms"),
        "bootstrap.servers": ("bootstrap.servers", "metadata.broker.list"),
        "sasl.mechanisms": ("sasl.mechanisms", "sasl.mechanism"),
        "compression.type": ("compression.type", "compression.codec"),
    }
)
"""librdkafka's aliases: canonical name -> every name of the same setting (CONFIGURATION.md)."""
_CANONICAL: Final = {name: canonical for canonical, names in ALIASES.items() for name in names}

IGNORED_KEYS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "bootstrap.servers": "the gate runs the client against its own cluster",
        "key.serializer": "a Java client class; librdkafka sends bytes",
        "value.serializer": "a Java client class; librdkafka sends bytes",
        "key.deserializer": "a Java client class; librdkafka returns bytes",
        "value.deserializer": "a Java client class; librdkafka returns bytes",
    }
)
"""Keys a team's ``.properties`` file holds that the gate does not pass to librdkafka (shown as notes)."""
HARNESS_KEYS: Final = frozenset(
    {"logger", "error_cb", "on_delivery", "on_commit", "stats_cb", "throttle_cb", "oauth_cb", "log_cb"}
)
"""confluent-kafka callback settings: the harness sets them itself."""
_SECRET: Final = re.compile(r"password|secret|jaas|token|\.pem$|credentials", re.IGNORECASE)

LOG_POLICY_KEYS: Final[tuple[str, ...]] = (
    "cleanup.policy",
    "retention.ms",
    "retention.bytes",
    "segment.bytes",
    "segment.ms",
    "max.message.bytes",
    "min.compaction.lag.ms",
    "delete.retention.ms",
)
"""The topic's log policy and record size limit: handed to every case's run topic when the file gives them
(the broker's defaults otherwise)."""
TOPIC_KEYS: Final[tuple[str, ...]] = (
    "replication_factor",
    "min.insync.replicas",
    "unclean.leader.election.enable",
    *LOG_POLICY_KEYS,
)
TOPIC_DEFAULTS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "replication_factor": "1",
        "min.insync.replicas": "1",
        "unclean.leader.election.enable": "false",
        "cleanup.policy": "delete",
        "retention.ms": "604800000",
        "retention.bytes": "-1",
        "segment.bytes": "1073741824",
        "segment.ms": "604800000",
        "max.message.bytes": "1048588",
        "min.compaction.lag.ms": "0",
        "delete.retention.ms": "86400000",
    }
)
"""Kafka's own defaults (``default.replication.factor``, ``min.insync.replicas``, unclean election, and the
log policy: delete after 7 days, 1 GiB or 7-day segments, 1 MiB batches, tombstones kept a day)."""
CLEANUP_POLICIES: Final[tuple[str, ...]] = ("delete", "compact", "compact,delete")
MIN_SEGMENT_BYTES: Final = 1024 * 1024
"""Kafka 4.0 and later refuse a ``segment.bytes`` below 1 MiB (3.9 took 14 bytes)."""
MAX_INT32: Final = 2**31 - 1
_TOPIC_NUMBERS: Final[Mapping[str, tuple[int, int, str]]] = MappingProxyType(
    {
        "replication_factor": (1, 1000, "an integer >= 1"),
        "min.insync.replicas": (1, 1000, "an integer >= 1"),
        "retention.ms": (-1, 2**63 - 1, "milliseconds >= 0, or -1 (keep forever)"),
        "retention.bytes": (-1, 2**63 - 1, "bytes per partition >= 0, or -1 (no size limit)"),
        "segment.bytes": (
            MIN_SEGMENT_BYTES,
            MAX_INT32,
            f"bytes, {MIN_SEGMENT_BYTES}..{MAX_INT32} (Kafka 4 refuses segments under 1 MiB)",
        ),
        "segment.ms": (1, 2**63 - 1, "milliseconds >= 1"),
        "max.message.bytes": (0, MAX_INT32, f"bytes of one record batch, 0..{MAX_INT32}"),
        "min.compaction.lag.ms": (0, 2**63 - 1, "milliseconds >= 0"),
        "delete.retention.ms": (0, 2**63 - 1, "milliseconds >= 0"),
    }
)
"""Each numeric topic key: its lowest and highest value Kafka accepts, and the words for it."""
TRAFFIC_KEYS: Final[tuple[str, ...]] = (
    "size",
    "sizes",
    "keys",
    "keyless",
    "key_skew",
    "zipf_s",
    "headers",
    "tombstones",
    "rate",
    "burst",
)
STEADY_S: Final = 3600.0
"""The step length of a steady ``[traffic] rate`` (longer than any case's producer)."""
THRESHOLD_KEYS: Final[tuple[str, ...]] = (
    "longest_outage_s",
    "p99_ack_latency_ms",
    "heal_to_first_ack_s",
    "heal_to_first_delivery_s",
    "duplicates",
    "duplicate_rate",
    "max_consume_gap_s",
    "p99_e2e_latency_ms",
    "max_handover_s",
)


class GateFileError(ConfigError):
    """The gate file, or a ``.properties`` file it names, is invalid. ``problems`` holds one line per
    problem (file[:line], key, what is wrong, the fix); the message joins them."""

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(self.problems))


def is_secret(key: str) -> bool:
    """Whether a setting's value must never be printed or written (passwords, secrets, keys)."""
    return bool(_SECRET.search(key))


@dataclass(frozen=True)
class Origin:
    """Where a value came from: a file (and line when known) or a default (``line`` None)."""

    source: str
    line: int | None = None

    def __str__(self) -> str:
        return self.source if self.line is None else f"{self.source}:{self.line}"


@dataclass(frozen=True)
class Setting:
    """One configuration value as the gate read it: librdkafka's string form and its :class:`Origin`."""

    key: str
    value: str
    origin: Origin

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not self.key:
            raise GateFileError([f"Setting.key: expected a non-empty str; got {self.key!r}"])
        if not isinstance(self.value, str):
            raise GateFileError([f"{self.origin}: {self.key}: expected a str value; got {self.value!r}"])

    @property
    def shown(self) -> str:
        """``key=value`` with secrets masked."""
        return f"{self.key}={'***' if is_secret(self.key) else self.value}"

    def __str__(self) -> str:
        return f"{self.shown} ({self.origin})"


def canonical(key: str) -> str:
    """librdkafka's canonical name of ``key`` (``request.required.acks`` -> ``acks``)."""
    return _CANONICAL.get(key, key)


@dataclass(frozen=True)
class ClientSettings:
    """The librdkafka settings of one side (producer or consumer), one :class:`Setting` per key.

    ``ignored`` holds keys read but not passed to librdkafka (:data:`IGNORED_KEYS`), shown as notes."""

    side: Side
    settings: tuple[Setting, ...] = ()
    ignored: tuple[Setting, ...] = ()

    def __post_init__(self) -> None:
        if self.side not in ("producer", "consumer"):
            raise GateFileError([f"ClientSettings.side: expected producer or consumer; got {self.side!r}"])
        seen: dict[str, Setting] = {}
        for setting in (*self.settings, *self.ignored):
            if not isinstance(setting, Setting):
                raise GateFileError([f"ClientSettings.settings: expected Setting objects; got {setting!r}"])
            if setting.key in HARNESS_KEYS:
                raise GateFileError(
                    [f"{setting.origin}: {setting.key}: set by the harness itself; remove it"]
                )
            name = canonical(setting.key)
            if name in seen:
                raise GateFileError(
                    [
                        f"{setting.origin}: {setting.key}: the same setting as {seen[name].key} "
                        f"({seen[name].origin}); keep one"
                    ]
                )
            seen[name] = setting
        object.__setattr__(self, "settings", tuple(sorted(self.settings, key=lambda s: s.key)))

    @classmethod
    def from_mapping(
        cls, side: Side, values: Mapping[str, object], origin: Origin | str = "settings"
    ) -> ClientSettings:
        """Settings given in code (a scenario variant's ``producer_config``): one origin for all."""
        where = origin if isinstance(origin, Origin) else Origin(origin)
        return cls(side, tuple(Setting(k, librdkafka_value(v), where) for k, v in values.items()))

    def get(self, key: str) -> Setting | None:
        """The setting of ``key`` under any of its librdkafka names, or ``None`` when not set."""
        name = canonical(key)
        for setting in self.settings:
            if canonical(setting.key) == name:
                return setting
        return None

    def as_dict(self) -> dict[str, str]:
        """The settings as librdkafka takes them (ignored keys left out)."""
        return {s.key: s.value for s in self.settings}


@dataclass(frozen=True)
class ConsumerSide:
    """The consuming side: its librdkafka settings and how the application commits.

    :param commit: where the application commits (or stores) offsets relative to processing: ``auto`` (it
        does not: librdkafka's auto commit of what ``poll()`` returned), ``after_processing``,
        ``before_processing``, or ``transaction`` (``send_offsets_to_transaction`` in the producer's
        transaction; needs ``transform`` and a ``transactional.id``).
    :param transform: the application produces what it consumes (consume-transform-produce).
    """

    settings: ClientSettings
    commit: Setting
    transform: Setting

    def __post_init__(self) -> None:
        if not isinstance(self.settings, ClientSettings) or self.settings.side != "consumer":
            raise GateFileError(["ConsumerSide.settings: expected ClientSettings of side 'consumer'"])
        if self.commit.value not in COMMITS:
            expected = ", ".join(COMMITS)
            raise GateFileError(
                [f"{self.commit.origin}: commit: expected one of {expected}; got {self.commit.value!r}"]
            )
        if self.transform.value not in ("true", "false"):
            raise GateFileError([f"{self.transform.origin}: transform: expected true or false"])

    @property
    def is_transform(self) -> bool:
        return self.transform.value == "true"


@dataclass(frozen=True)
class Thresholds:
    """Limits per fault window or over the whole run (:mod:`chaos.gate.thresholds`); ``None`` is not
    judged. ``duplicates`` (a count) and ``duplicate_rate`` (a fraction of the values sent) exclude each
    other. The consumer side: ``max_consume_gap_s`` (the group's longest stall, or a service's input's),
    ``p99_e2e_latency_ms`` (ack to first delivery), ``max_handover_s`` (a partition's previous owner to its
    next)."""

    longest_outage_s: float | None = None
    p99_ack_latency_ms: float | None = None
    heal_to_first_ack_s: float | None = None
    heal_to_first_delivery_s: float | None = None
    duplicates: int | None = None
    duplicate_rate: float | None = None
    max_consume_gap_s: float | None = None
    p99_e2e_latency_ms: float | None = None
    max_handover_s: float | None = None

    def __post_init__(self) -> None:
        for name in THRESHOLD_KEYS:
            value = getattr(self, name)
            if value is None:
                continue
            if name == "duplicates":
                ok = type(value) is int and value >= 0
            elif name == "duplicate_rate":
                ok = isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1
            else:
                ok = isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
            if not ok:
                expected = {"duplicates": "an integer >= 0", "duplicate_rate": "a fraction in [0, 1]"}
                raise GateFileError(
                    [f"thresholds.{name}: expected {expected.get(name, 'a number >= 0')}; got {value!r}"]
                )
        if self.duplicates is not None and self.duplicate_rate is not None:
            raise GateFileError(
                ["thresholds: give duplicates (a count) or duplicate_rate (a fraction), not both"]
            )

    def over(self, base: Thresholds) -> Thresholds:
        """These thresholds laid over ``base`` (a case's over the file's defaults)."""
        values = {name: getattr(self, name) for name in THRESHOLD_KEYS}
        merged = {name: values[name] if values[name] is not None else getattr(base, name) for name in values}
        if self.duplicates is not None or self.duplicate_rate is not None:
            merged["duplicates"], merged["duplicate_rate"] = self.duplicates, self.duplicate_rate
        return Thresholds(**merged)


@dataclass(frozen=True)
class Baseline:
    """How much worse than a previous gate run (``--baseline``) a measure may get: by more than
    ``tolerance`` (a fraction of the old value) **and** more than ``min_change_s`` (ms measures: x 1000)."""

    tolerance: float = 0.25
    min_change_s: float = 1.0

    def __post_init__(self) -> None:
        for name in ("tolerance", "min_change_s"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
                raise GateFileError([f"baseline.{name}: expected a number >= 0; got {value!r}"])


@dataclass(frozen=True)
class GateTraffic:
    """The team's records and their rate (``[traffic]``), fed to the producers of every case.

    :param traffic: value sizes, key space (``keys=None``: keyless), key skew, headers and tombstones.
    :param rate: the producers' steady rate in messages/s, replacing each case's own; ``None``: the case's.
    :param burst: ``(on_s, off_s)``: send at the rate for ``on_s``, then nothing for ``off_s``, repeated.
    :param settings: the table's keys as given, each with its file and line (for the lint and the notes).
    """

    traffic: Traffic
    rate: float | None = None
    burst: tuple[float, float] | None = None
    settings: tuple[Setting, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.traffic, Traffic):
            raise GateFileError(
                [f"GateTraffic.traffic: expected a chaos.workload.Traffic; got {self.traffic!r}"]
            )
        if self.traffic.burst is not None or self.traffic.steps is not None:
            raise GateFileError(
                ["GateTraffic.traffic: give the rate pattern as rate and burst, not in Traffic"]
            )
        if self.rate is not None and not (
            type(self.rate) in (int, float) and 0 < self.rate <= 100_000 and self.rate == self.rate
        ):
            raise GateFileError(
                [f"traffic.rate: expected messages/s per producer, > 0 and <= 100000; got {self.rate!r}"]
            )
        if self.burst is not None:
            burst = tuple(self.burst) if isinstance(self.burst, tuple | list) else ()
            if len(burst) != 2 or not all(type(b) in (int, float) and b > 0 for b in burst):
                raise GateFileError(
                    [f"traffic.burst: expected [on_s, off_s], both seconds > 0; got {self.burst!r}"]
                )
            object.__setattr__(self, "burst", (float(burst[0]), float(burst[1])))
        if self.rate is not None:
            object.__setattr__(self, "rate", float(self.rate))

    def for_run(self) -> Traffic:
        """The :class:`Traffic` every producer of a case's run takes when the case gives it none: the shape,
        and the rate pattern (``rate`` steady, or ``burst`` on/off at ``rate`` — at the case's own rate when
        no ``rate`` is given). A producer that sends as fast as acks come (a case's prefill) keeps its pace:
        :meth:`chaos.scenario.workers.RunWorkers.producer` drops the pattern for it."""
        if self.rate is None:
            return replace(self.traffic, burst=self.burst)
        if self.burst is not None:
            on_s, off_s = self.burst
            return replace(self.traffic, steps=((self.rate, on_s), (0.0, off_s)))
        return replace(self.traffic, steps=((self.rate, STEADY_S),))

    @property
    def max_size(self) -> int | None:
        """The largest value the traffic sends in bytes (``size``, or the top of ``sizes``); ``None``: each
        value is its bare id."""
        rows = self.traffic._size_rows
        return max(hi for _, _, hi in rows) if rows else None

    @property
    def keyless(self) -> bool:
        return self.traffic.keys is None

    def setting(self, key: str) -> Setting | None:
        """The table's ``key`` as given (``size``, ``sizes`` ...), or ``None``."""
        return next((s for s in self.settings if s.key == f"traffic.{key}"), None)

    def describe(self) -> str:
        """``values 200..20000 bytes, 16 keys (zipf), 5 % tombstones, headers source; 50 msg/s, bursts of 2 s
        every 3 s`` — for the run's header and notes."""
        t = self.traffic
        parts: list[str] = []
        if t.size is not None:
            parts.append(f"values of {t.size} bytes")
        elif t.sizes is not None:
            parts.append(f"values of {min(lo for _, lo, _ in t._size_rows)}..{self.max_size} bytes")
        parts.append("keyless" if t.keys is None else f"{t.keys} keys ({t.key_skew})")
        if t.tombstones:
            parts.append(f"{t.tombstones:.0%} tombstones")
        if t.headers:
            parts.append(f"headers {', '.join(name for name, _ in t.headers)}")
        rate = f"{self.rate:g} msg/s" if self.rate is not None else "the case's rate"
        if self.burst is not None:
            rate += f", bursts of {self.burst[0]:g} s every {self.burst[0] + self.burst[1]:g} s"
        return f"{', '.join(parts)}; {rate}"

    def to_dict(self) -> dict[str, Any]:
        return {s.key.removeprefix("traffic."): s.value for s in self.settings}


def _topic_default(key: str) -> Setting:
    return Setting(key, TOPIC_DEFAULTS[key], Origin("Kafka default"))


@dataclass(frozen=True)
class GateFile:
    """A parsed, validated gate file (:func:`load_gate`), or one built in code (``path`` None)."""

    guarantee: Guarantee
    producer: ClientSettings
    consumer: ConsumerSide | None = None
    topic: tuple[Setting, ...] = ()
    traffic: GateTraffic | None = None
    cases: tuple[str, ...] | None = None
    time_profile: TimeProfileName = "ci"
    retries: int = 1
    thresholds: Thresholds = field(default_factory=Thresholds)
    kafka_version: str | None = None
    case_thresholds: Mapping[str, Thresholds] = field(default_factory=dict)
    baseline: Baseline = field(default_factory=Baseline)
    path: Path | None = None
    lint_advisory: bool = False
    """The lint informs and the cases alone decide the full run (``--lint-advisory``); by default a claim
    the lint proves broken fails the full run (exit 1) even when every case passed."""
    service: GateService | None = None
    """The team's own service (``[service]``): the gate runs the service cases (SV1) with it, and the
    claim is the service's, end to end; ``[producer]`` is then optional."""

    def __post_init__(self) -> None:
        where = str(self.path) if self.path else "gate"
        problems: list[str] = []
        if self.guarantee not in GUARANTEES:
            problems.append(
                f"{where}: guarantee: expected one of {', '.join(GUARANTEES)}; got {self.guarantee!r}"
            )
        if not isinstance(self.producer, ClientSettings) or self.producer.side != "producer":
            problems.append(f"{where}: producer: expected ClientSettings of side 'producer'")
        if self.consumer is not None and not isinstance(self.consumer, ConsumerSide):
            problems.append(f"{where}: consumer: expected a ConsumerSide or None")
        if self.time_profile not in TIME_PROFILES:
            expected = ", ".join(TIME_PROFILES)
            problems.append(f"{where}: time_profile: expected one of {expected}; got {self.time_profile!r}")
        if type(self.retries) is not int or not 0 <= self.retries <= MAX_RETRIES:
            problems.append(f"{where}: retries: expected an integer 0..{MAX_RETRIES}; got {self.retries!r}")
        if self.kafka_version is not None and self.kafka_version not in versions.SUPPORTED_KAFKA_VERSIONS:
            problems.append(f"{where}: kafka_version: {_kafka_version_hint(self.kafka_version)}")
        if type(self.lint_advisory) is not bool:
            problems.append(f"{where}: lint_advisory: expected true or false; got {self.lint_advisory!r}")
        if self.cases is not None:
            bad = [c for c in self.cases if not isinstance(c, str) or not CASE_ID.fullmatch(c)]
            if bad or not self.cases or len(set(self.cases)) != len(self.cases):
                problems.append(
                    f"{where}: cases: expected a non-empty list of distinct catalog ids such as "
                    f"['PB1', 'ISR2'] (see `chaos list`); got {list(self.cases)!r}"
                )
        for case in self.case_thresholds:
            if not CASE_ID.fullmatch(case):
                problems.append(f"{where}: thresholds.{case}: expected a catalog id such as ISR2")
        topic = {s.key: s for s in self.topic}
        for key in topic:
            if key not in TOPIC_KEYS:
                problems.append(f"{topic[key].origin}: topic.{key}: {_unknown_hint(key, TOPIC_KEYS)}")
        if self.service is not None and not isinstance(self.service, GateService):
            problems.append(f"{where}: service: expected a GateService or None; got {self.service!r}")
        if self.traffic is not None and not isinstance(self.traffic, GateTraffic):
            problems.append(f"{where}: traffic: expected a GateTraffic or None; got {self.traffic!r}")
        policy = topic.get("cleanup.policy")
        if (
            isinstance(self.traffic, GateTraffic)
            and self.traffic.keyless
            and policy is not None
            and "compact" in policy.value
        ):
            keyless = self.traffic.setting("keyless")
            problems.append(
                f"{keyless.origin if keyless else where}: traffic.keyless: a compacted topic "
                f"({policy.shown}, {policy.origin}) refuses every record without a key (the broker answers "
                "INVALID_RECORD); give the records keys (keys = N), or drop compact from cleanup.policy"
            )
        if problems:
            raise GateFileError(problems)
        full = tuple(topic.get(key) or _topic_default(key) for key in TOPIC_KEYS)
        object.__setattr__(self, "topic", full)
        object.__setattr__(self, "case_thresholds", MappingProxyType(dict(self.case_thresholds)))

    def topic_given(self, key: str) -> bool:
        """Whether the gate file gives topic setting ``key`` (not Kafka's default)."""
        return self.topic_setting(key).origin.source != "Kafka default"

    def topic_setting(self, key: str) -> Setting:
        """A topic setting (one of :data:`TOPIC_KEYS`), Kafka's default when the file does not give it."""
        for setting in self.topic:
            if setting.key == key:
                return setting
        raise GateFileError([f"topic: unknown key {key!r}; expected one of {', '.join(TOPIC_KEYS)}"])

    def thresholds_for(self, case: str) -> Thresholds:
        """The thresholds of one case: its own table laid over the file's defaults."""
        own = self.case_thresholds.get(case)
        return own.over(self.thresholds) if own else self.thresholds

    @property
    def transactional(self) -> bool:
        return self.producer.get("transactional.id") is not None


CASE_NEEDS: Final[Mapping[str, tuple[str, Callable[[GateFile], bool]]]] = MappingProxyType(
    {
        "L6": ("a consumer ([consumer])", lambda g: g.consumer is not None),
        "D3": ("a consumer ([consumer])", lambda g: g.consumer is not None),
        "MPI1": ("a consumer ([consumer])", lambda g: g.consumer is not None),
        "O6": (
            "a consume-transform-produce application (consumer.transform = true) or a transactional.id",
            lambda g: g.transactional or (g.consumer is not None and g.consumer.is_transform),
        ),
        "SV1": ("the team's service ([service])", lambda g: g.service is not None),
    }
)
"""Catalog cases that apply only to some configurations: case -> (what it needs, test). Every other case
applies to every configuration."""


def applies(case: str, gate: GateFile) -> bool:
    """Whether ``case`` can run against the gate's configuration."""
    need = CASE_NEEDS.get(case)
    return need is None or need[1](gate)


def resolve_cases(gate: GateFile, catalog: Iterable[str]) -> tuple[str, ...]:
    """The cases the gate runs: the file's ``cases``, else every catalog case that applies. Raises
    :class:`GateFileError` for a case the catalog does not have, one that does not apply, or a threshold
    table of a case the catalog does not have."""
    known = tuple(catalog)
    where = str(gate.path) if gate.path else "gate"
    problems: list[str] = []
    for case in (*(gate.cases or ()), *gate.case_thresholds):
        if case not in known:
            problems.append(
                f"{where}: {case}: not a catalog case; expected one of {', '.join(known)} (`chaos list`)"
            )
    for case in gate.cases or ():
        if case in known and not applies(case, gate):
            problems.append(
                f"{where}: cases: {case} needs {CASE_NEEDS[case][0]}; remove it from cases or configure that"
            )
    if problems:
        raise GateFileError(problems)
    if gate.cases is not None:
        return gate.cases
    return tuple(case for case in known if applies(case, gate))


# --- .properties -------------------------------------------------------------------------------------------

_WS: Final = " \t\f"
_ESCAPES: Final = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _continues(line: str) -> bool:
    """A natural line ending in an odd number of backslashes continues on the next one."""
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _unescape(text: str, where: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 >= len(text):
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) != 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise GateFileError(
                    [f"{where}: malformed \\uXXXX escape {text[i : i + 6]!r}; write 4 hex digits"]
                )
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def _split(logical: str, where: str) -> tuple[str, str]:
    """Key and value of a logical line: the key ends at the first unescaped ``=``, ``:`` or whitespace."""
    i = 0
    while i < len(logical):
        c = logical[i]
        if c == "\\":
            i += 2
            continue
        if c in "=:" or c in _WS:
            break
        i += 1
    key, rest = logical[:i], logical[i:]
    if rest[:1] in ("=", ":"):
        rest = rest[1:]
    else:
        rest = rest.lstrip(_WS)
        if rest[:1] in ("=", ":"):
            rest = rest[1:]
    return _unescape(key, where), _unescape(rest.lstrip(_WS), where)


def parse_properties(text: str, source: str = "<properties>") -> tuple[tuple[str, str, int], ...]:
    """``(key, value, line)`` for each entry of a Java ``.properties`` text, as ``Properties.load`` reads it:
    ``key=value``, ``key: value`` or ``key value``; ``#`` / ``!`` comment lines; a line ending in an odd
    number of backslashes continues on the next (whose leading whitespace is dropped); escapes ``\\t``,
    ``\\n``, ``\\r``, ``\\f``, ``\\uXXXX``, ``\\x`` -> ``x``. ``line`` is where the entry starts. Values are
    stripped of trailing whitespace, as the Java client's config parser does. A key given twice is an error
    (Java would keep the last one silently)."""
    lines = re.split(r"\r\n|\r|\n", text)
    entries: list[tuple[str, str, int]] = []
    first: dict[str, int] = {}
    i = 0
    while i < len(lines):
        start = i + 1
        logical = lines[i].lstrip(_WS)
        i += 1
        if not logical or logical[0] in "#!":
            continue
        while _continues(logical) and i < len(lines):
            logical = logical[:-1]
            following = lines[i].lstrip(_WS)
            i += 1
            if not following:
                break
            logical += following
        if _continues(logical):  # a backslash on the file's last line continues into nothing
            logical = logical[:-1]
        where = f"{source}:{start}"
        key, value = _split(logical, where)
        if not key:
            raise GateFileError([f"{where}: an entry without a key ({logical!r}); write key=value"])
        if key in first:
            raise GateFileError(
                [
                    f"{where}: {key}: already set on line {first[key]}; keep one "
                    "(Java would take the last silently)"
                ]
            )
        first[key] = start
        entries.append((key, value.rstrip(_WS), start))
    return tuple(entries)


def _read_text(path: Path, what: str, referrer: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise GateFileError([f"{referrer}: {what}: {path} does not exist; fix the path"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise GateFileError([f"{referrer}: {what}: cannot read {path} ({exc}); fix the file"]) from None


def read_properties(path: Path, side: Side, referrer: str) -> ClientSettings:
    """A ``.properties`` file's librdkafka settings (Java-only keys in ``ignored``)."""
    text = _read_text(path, f"{side}.file", referrer)
    settings: list[Setting] = []
    ignored: list[Setting] = []
    for key, value, line in parse_properties(text, str(path)):
        setting = Setting(key, value, Origin(str(path), line))
        (ignored if canonical(key) in IGNORED_KEYS else settings).append(setting)
    return ClientSettings(side, tuple(settings), tuple(ignored))


# --- TOML ---------------------------------------------------------------------------------------------------

_KEY_PART: Final = re.compile(r"""\s*(?:([A-Za-z0-9_-]+)|"((?:[^"\\]|\\.)*)"|'([^']*)')\s*""")


def _key_parts(text: str) -> tuple[tuple[str, ...], str]:
    """The dotted key at the start of ``text`` and what follows it."""
    parts: list[str] = []
    pos = 0
    while True:
        match = _KEY_PART.match(text, pos)
        if not match or match.end() == pos:
            return (), text
        bare, basic, literal = match.groups()
        if basic is not None:
            with contextlib.suppress(ValueError):
                basic = json.loads(f'"{basic}"')
        parts.append(bare if bare is not None else basic if basic is not None else literal)
        pos = match.end()
        if text[pos : pos + 1] != ".":
            return tuple(parts), text[pos:]
        pos += 1


def key_lines(text: str) -> dict[tuple[str, ...], int]:
    """Best-effort line numbers of a TOML text's tables and keys (tomllib gives none): full key path ->
    the line that defines it. Inline-table members get no entry (their table's line is used)."""
    found: dict[tuple[str, ...], int] = {}
    table: tuple[str, ...] = ()
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("["):
            parts, rest = _key_parts(stripped.lstrip("["))
            if parts and rest.lstrip().startswith("]"):
                table = parts
                found.setdefault(table, number)
            continue
        parts, rest = _key_parts(stripped)
        if parts and rest.startswith("="):
            found.setdefault(table + parts, number)
    return found


def _unknown_hint(key: str, known: Iterable[str]) -> str:
    options = tuple(known)
    close = difflib.get_close_matches(key, options, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown key; {hint}expected one of {', '.join(options)}"


class _Reader:
    """Reads one gate file's tables, collecting every problem with its file, key and line."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.lines = key_lines(text)
        self.problems: list[str] = []

    def origin(self, parts: tuple[str, ...]) -> Origin:
        for end in range(len(parts), 0, -1):
            line = self.lines.get(parts[:end])
            if line is not None:
                return Origin(str(self.path), line)
        return Origin(str(self.path))

    def problem(self, parts: tuple[str, ...], text: str) -> None:
        self.problems.append(f"{self.origin(parts)}: {'.'.join(parts)}: {text}")

    def table(
        self, data: Mapping[str, Any], parts: tuple[str, ...], known: Iterable[str]
    ) -> Mapping[str, Any]:
        """``data[parts[-1]]`` checked to be a table with only ``known`` keys (an absent table is empty)."""
        value = data.get(parts[-1], {})
        if not isinstance(value, dict):
            self.problem(parts, f"expected a table ([{'.'.join(parts)}]); got {value!r}")
            return {}
        allowed = tuple(known)
        for key in value:
            if key not in allowed:
                self.problem((*parts, key), _unknown_hint(key, allowed))
        return value

    def flat(self, data: Mapping[str, Any], parts: tuple[str, ...]) -> Iterator[tuple[str, Any, Origin]]:
        """Dotted keys of a table whose keys are Kafka names: ``enable.idempotence = true`` (a nested table
        to TOML) and ``"enable.idempotence" = true`` both give ``enable.idempotence``."""
        for key, value in data.items():
            if isinstance(value, dict):
                for inner, item, origin in self.flat(value, (*parts, key)):
                    yield f"{key}.{inner}", item, origin
            else:
                yield key, value, self.origin((*parts, key))

    def scalar(self, parts: tuple[str, ...], key: str, value: object) -> str | None:
        if isinstance(value, dict | list) or not isinstance(value, str | int | float | bool):
            self.problem(parts, f"expected a string, number or boolean for {key}; got {value!r}")
            return None
        return librdkafka_value(value)

    def client(self, data: Mapping[str, Any], side: Side, extra: tuple[str, ...]) -> ClientSettings | None:
        section = self.table(data, (side,), ("file", "settings", *extra))
        base = ClientSettings(side)
        file = section.get("file")
        if file is not None:
            if not isinstance(file, str) or not file:
                self.problem((side, "file"), f"expected a path to a .properties file; got {file!r}")
            else:
                try:
                    base = read_properties(self.path.parent / file, side, str(self.origin((side, "file"))))
                except GateFileError as exc:
                    self.problems.extend(exc.problems)
                    return None
        inline = section.get("settings", {})
        if not isinstance(inline, dict):
            self.problem((side, "settings"), f"expected a table of librdkafka settings; got {inline!r}")
            inline = {}
        settings = {canonical(s.key): s for s in base.settings}
        ignored = {canonical(s.key): s for s in base.ignored}
        for key, value, origin in self.flat(inline, (side, "settings")):
            text = self.scalar((side, "settings", key), key, value)
            if text is None:
                continue
            name = canonical(key)
            target = ignored if name in IGNORED_KEYS else settings
            if name in settings and settings[name].origin.source == str(self.path):
                self.problems.append(
                    f"{origin}: {side}.settings.{key}: the same setting as {settings[name].key} "
                    f"({settings[name].origin}); keep one"
                )
                continue
            settings.pop(name, None)  # an inline setting overrides the file's
            target[name] = Setting(key, text, origin)
        try:
            return ClientSettings(side, tuple(settings.values()), tuple(ignored.values()))
        except GateFileError as exc:
            self.problems.extend(exc.problems)
            return None

    def consumer(self, data: Mapping[str, Any], producer: ClientSettings | None) -> ConsumerSide | None:
        if "consumer" not in data:
            return None
        settings = self.client(data, "consumer", ("commit", "transform"))
        section = data["consumer"] if isinstance(data["consumer"], dict) else {}
        transform_value = section.get("transform", False)
        if not isinstance(transform_value, bool):
            self.problem(("consumer", "transform"), f"expected true or false; got {transform_value!r}")
            transform_value = False
        transform = Setting(
            "transform",
            librdkafka_value(transform_value),
            self.origin(("consumer", "transform")) if "transform" in section else Origin("gate default"),
        )
        if settings is None:
            return None
        commit = self.commit(section, settings, producer, transform.value == "true")
        return None if commit is None else ConsumerSide(settings, commit, transform)

    def commit(
        self,
        section: Mapping[str, Any],
        settings: ClientSettings,
        producer: ClientSettings | None,
        transform: bool,
    ) -> Setting | None:
        auto = flag(settings.get("enable.auto.commit"), True)
        store = flag(settings.get("enable.auto.offset.store"), True)
        given = section.get("commit")
        where = ("consumer", "commit")
        if given is None:
            if auto and store:
                return Setting(
                    "commit", "auto", Origin("implied by enable.auto.commit and enable.auto.offset.store")
                )
            off = "enable.auto.commit=false" if not auto else "enable.auto.offset.store=false"
            self.problem(
                where,
                f"missing: with {off} the application commits or stores offsets itself; say where with "
                f"commit = {' | '.join(repr(c) for c in COMMITS[1:])}",
            )
            return None
        if given not in COMMITS:
            self.problem(where, f"expected one of {', '.join(COMMITS)}; got {given!r}")
            return None
        if given == "auto" and not (auto and store):
            self.problem(
                where,
                "'auto' means librdkafka commits what poll() returned, which needs enable.auto.commit=true "
                "and enable.auto.offset.store=true; set those, or say where the application commits",
            )
            return None
        if given == "transaction":
            missing = [
                need
                for need, ok in (
                    (
                        "a producer transactional.id",
                        producer is not None and producer.get("transactional.id"),
                    ),
                    ("consumer.transform = true", transform),
                    ("enable.auto.commit=false", not auto),
                )
                if not ok
            ]
            if missing:
                self.problem(
                    where,
                    f"'transaction' (send_offsets_to_transaction) needs {', '.join(missing)}; set them, or "
                    f"say where the application commits",
                )
                return None
        return Setting("commit", given, self.origin(where))

    def topic(self, data: Mapping[str, Any]) -> tuple[Setting, ...]:
        section = data.get("topic", {})
        if not isinstance(section, dict):
            self.problem(("topic",), f"expected a table; got {section!r}")
            return ()
        found: list[Setting] = []
        for key, value, origin in self.flat(section, ("topic",)):
            if key not in TOPIC_KEYS:
                self.problems.append(f"{origin}: topic.{key}: {_unknown_hint(key, TOPIC_KEYS)}")
                continue
            text, problem = topic_value(key, value)
            if problem is not None:
                self.problems.append(f"{origin}: topic.{key}: {problem}")
            else:
                found.append(Setting(key, text, origin))
        return tuple(found)

    def traffic(self, data: Mapping[str, Any]) -> GateTraffic | None:
        if "traffic" not in data:
            return None
        section = self.table(data, ("traffic",), TRAFFIC_KEYS)
        if not section:
            return None
        where = self.origin(("traffic",))
        settings = tuple(
            Setting(f"traffic.{key}", _shown(value), self.origin(("traffic", key)))
            for key, value in section.items()
            if key in TRAFFIC_KEYS
        )
        options: dict[str, Any] = {}
        for key in ("size", "key_skew", "zipf_s", "tombstones"):
            if key in section:
                options[key] = section[key]
        if "sizes" in section:
            options["sizes"] = _tuples(section["sizes"])
        if "headers" in section:
            headers = section["headers"]
            options["headers"] = headers if isinstance(headers, dict) else _tuples(headers)
        keyless = section.get("keyless", False)
        if type(keyless) is not bool:
            self.problem(
                ("traffic", "keyless"), f"expected true (records without a key) or false; got {keyless!r}"
            )
            keyless = False
        if keyless and "keys" in section:
            self.problem(("traffic", "keys"), "give keys = N (the key space) or keyless = true, not both")
        elif keyless:
            options["keys"] = None
        elif "keys" in section:
            options["keys"] = section["keys"]
        burst = section.get("burst")
        try:
            return GateTraffic(
                Traffic(**options),
                rate=section.get("rate"),
                burst=cast(Any, _tuples(burst)) if burst is not None else None,
                settings=settings,
            )
        except ConfigError as exc:
            text = str(exc).replace("Traffic.", "traffic.").replace("Traffic: ", "traffic: ")
            self.problems.append(f"{where}: {text}")
            return None

    def thresholds(self, data: Mapping[str, Any]) -> tuple[Thresholds, dict[str, Thresholds]]:
        section = data.get("thresholds", {})
        if not isinstance(section, dict):
            self.problem(("thresholds",), f"expected a table; got {section!r}")
            return Thresholds(), {}
        cases: dict[str, Thresholds] = {}
        base = self.threshold_table(
            {k: v for k, v in section.items() if not isinstance(v, dict)}, ("thresholds",)
        )
        for key, value in section.items():
            if isinstance(value, dict):
                if not CASE_ID.fullmatch(key):
                    self.problem(
                        ("thresholds", key), "a sub-table of thresholds is named by a catalog id (ISR2)"
                    )
                    continue
                cases[key] = self.threshold_table(value, ("thresholds", key))
        return base, cases

    def threshold_table(self, values: Mapping[str, Any], parts: tuple[str, ...]) -> Thresholds:
        known = {}
        for key, value in values.items():
            if key not in THRESHOLD_KEYS:
                self.problem((*parts, key), _unknown_hint(key, THRESHOLD_KEYS))
            else:
                known[key] = value
        try:
            return Thresholds(**known)
        except GateFileError as exc:
            self.problems.extend(f"{self.origin(parts)}: {p}" for p in exc.problems)
            return Thresholds()


def topic_value(key: str, value: object) -> tuple[str, str | None]:
    """A ``[topic]`` value in Kafka's string form, or the problem with it (what to write instead)."""
    if key == "unclean.leader.election.enable":
        if not isinstance(value, bool):
            return "", f"expected true or false; got {value!r}"
        return librdkafka_value(value), None
    if key == "cleanup.policy":
        parts = (
            value if isinstance(value, list) else str(value).split(",") if isinstance(value, str) else None
        )
        words = sorted({str(p).strip() for p in parts}) if parts else []
        text = ",".join(words)
        if text not in CLEANUP_POLICIES:
            return "", (
                f'expected "delete" (retention removes old segments), "compact" (the latest record of each '
                f'key is kept) or "compact,delete" (both); got {value!r}'
            )
        return text, None
    low, high, words_ = _TOPIC_NUMBERS[key]
    if type(value) is not int or not low <= value <= high:
        return "", f"expected {words_}; got {value!r}"
    return str(value), None


def _shown(value: object) -> str:
    """A ``[traffic]`` value as a string for :class:`Setting` (its origin goes with it)."""
    if isinstance(value, bool | int | float | str):
        return librdkafka_value(value)
    return json.dumps(value, separators=(", ", ": "))


def _tuples(value: object) -> object:
    """TOML arrays as tuples (``[[200, 0.9], [20000, 0.1]]`` -> ``((200, 0.9), (20000, 0.1))``)."""
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value


def flag(setting: Setting | None, default: bool) -> bool:
    """A librdkafka boolean (``true``/``t``/``1``, ``false``/``f``/``0``, any case)."""
    if setting is None:
        return default
    value = setting.value.strip().lower()
    if value in ("true", "t", "1"):
        return True
    if value in ("false", "f", "0"):
        return False
    raise GateFileError([f"{setting.origin}: {setting.key}: expected true or false; got {setting.value!r}"])


def _kafka_version_hint(value: object) -> str:
    return (
        f"expected one of {', '.join(versions.SUPPORTED_KAFKA_VERSIONS)} (the Kafka the cases run on; "
        f"leave it out for the session's, default {versions.KAFKA_VERSION}); got {value!r}"
    )


TOP_KEYS: Final = (
    "guarantee",
    "cases",
    "time_profile",
    "kafka_version",
    "retries",
    "lint_advisory",
    "producer",
    "consumer",
    "topic",
    "traffic",
    "thresholds",
    "baseline",
    "service",
)


def load_gate(path: str | Path) -> GateFile:
    """Read and validate a gate file. Raises :class:`GateFileError` listing every problem found (file,
    key, line when known, fix)."""
    gate_path = Path(path)
    text = _read_text(gate_path, "gate file", str(gate_path))
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise GateFileError(
            [f"{gate_path}: not valid TOML: {exc}; fix the syntax (https://toml.io)"]
        ) from None
    reader = _Reader(gate_path, text)
    for key in data:
        if key not in TOP_KEYS:
            reader.problem((key,), _unknown_hint(key, TOP_KEYS))
    guarantee = data.get("guarantee")
    if guarantee not in GUARANTEES:
        got = "missing" if guarantee is None else f"got {guarantee!r}"
        reader.problem(
            ("guarantee",), f"{got}; expected one of {', '.join(GUARANTEES)} (the guarantee you claim)"
        )
    service = None
    if "service" in data:
        section = reader.table(data, ("service",), SERVICE_KEYS)
        service = read_service(section, gate_path.parent, reader.problem, str(reader.origin(("service",))))
    if "producer" not in data and "service" not in data:
        reader.problem(
            ("producer",),
            "missing; give the producer's settings under [producer.settings] or a file (or the team's "
            "service under [service])",
        )
    producer = reader.client(data, "producer", ())
    consumer = reader.consumer(data, producer)
    topic = reader.topic(data)
    traffic = reader.traffic(data)
    thresholds, case_thresholds = reader.thresholds(data)
    baseline_data = reader.table(data, ("baseline",), ("tolerance", "min_change_s"))
    try:
        baseline = Baseline(**{k: v for k, v in baseline_data.items() if k in ("tolerance", "min_change_s")})
    except GateFileError as exc:
        reader.problems.extend(f"{reader.origin(('baseline',))}: {p}" for p in exc.problems)
        baseline = Baseline()
    cases = data.get("cases")
    if cases is not None and not (isinstance(cases, list) and all(isinstance(c, str) for c in cases)):
        reader.problem(("cases",), f"expected a list of catalog ids such as ['PB1', 'ISR2']; got {cases!r}")
        cases = None
    elif cases is not None and (
        not cases or len(set(cases)) != len(cases) or not all(map(CASE_ID.fullmatch, cases))
    ):
        reader.problem(
            ("cases",), f"expected distinct catalog ids such as ['PB1', 'ISR2'] (`chaos list`); got {cases!r}"
        )
        cases = None
    kafka_version = data.get("kafka_version")
    if kafka_version is not None and kafka_version not in versions.SUPPORTED_KAFKA_VERSIONS:
        reader.problem(("kafka_version",), _kafka_version_hint(kafka_version))
    for key, default in (("time_profile", "ci"), ("retries", 1)):
        value = data.get(key, default)
        if key == "time_profile" and value not in TIME_PROFILES:
            reader.problem((key,), f"expected one of {', '.join(TIME_PROFILES)}; got {value!r}")
        if key == "retries" and (type(value) is not int or not 0 <= value <= MAX_RETRIES):
            reader.problem(
                (key,), f"expected an integer 0..{MAX_RETRIES} (retries of a failed case); got {value!r}"
            )
    lint_advisory = data.get("lint_advisory", False)
    if type(lint_advisory) is not bool:
        reader.problem(
            ("lint_advisory",),
            f"expected true (the cases alone decide) or false (a claim the lint proves broken fails); got "
            f"{lint_advisory!r}",
        )
    if reader.problems or producer is None:
        raise GateFileError(reader.problems)
    return GateFile(
        guarantee=cast(Guarantee, guarantee),
        producer=producer,
        consumer=consumer,
        topic=topic,
        traffic=traffic,
        cases=tuple(cases) if cases is not None else None,
        time_profile=data.get("time_profile", "ci"),
        kafka_version=kafka_version,
        retries=data.get("retries", 1),
        thresholds=thresholds,
        case_thresholds=case_thresholds,
        baseline=baseline,
        path=gate_path,
        lint_advisory=lint_advisory is True,
        service=service,
    )
