"""What a run is, before it runs: the client profile a variant runs with and the ``scenario.json`` the run
starts with (:class:`~chaos.run.manifest.ScenarioInfo`, whose format :mod:`chaos.run.manifest` owns)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from chaos.gate.redact import redact
from chaos.run.manifest import ScenarioInfo
from chaos.run.profiles import ClientProfile, TimeProfile, custom_profile
from chaos.scenario.model import Scenario, Variant

if TYPE_CHECKING:
    from chaos.cluster.cluster import KafkaCluster


def variant_client(variant: Variant) -> ClientProfile:
    """The client profile of a (resolved) variant: its settings, built as the guarantee its configuration
    really gives (``client_guarantee``, else the claimed ``guarantee``)."""
    return custom_profile(
        variant.client_profile or "custom",
        variant.client_guarantee or variant.guarantee,  # type: ignore[arg-type]  # validated
        producer=dict(variant.producer_config or {}),
        consumer=dict(variant.consumer_config or {}),
        description=variant.description,
    )


def scenario_id(scenario: Scenario, variant: Variant) -> str:
    return f"{scenario.scenario_id}[{variant.name}]"


def describe_run(
    scenario: Scenario,
    variant: Variant,
    cluster: KafkaCluster,
    time_profile: TimeProfile,
    seed: int | None,
    nodeid: str | None,
) -> ScenarioInfo:
    """``scenario.json`` at the run's start: the case, the variant's configuration, the cluster's."""
    return ScenarioInfo(
        scenario_id=scenario_id(scenario, variant),
        title=f"{scenario.title} — {variant.name}",
        case_id=scenario.case_id,
        source=scenario.source,
        symptom=scenario.symptom,
        guarantee=variant.guarantee,
        variant=variant.name,
        expected_verdict=variant.expected_verdict,
        client_profile=variant.client_profile,
        producer_config=redact(variant.producer_config or {}),
        consumer_config=redact(variant.consumer_config or {}),
        broker_config=dict(cluster.config.broker_config()),
        time_profile=time_profile.name,
        brokers=len(cluster.brokers) or None,
        kafka_version=cluster.config.kafka_version,
        seed=seed,
        expected_symptoms=scenario.symptoms(variant),
        remediation=scenario.remediation,
        nodeid=nodeid or scenario.nodeid(variant.name),
        started_ts=time.time(),
    )
