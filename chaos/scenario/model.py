"""What a scenario is: a frozen definition of one CATALOG.md case and its variants.

A :class:`Scenario` names the catalog case it replays, quotes the seed's symptom, lists the symptoms a run
is expected to show and the remediation the seed (or Kafka's documentation) recommends. Each
:class:`Variant` is one configuration of the case — the seed's (``vulnerable``) and the remediated one at
least — with the guarantee its client configuration claims and the verdict the audit must reach.
Definitions are pure data, validated at construction; the scenario files under ``scenarios/`` hold them
next to the test that runs them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, Literal

from chaos.errors import ChaosError, ConfigError
from chaos.gate.policy import GUARANTEES
from chaos.report.inputs import ExpectedSymptom

Verdict = Literal["pass", "fail", "unknown"]
VERDICTS: Final[tuple[str, ...]] = ("pass", "fail", "unknown")
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
    """

    name: str
    description: str
    guarantee: str
    expected_verdict: Verdict
    client_profile: str = "custom"
    producer_config: Mapping[str, Setting] = field(default_factory=dict)
    consumer_config: Mapping[str, Setting] = field(default_factory=dict)
    topic_config: Mapping[str, Setting] = field(default_factory=dict)
    expected_symptoms: tuple[ExpectedSymptom, ...] = ()
    client_guarantee: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _VARIANT.fullmatch(self.name):
            raise ScenarioDefinitionError(
                f"Variant.name: expected [a-z][a-z0-9_]{{0,40}} such as 'vulnerable'; got {self.name!r}"
            )
        if not isinstance(self.description, str) or not self.description.strip():
            raise ScenarioDefinitionError(f"Variant {self.name}: description must be a non-empty str")
        if self.guarantee not in GUARANTEES:
            raise ScenarioDefinitionError(
                f"Variant {self.name}: guarantee must be one of {', '.join(GUARANTEES)}; "
                f"got {self.guarantee!r}"
            )
        if self.client_guarantee is not None and self.client_guarantee not in GUARANTEES:
            raise ScenarioDefinitionError(
                f"Variant {self.name}: client_guarantee must be None or one of {', '.join(GUARANTEES)}; "
                f"got {self.client_guarantee!r}"
            )
        if self.expected_verdict not in VERDICTS:
            raise ScenarioDefinitionError(
                f"Variant {self.name}: expected_verdict must be one of {', '.join(VERDICTS)}; "
                f"got {self.expected_verdict!r}"
            )
        for name in ("producer_config", "consumer_config", "topic_config"):
            object.__setattr__(self, name, _frozen(f"Variant {self.name}", name, getattr(self, name)))
        if not isinstance(self.expected_symptoms, tuple) or not all(
            isinstance(s, ExpectedSymptom) for s in self.expected_symptoms
        ):
            raise ScenarioDefinitionError(
                f"Variant {self.name}: expected_symptoms must be a tuple of ExpectedSymptom"
            )

    def topic_settings(self) -> dict[str, str]:
        """``topic_config`` as the string map ``create_topic(config=...)`` takes."""
        return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in self.topic_config.items()}


@dataclass(frozen=True)
class Scenario:
    """One CATALOG.md case and its variants.

    :param scenario_id: the catalog's snake-case id (``pb1_cut_one_broker_then_start_client``).
    :param case_id: the catalog's short id (``PB1``).
    :param symptom: the seed's symptom, quoted from CATALOG.md.
    :param module: the scenario file, relative to the repository (``scenarios/test_pb1_….py``).
    :param test: the test function in ``module`` that runs the variants (parametrized by variant name).
    """

    scenario_id: str
    case_id: str
    title: str
    source: str
    symptom: str
    variants: tuple[Variant, ...]
    module: str
    test: str
    remediation: tuple[str, ...] = ()
    expected_symptoms: tuple[ExpectedSymptom, ...] = ()
    related: tuple[str, ...] = ()

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
        for name in ("title", "source", "symptom", "test"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ScenarioDefinitionError(f"Scenario {self.scenario_id}: {name} must be a non-empty str")
        if not self.module.startswith("scenarios/") or not self.module.endswith(".py"):
            raise ScenarioDefinitionError(
                f"Scenario {self.scenario_id}: module must be a path like 'scenarios/test_x.py'; "
                f"got {self.module!r}"
            )
        if not isinstance(self.variants, tuple) or not self.variants:
            raise ScenarioDefinitionError(f"Scenario {self.scenario_id}: needs at least one Variant")
        names = [v.name for v in self.variants]
        if len(set(names)) != len(names):
            raise ScenarioDefinitionError(f"Scenario {self.scenario_id}: variant names repeat: {names}")
        if not {"vulnerable", "remediated"} <= set(names):
            raise ScenarioDefinitionError(
                f"Scenario {self.scenario_id}: every scenario proves both sides; add a 'vulnerable' and a "
                f"'remediated' variant (has {names})"
            )
        for name in ("remediation", "expected_symptoms", "related"):
            if not isinstance(getattr(self, name), tuple):
                raise ScenarioDefinitionError(f"Scenario {self.scenario_id}: {name} must be a tuple")

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

    def nodeid(self, variant: str | None = None) -> str:
        """The pytest node id of the scenario's test (one variant, or all of them)."""
        base = f"{self.module}::{self.test}"
        if variant is None:
            return base
        self.variant(variant)
        return f"{base}[{variant}]"

    def symptoms(self, variant: Variant) -> tuple[ExpectedSymptom, ...]:
        """The scenario's expected symptoms plus the variant's."""
        return (*self.expected_symptoms, *variant.expected_symptoms)
