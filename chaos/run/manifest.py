"""The run's manifest, ``<run_dir>/scenario.json``: what was run, against what, and what to look for.

Written by whoever runs a scenario (the scenario runner, or a test) at the start of the run and again at its
end (``ended_ts``, ``outcome``, what each client really ran with: ``clients``, ``group_isolation``); read by
the report. :class:`ScenarioInfo` is its format (docs/report.md);
this module is its one owner.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Literal, get_args

from chaos.run.events import ISOLATION_LEVELS
from chaos.run.files import RunFileError, read_json_object, write_atomic
from chaos.run.layout import LOGS_DIR, SCENARIO_NAME
from chaos.run.terms import VERDICTS

SCENARIO_FORMAT: Final = 1

Scalar = str | int | float | bool | None
Settings = Mapping[str, Scalar]
SymptomKind = Literal["error_code", "client_log", "broker_log"]
SYMPTOM_KINDS: Final[tuple[str, ...]] = get_args(SymptomKind)
OUTCOMES: Final[tuple[str, ...]] = ("passed", "failed", "error", "skipped")
"""The pytest outcome of the test that ran the scenario."""
TIMINGS: Final[tuple[str, ...]] = ("history_s", "audit_s")
"""The stages whose wall seconds ``scenario.json`` records (:attr:`ScenarioInfo.timings`)."""
ClientRole = Literal["producer", "member", "transform_producer", "transform_consumer"]
CLIENT_ROLES: Final[tuple[str, ...]] = get_args(ClientRole)
"""A client's part in the run: a producer worker, a consumer-group member, or one of the two clients of a
consume-transform-produce worker."""


def _need(ok: bool, owner: object, name: str, expected: str, value: object) -> None:
    if not ok:
        raise RunFileError(f"{type(owner).__name__}.{name}: expected {expected}; got {value!r}")


def _opt_str(value: object) -> bool:
    return value is None or type(value) is str


def _opt_time(value: object) -> bool:
    return value is None or (type(value) in (int, float) and math.isfinite(value))  # type: ignore[arg-type]


def _seconds(value: object) -> bool:
    return value is not None and _opt_time(value) and value >= 0  # type: ignore[operator]


def _settings(owner: object, name: str, value: object) -> Settings:
    ok = isinstance(value, Mapping) and all(
        type(k) is str and (v is None or type(v) in (str, int, float, bool)) for k, v in value.items()
    )
    _need(ok, owner, name, "a mapping of setting name -> str, int, float, bool or null", value)
    assert isinstance(value, Mapping)
    return MappingProxyType(dict(sorted(value.items())))


@dataclass(frozen=True)
class TopicInfo:
    """The topic under test and its settings (``config``: topic-level configs such as min.insync.replicas)."""

    name: str
    partitions: int | None = None
    replication_factor: int | None = None
    config: Settings = field(default_factory=dict)

    def __post_init__(self) -> None:
        _need(type(self.name) is str and bool(self.name), self, "name", "a non-empty str", self.name)
        for attr in ("partitions", "replication_factor"):
            value = getattr(self, attr)
            _need(
                value is None or (type(value) is int and value > 0), self, attr, "an int > 0 or null", value
            )
        object.__setattr__(self, "config", _settings(self, "config", self.config))

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "partitions": self.partitions,
            "replication_factor": self.replication_factor,
            "config": dict(self.config),
        }


@dataclass(frozen=True)
class ExpectedSymptom:
    """A symptom the seed case predicts, looked for in the run.

    - ``error_code``: an error code name (``NOT_ENOUGH_REPLICAS``, ``_MSG_TIMED_OUT``…) in the ``error``
      column of any history event (exact match);
    - ``client_log``: text in a ``client_log`` event's message (librdkafka's log lines);
    - ``broker_log``: text in a line of the broker logs (``Shrinking ISR``, ``Failed to elect leader``).

    ``pattern`` is a plain substring unless ``regex`` is true (Python ``re.search``).
    """

    kind: SymptomKind
    pattern: str
    description: str = ""
    regex: bool = False

    def __post_init__(self) -> None:
        _need(self.kind in SYMPTOM_KINDS, self, "kind", " or ".join(SYMPTOM_KINDS), self.kind)
        _need(
            type(self.pattern) is str and bool(self.pattern), self, "pattern", "a non-empty str", self.pattern
        )
        _need(type(self.description) is str, self, "description", "a str", self.description)
        _need(type(self.regex) is bool, self, "regex", "a bool", self.regex)
        if self.regex:
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise RunFileError(
                    f"ExpectedSymptom.pattern: {self.pattern!r} is not a valid regex ({exc}); "
                    f"fix it or set regex=false for a plain substring"
                ) from None

    @property
    def check_description(self) -> str:
        """How the run's evidence check of this symptom is named (the report finds the check by it)."""
        return f"{self.kind} {self.pattern!r}" + (f": {self.description}" if self.description else "")

    def matches(self, text: str) -> bool:
        """True if ``text`` holds the pattern (error codes: equals it, or fully matches it with ``regex``)."""
        if self.kind == "error_code":
            return re.fullmatch(self.pattern, text) is not None if self.regex else text == self.pattern
        if self.regex:
            return re.search(self.pattern, text) is not None
        return self.pattern in text

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "pattern": self.pattern,
            "description": self.description,
            "regex": self.regex,
        }


