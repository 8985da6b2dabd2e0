"""What a scenario is: a frozen definition of one docs/catalog.md case and its variants.

A :class:`Scenario` names the catalog case it replays, quotes the seed's symptom, lists the symptoms a run
is expected to show and the remediation the seed (or Kafka's documentation) recommends. Each
:class:`Variant` is one configuration of the case — the seed's (``vulnerable``) and the remediated one at
least — with the guarantee its client configuration claims and the verdict the audit must reach.
Definitions are pure data, validated at construction; the scenario files under ``scenarios/`` hold them
next to the test that runs them (see :func:`chaos.scenario.chaos_scenario`).

Settings shared by every variant are given once on the :class:`Scenario` (``guarantee``,
``expected_verdict``, ``client``, ``producer_config``, …); a :class:`Variant` states only what it changes.
The scenario resolves its variants at construction: a variant field left ``None`` takes the scenario's
value, and the variant's config mappings are laid over the scenario's key by key. librdkafka then checks each
resolved producer and consumer config (:mod:`chaos.workload.clientconf`, about a millisecond): an unknown
key, an invalid value or a key of the other side fails the definition, named. A combination refused only
with librdkafka's defaults is left to the run, which checks its clients' final configuration (bounded
timeouts included) before they start.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Final

from chaos.cluster.config import ClusterNeeds
from chaos.errors import ChaosError, ConfigError
from chaos.run.manifest import ExpectedSymptom
from chaos.run.terms import GUARANTEES, VERDICTS, Verdict
from chaos.workload import ClientProfile
from chaos.workload.clientconf import ClientConfigError, Side, check_client_config

Setting = str | int | float | bool
_ID: Final = re.compile(r"[a-z][a-z0-9_]{2,80}")
_VARIANT: Final = re.compile(r"[a-z][a-z0-9_]{0,40}")
_CASE: Final = re.compile(r"[A-Z]{1,4}[0-9]{1,2}")


class ScenarioError(ChaosError):
    """A scenario definition or run is wrong; the message says what to change."""


class ScenarioDefinitionError(ScenarioError, ConfigError):
    """A :class:`Scenario` or :class:`Variant` field is invalid."""


def _frozen(owner: str, name: str, value: Mapping[str, Setting]) -> Mapping[str, Setting]:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str | int | float | bool) for k, v in value.items()
    ):
        raise ScenarioDefinitionError(
            f"{owner}.{name}: expected a mapping of setting -> scalar; got {value!r}"
        )
    return MappingProxyType(dict(sorted(value.items())))


def _choices(owner: str, definition: Variant | Scenario) -> None:
    """``guarantee``, ``client_guarantee`` and ``expected_verdict``: ``None`` (inherited) or a known value."""
    for name, allowed, none in (
        ("guarantee", GUARANTEES, ""),
        ("client_guarantee", GUARANTEES, "None or "),
        ("expected_verdict", VERDICTS, ""),
    ):
        value = getattr(definition, name)
        if value is not None and value not in allowed:
            raise ScenarioDefinitionError(
                f"{owner}: {name} must be {none}one of {', '.join(allowed)}; got {value!r}"
            )


@dataclass(frozen=True)
class Variant:
    """One configuration of a scenario.

    :param name: ``vulnerable``, ``remediated``, ``crash``… (``[a-z][a-z0-9_]*``); the pytest parameter id.
    :param guarantee: the delivery guarantee the client configuration claims; the audit judges against it.
    :param client_guarantee: the guarantee the client *profile* is built with when it differs from
        ``guarantee`` — a vulnerable variant whose application needs more than its client configuration
        gives (a non-idempotent producer where the application needs ``idempotent``): the profile is built
        (and validated) as what the configuration really is, the audit judges ``guarantee``.
    :param expected_verdict: the verdict the audit must reach for this variant.
    :param expected_symptoms: symptoms this variant must show (on top of none for the scenario).
    :param topic_config: topic-level settings (``min.insync.replicas``, ``unclean.leader.election.enable``).
    :param client: a :class:`~chaos.workload.ClientProfile` whose name, producer and consumer settings the
        variant starts from (``producer_config`` / ``consumer_config`` are laid over them).
    :param min_duration_s: a variant that needs a workload at least this long (``--chaos-duration``, or
        the replayed plan's) to reach its verdict — the random nemesis finds the weak configuration's loss
        in minutes: shorter, or with no duration given, the test is skipped before its run opens.
    :param not_on_clients: client library (``java``) -> why the variant's case cannot happen on it (the
        Java consumer's auto-commit runs inside ``poll()``, so it never commits a batch still being
        processed): on that client the test is skipped before its run opens, with the reason.

    ``guarantee``, ``expected_verdict``, ``client_profile``, ``client`` and the config mappings may be left
    ``None``: the :class:`Scenario` fills them from its own defaults when it is built. A variant used on its
    own must give ``guarantee`` and ``expected_verdict``.
    """

    name: str
    description: str
    guarantee: str | None = None
    expected_verdict: Verdict | None = None
    client_profile: str | None = None
    producer_config: Mapping[str, Setting] | None = None
    consumer_config: Mapping[str, Setting] | None = None
    topic_config: Mapping[str, Setting] | None = None
    expected_symptoms: tuple[ExpectedSymptom, ...] = ()
    client_guarantee: str | None = None
    client: ClientProfile | None = None
    min_duration_s: float = 0.0
    not_on_clients: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _VARIANT.fullmatch(self.name):
            raise ScenarioDefinitionError(
                f"Variant.name: expected [a-z][a-z0-9_]{{0,40}} such as 'vulnerable'; got {self.name!r}"
            )
        if not isinstance(self.description, str) or not self.description.strip():
            raise ScenarioDefinitionError(f"Variant {self.name}: description must be a non-empty str")
        _choices(f"Variant {self.name}", self)
        if not isinstance(self.min_duration_s, int | float) or self.min_duration_s < 0:
            raise ScenarioDefinitionError(
                f"Variant {self.name}: min_duration_s must be >= 0 seconds; got {self.min_duration_s!r}"
            )
        for client, why in (self.not_on_clients or {}).items():
            if client not in ("librdkafka", "java") or not isinstance(why, str) or not why.strip():
                raise ScenarioDefinitionError(
                    f"Variant {self.name}: not_on_clients maps librdkafka or java to the reason; got "
                    f"{client!r}: {why!r}"
                )
        if self.not_on_clients is not None:
            object.__setattr__(self, "not_on_clients", MappingProxyType(dict(self.not_on_clients)))
        for name in ("producer_config", "consumer_config", "topic_config"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, _frozen(f"Variant {self.name}", name, getattr(self, name)))
        if self.client is not None and not isinstance(self.client, ClientProfile):
            raise ScenarioDefinitionError(
                f"Variant {self.name}: client must be a chaos.workload.ClientProfile (e.g. IDEMPOTENT); "
                f"got {self.client!r}"
            )
        if not isinstance(self.expected_symptoms, tuple) or not all(
            isinstance(s, ExpectedSymptom) for s in self.expected_symptoms
        ):
            raise ScenarioDefinitionError(
                f"Variant {self.name}: expected_symptoms must be a tuple of ExpectedSymptom"
            )

    def topic_settings(self) -> dict[str, str]:
        """``topic_config`` as the string map ``create_topic(config=...)`` takes."""
        return {
            k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in (self.topic_config or {}).items()
        }

    def resolved(self, defaults: Scenario) -> Variant:
        """This variant with every field it left ``None`` taken from ``defaults`` (a scenario); config
        mappings merged key by key, the variant's keys winning. Raises when a required field is still
        missing."""
        client = self.client or defaults.client
        merged: dict[str, Mapping[str, Setting]] = {}
        sides: tuple[tuple[str, Side], ...] = (
            ("producer_config", "producer"),
            ("consumer_config", "consumer"),
        )
        for name, side in sides:
            base: dict[str, Setting] = dict(getattr(client, f"{side}_settings")) if client else {}
            base.update(getattr(defaults, name) or {})
            base.update(getattr(self, name) or {})
            merged[name] = base
            try:
                check_client_config(
                    side,
                    base,
                    f"Scenario {defaults.scenario_id}, variant {self.name}: {name}",
                    combinations=False,  # the run's timeouts may make it valid: the run checks it
                )
            except ClientConfigError as exc:
                raise ScenarioDefinitionError(str(exc)) from None
        topic = {**(defaults.topic_config or {}), **(self.topic_config or {})}
        guarantee = self.guarantee or defaults.guarantee or (client.guarantee if client else None)
        verdict = self.expected_verdict or defaults.expected_verdict
        if guarantee is None or verdict is None:
            missing = " and ".join(
                n for n, v in (("guarantee", guarantee), ("expected_verdict", verdict)) if v is None
            )
            raise ScenarioDefinitionError(
                f"Variant {self.name}: no {missing}; give it on the Variant or as the Scenario's default"
            )
        profile = self.client_profile or defaults.client_profile or (client.name if client else "custom")
        return replace(
            self,
            guarantee=guarantee,
            expected_verdict=verdict,
            client_profile=profile,
            producer_config=merged["producer_config"],
            consumer_config=merged["consumer_config"],
            topic_config=topic,
            client_guarantee=self.client_guarantee or defaults.client_guarantee,
            client=client,
        )


@dataclass(frozen=True)
class Scenario:
    """One docs/catalog.md case and its variants.

    :param scenario_id: the catalog's snake-case id (``pb1_cut_one_broker_then_start_client``).
    :param case_id: the catalog's short id (``PB1``).
    :param symptom: the seed's symptom, quoted from the seed (docs/catalog.md).
    :param module: the scenario file (``scenarios/test_pb1_….py``, or any path ending in ``.py``); filled
        in by :func:`~chaos.scenario.chaos_scenario` when left empty.
    :param test: the test function in ``module`` that runs the variants (parametrized by variant name);
        filled in by :func:`~chaos.scenario.chaos_scenario` when left empty.

    ``guarantee``, ``expected_verdict``, ``client`` (a :class:`~chaos.workload.ClientProfile`),
    ``client_profile``, ``client_guarantee`` and the ``*_config`` mappings are defaults for every variant.
    ``cluster``: what the scenario's faults need of the cluster (a clock or disk fault:
    :class:`~chaos.cluster.config.ClusterNeeds`); the plugin gives the test a cluster that has it.
    """

    scenario_id: str
    case_id: str
    title: str
    source: str
    symptom: str
    variants: tuple[Variant, ...]
    module: str = ""
    test: str = ""
    remediation: tuple[str, ...] = ()
    expected_symptoms: tuple[ExpectedSymptom, ...] = ()
    related: tuple[str, ...] = ()
    guarantee: str | None = None
    expected_verdict: Verdict | None = None
    client: ClientProfile | None = None
    client_profile: str | None = None
    client_guarantee: str | None = None
    producer_config: Mapping[str, Setting] = field(default_factory=dict)
    consumer_config: Mapping[str, Setting] = field(default_factory=dict)
    topic_config: Mapping[str, Setting] = field(default_factory=dict)
    cluster: ClusterNeeds = field(default_factory=ClusterNeeds)

    def __post_init__(self) -> None:
        if not isinstance(self.scenario_id, str) or not _ID.fullmatch(self.scenario_id):
            raise ScenarioDefinitionError(
                f"Scenario.scenario_id: expected the catalog's snake-case id ([a-z][a-z0-9_]{{2,80}}); "
                f"got {self.scenario_id!r}"
            )
        for case in (self.case_id, *self.related):
            if not isinstance(case, str) or not _CASE.fullmatch(case):
                raise ScenarioDefinitionError(
                    f"Scenario {self.scenario_id}: case ids look like 'PB1' or 'ISR2'; got {case!r}"
                )
        for name in ("title", "source", "symptom"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ScenarioDefinitionError(f"Scenario {self.scenario_id}: {name} must be a non-empty str")
        if not isinstance(self.test, str) or not isinstance(self.module, str):
            raise ScenarioDefinitionError(f"Scenario {self.scenario_id}: module and test must be str")
        if self.module and not self.module.endswith(".py"):
            raise ScenarioDefinitionError(
                f"Scenario {self.scenario_id}: module must be a path like 'scenarios/test_x.py'; "
                f"got {self.module!r}"
            )
        _choices(f"Scenario {self.scenario_id}", self)
        for name in ("producer_config", "consumer_config", "topic_config"):
            object.__setattr__(self, name, _frozen(f"Scenario {self.scenario_id}", name, getattr(self, name)))
        if not isinstance(self.variants, tuple) or not self.variants:
            raise ScenarioDefinitionError(f"Scenario {self.scenario_id}: needs at least one Variant")
        if not all(isinstance(v, Variant) for v in self.variants):
            raise ScenarioDefinitionError(f"Scenario {self.scenario_id}: variants must be Variant objects")
        object.__setattr__(self, "variants", tuple(v.resolved(self) for v in self.variants))
        names = [v.name for v in self.variants]
        if len(set(names)) != len(names):
            raise ScenarioDefinitionError(f"Scenario {self.scenario_id}: variant names repeat: {names}")
        for name in ("remediation", "expected_symptoms", "related"):
            if not isinstance(getattr(self, name), tuple):
                raise ScenarioDefinitionError(f"Scenario {self.scenario_id}: {name} must be a tuple")
        if not isinstance(self.cluster, ClusterNeeds):
            raise ScenarioDefinitionError(
                f"Scenario {self.scenario_id}: cluster must be a ClusterNeeds (chaos.cluster.config); "
                f"got {self.cluster!r}"
            )

    def variant(self, name: str) -> Variant:
        for variant in self.variants:
            if variant.name == name:
                return variant
        raise ScenarioError(
            f"scenario {self.scenario_id} has no variant {name!r}; variants: "
            f"{', '.join(v.name for v in self.variants)}"
        )

    @property
    def variant_names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.variants)

    def locate(self, module: str, test: str) -> None:
        """Record where the scenario's test is (done once, by :func:`~chaos.scenario.chaos_scenario`);
        fields given at construction are kept."""
        if not self.module:
            object.__setattr__(self, "module", module)
        if not self.test:
            object.__setattr__(self, "test", test)

    def nodeid(self, variant: str | None = None) -> str:
        """The pytest node id of the scenario's test (one variant, or all of them)."""
        if not self.module or not self.test:
            raise ScenarioError(
                f"scenario {self.scenario_id} has no test: decorate its test with @chaos_scenario(SCENARIO)"
            )
        base = f"{self.module}::{self.test}"
        if variant is None:
            return base
        self.variant(variant)
        return f"{base}[{variant}]"

    def symptoms(self, variant: Variant) -> tuple[ExpectedSymptom, ...]:
        """The scenario's expected symptoms plus the variant's."""
        return (*self.expected_symptoms, *variant.expected_symptoms)