@dataclass(frozen=True)
class ThresholdResult:
    """A threshold the gate checked (``observed`` null: could not be measured)."""

    name: str
    limit: float
    observed: float | None
    passed: bool
    unit: str = ""

    def __post_init__(self) -> None:
        _need(type(self.name) is str and bool(self.name), self, "name", "a non-empty str", self.name)
        _need(_opt_time(self.limit) and self.limit is not None, self, "limit", "a finite number", self.limit)
        _need(_opt_time(self.observed), self, "observed", "a finite number or null", self.observed)
        _need(type(self.passed) is bool, self, "passed", "a bool", self.passed)
        _need(type(self.unit) is str, self, "unit", "a str", self.unit)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "limit": self.limit,
            "observed": self.observed,
            "passed": self.passed,
            "unit": self.unit,
        }


def _scalar(value: object) -> bool:
    if type(value) is float:
        return math.isfinite(value)
    return value is None or type(value) in (str, int, bool)


@dataclass(frozen=True)
class ConfigFlag:
    """A setting a client ran with that differs from what the run asked for (the variant's settings, which
    in a gate run are the gate file's).

    :param key: the setting.
    :param asked: the value asked for.
    :param effective: the value the client ran with; ``None``: not set, librdkafka's default applies.
    :param changed_by: who changed it (the origin of the effective value, or why it is not set).
    """

    key: str
    asked: Scalar
    effective: Scalar
    changed_by: str

    def __post_init__(self) -> None:
        _need(type(self.key) is str and bool(self.key), self, "key", "a non-empty str", self.key)
        for attr in ("asked", "effective"):
            value = getattr(self, attr)
            _need(_scalar(value), self, attr, "a str, int, finite float, bool or null", value)
        _need(
            type(self.changed_by) is str and bool(self.changed_by),
            self,
            "changed_by",
            "a non-empty str",
            self.changed_by,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "asked": self.asked,
            "effective": self.effective,
            "changed_by": self.changed_by,
        }


@dataclass(frozen=True)
class ClientInfo:
    """One client's effective configuration: what was handed to librdkafka (callbacks excluded, secrets
    redacted), who set each key, and the settings that differ from what the run asked for.

    :param process: the worker's actor name (a transform's two clients share it).
    :param role: one of :data:`CLIENT_ROLES`.
    :param profile: the client profile the worker ran with.
    :param settings: the effective configuration.
    :param origins: per key of ``settings``, who set it.
    :param flags: the settings asked for that the client did not run with as asked.
    """

    process: str
    role: ClientRole
    profile: str
    settings: Settings
    origins: Mapping[str, str]
    flags: tuple[ConfigFlag, ...] = ()

    def __post_init__(self) -> None:
        for attr in ("process", "profile"):
            value = getattr(self, attr)
            _need(type(value) is str and bool(value), self, attr, "a non-empty str", value)
        _need(self.role in CLIENT_ROLES, self, "role", " or ".join(CLIENT_ROLES), self.role)
        object.__setattr__(self, "settings", _settings(self, "settings", self.settings))
        origins = self.origins
        ok = (
            isinstance(origins, Mapping)
            and set(origins) == set(self.settings)
            and all(type(v) is str and v for v in origins.values())
        )
        _need(
            ok,
            self,
            "origins",
            "who set each key of settings (a non-empty str per key, no other key)",
            origins,
        )
        object.__setattr__(self, "origins", MappingProxyType(dict(sorted(origins.items()))))
        _need(
            isinstance(self.flags, tuple) and all(isinstance(f, ConfigFlag) for f in self.flags),
            self,
            "flags",
            "a tuple of ConfigFlag",
            self.flags,
        )

    @property
    def side(self) -> Literal["producer", "consumer"]:
        return "consumer" if self.role in ("member", "transform_consumer") else "producer"

    def to_dict(self) -> dict[str, Any]:
        return {
            "process": self.process,
            "role": self.role,
            "profile": self.profile,
            "settings": dict(self.settings),
            "origins": dict(self.origins),
            "flags": [f.to_dict() for f in self.flags],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ClientInfo:
        """Rebuild from :meth:`to_dict` output."""
        if not isinstance(data, Mapping):
            raise RunFileError(f"scenario.json: clients[]: expected a JSON object; got {data!r}")
        kwargs = dict(data)
        kwargs["flags"] = tuple(ConfigFlag(**f) for f in kwargs.get("flags") or ())
        return cls(**kwargs)


@dataclass(frozen=True)
class GroupIsolation:
    """The isolation level the audit took for the run's consumer group, and why (from the members'
    effective ``isolation.level``)."""

    level: str
    reason: str

    def __post_init__(self) -> None:
        _need(self.level in ISOLATION_LEVELS, self, "level", " or ".join(ISOLATION_LEVELS), self.level)
        _need(type(self.reason) is str and bool(self.reason), self, "reason", "a non-empty str", self.reason)

    def to_dict(self) -> dict[str, Any]:
        return {"level": self.level, "reason": self.reason}


@dataclass(frozen=True)
class ScenarioInfo:
    """The contents of ``<run_dir>/scenario.json``: what was run, against what, and what to look for.

    Only ``scenario_id`` is required; everything else renders as "not recorded" when absent. ``plan`` is
    the fault plan exactly as :meth:`chaos.faults.plan.Plan.to_json` wrote it, parsed. ``ended_ts`` null
    means the scenario did not record its end (it crashed or is still running).
    """

    scenario_id: str
    title: str = ""
    case_id: str | None = None
    source: str | None = None
    symptom: str | None = None
    guarantee: str | None = None
    variant: str | None = None
    expected_verdict: str | None = None
    """The verdict the variant expects (``pass`` / ``fail`` / ``unknown``): a ``vulnerable`` variant expects
    its guarantee to fail. ``None``: not recorded (a run written before it, or a run without a variant)."""
    client_profile: str | None = None
    producer_config: Settings = field(default_factory=dict)
    consumer_config: Settings = field(default_factory=dict)
    topic: TopicInfo | None = None
    broker_config: Settings = field(default_factory=dict)
    time_profile: str | None = None
    brokers: int | None = None
    kafka_version: str | None = None
    seed: int | None = None
    plan: Mapping[str, Any] | None = None
    expected_symptoms: tuple[ExpectedSymptom, ...] = ()
    remediation: tuple[str, ...] = ()
    thresholds: tuple[ThresholdResult, ...] = ()
    clients: tuple[ClientInfo, ...] = ()
    group_isolation: GroupIsolation | None = None
    nodeid: str | None = None
    command: str | None = None
    log_dir: str = LOGS_DIR
    started_ts: float | None = None
    ended_ts: float | None = None
    outcome: str | None = None
    error: str | None = None
    timings: Mapping[str, float] = field(default_factory=dict)
    """Wall seconds a finished run's stages took, by name (:data:`TIMINGS`): ``history_s`` from the
    history's opening to its closing (the workload, the faults and the final drain), ``audit_s`` the audit
    (with the engine the audit names). Empty: not recorded (the run did not finish)."""

    def __post_init__(self) -> None:
        _need(
            type(self.scenario_id) is str and bool(self.scenario_id.strip()),
            self,
            "scenario_id",
            "a non-empty str",
            self.scenario_id,
        )
        _need(type(self.title) is str, self, "title", "a str", self.title)
        for attr in (
            "case_id",
            "source",
            "symptom",
            "guarantee",
            "variant",
            "client_profile",
            "time_profile",
            "nodeid",
            "command",
            "error",
            "kafka_version",
        ):
            _need(_opt_str(getattr(self, attr)), self, attr, "a str or null", getattr(self, attr))
        for attr in ("producer_config", "consumer_config", "broker_config"):
            object.__setattr__(self, attr, _settings(self, attr, getattr(self, attr)))
        _need(
            self.expected_verdict is None or self.expected_verdict in VERDICTS,
            self,
            "expected_verdict",
            f"one of {', '.join(VERDICTS)} or null",
            self.expected_verdict,
        )
        _need(
            self.topic is None or isinstance(self.topic, TopicInfo), self, "topic", "a TopicInfo", self.topic
        )
        _need(
            self.brokers is None or (type(self.brokers) is int and self.brokers > 0),
            self,
            "brokers",
            "an int > 0 or null",
            self.brokers,
        )
        _need(self.seed is None or type(self.seed) is int, self, "seed", "an int or null", self.seed)
        _need(
            self.plan is None or isinstance(self.plan, Mapping),
            self,
            "plan",
            "the plan's JSON object (Plan.to_json()) or null",
            self.plan,
        )
        if self.plan is not None:
            object.__setattr__(self, "plan", MappingProxyType(dict(self.plan)))
        for attr, kind in (
            ("expected_symptoms", ExpectedSymptom),
            ("remediation", str),
            ("thresholds", ThresholdResult),
            ("clients", ClientInfo),
        ):
            value = getattr(self, attr)
            _need(
                isinstance(value, tuple) and all(isinstance(v, kind) for v in value),
                self,
                attr,
                f"a tuple of {kind.__name__}",
                value,
            )
        _need(
            self.group_isolation is None or isinstance(self.group_isolation, GroupIsolation),
            self,
            "group_isolation",
            "a GroupIsolation or null",
            self.group_isolation,
        )
        _need(
            type(self.log_dir) is str and bool(self.log_dir) and not os.path.isabs(self.log_dir),
            self,
            "log_dir",
            "a relative path inside the run dir",
            self.log_dir,
        )
        for attr in ("started_ts", "ended_ts"):
            _need(_opt_time(getattr(self, attr)), self, attr, "epoch seconds or null", getattr(self, attr))
        _need(
            isinstance(self.timings, Mapping)
            and all(k in TIMINGS and _seconds(v) for k, v in self.timings.items()),
            self,
            "timings",
            f"seconds (a number >= 0) by stage, of {', '.join(TIMINGS)}",
            self.timings,
        )
        object.__setattr__(self, "timings", MappingProxyType(dict(self.timings)))
        _need(
            self.outcome is None or self.outcome in OUTCOMES,
            self,
            "outcome",
            f"one of {', '.join(OUTCOMES)} or null",
            self.outcome,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": SCENARIO_FORMAT,
            "scenario_id": self.scenario_id,
            "title": self.title,
            "case_id": self.case_id,
            "source": self.source,
            "symptom": self.symptom,
            "guarantee": self.guarantee,
            "variant": self.variant,
            "expected_verdict": self.expected_verdict,
            "client_profile": self.client_profile,
            "producer_config": dict(self.producer_config),
            "consumer_config": dict(self.consumer_config),
            "topic": self.topic.to_dict() if self.topic is not None else None,
            "broker_config": dict(self.broker_config),
            "time_profile": self.time_profile,
            "brokers": self.brokers,
            "kafka_version": self.kafka_version,
            "seed": self.seed,
            "plan": dict(self.plan) if self.plan is not None else None,
            "expected_symptoms": [s.to_dict() for s in self.expected_symptoms],
            "remediation": list(self.remediation),
            "thresholds": [t.to_dict() for t in self.thresholds],
            "clients": [c.to_dict() for c in self.clients],
            "group_isolation": self.group_isolation.to_dict() if self.group_isolation is not None else None,
            "nodeid": self.nodeid,
            "command": self.command,
            "log_dir": self.log_dir,
            "started_ts": self.started_ts,
            "ended_ts": self.ended_ts,
            "outcome": self.outcome,
            "error": self.error,
            "timings": dict(self.timings),
        }

    def to_json(self) -> str:
        """Stable JSON (sorted keys, 2-space indent, trailing newline)."""
        return (
            json.dumps(self.to_dict(), sort_keys=True, indent=2, allow_nan=False, ensure_ascii=False) + "\n"
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScenarioInfo:
        """Rebuild from :meth:`to_dict` output; unknown keys and a newer ``format`` are refused."""
        if not isinstance(data, Mapping):
            raise RunFileError(f"scenario.json: expected a JSON object; got {type(data).__name__}")
        fmt = data.get("format", SCENARIO_FORMAT)
        if fmt != SCENARIO_FORMAT:
            raise RunFileError(
                f"scenario.json: format {fmt!r}; this harness reads format {SCENARIO_FORMAT}. "
                f"Render it with the harness version that wrote it."
            )
        known = set(cls.__dataclass_fields__) | {"format"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise RunFileError(f"scenario.json: unknown keys {unknown}; known: {sorted(known)}")
        kwargs = {k: v for k, v in data.items() if k != "format"}
        try:
            topic = kwargs.get("topic")
            if topic is not None:
                kwargs["topic"] = TopicInfo(**topic)
            kwargs["expected_symptoms"] = tuple(
                ExpectedSymptom(**s) for s in kwargs.get("expected_symptoms") or ()
            )
            kwargs["thresholds"] = tuple(ThresholdResult(**t) for t in kwargs.get("thresholds") or ())
            kwargs["remediation"] = tuple(kwargs.get("remediation") or ())
            kwargs["clients"] = tuple(ClientInfo.from_dict(c) for c in kwargs.get("clients") or ())
            isolation = kwargs.get("group_isolation")
            if isolation is not None:
                kwargs["group_isolation"] = GroupIsolation(**isolation)
            for attr in ("producer_config", "consumer_config", "broker_config"):
                if kwargs.get(attr) is None:
                    kwargs.pop(attr, None)
            return cls(**kwargs)
        except TypeError as exc:
            raise RunFileError(f"scenario.json: {exc}") from None


def scenario_path(run_dir: str | os.PathLike[str]) -> Path:
    """``<run_dir>/scenario.json``."""
    return Path(run_dir) / SCENARIO_NAME


def write_scenario(run_dir: str | os.PathLike[str], info: ScenarioInfo) -> Path:
    """Write ``scenario.json`` atomically (write, then rename); returns its path."""
    return write_atomic(scenario_path(run_dir), info.to_json())


def read_scenario(run_dir: str | os.PathLike[str]) -> ScenarioInfo | None:
    """The run's scenario metadata, ``None`` if there is no ``scenario.json``; a malformed one raises
    :class:`RunFileError`."""
    data = read_json_object(scenario_path(run_dir))
    return None if data is None else ScenarioInfo.from_dict(data)
