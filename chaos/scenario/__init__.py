"""Scenarios: docs/catalog.md cases composed from the pipeline (cluster → faults → workload → history → audit
→ gate → report). docs/scenarios.md describes each one; docs/writing-scenarios.md how to write one.

- :func:`chaos_scenario` — the decorator that makes a scenario's pytest test (marker, one case per variant,
  the verdict check);
- :class:`Scenario` / :class:`Variant` — the frozen definition of a case and its configurations
  (:class:`ClusterNeeds`: what its faults need of the cluster);
- :class:`ScenarioRun` — runs one variant on a cluster and returns a :class:`ScenarioResult` (audit
  result, history, evidence);
- :func:`discover` / :func:`find` — the catalog's scenarios (``chaos list`` / ``chaos run``).
"""

from chaos.cluster.config import ClusterNeeds
from chaos.faults.network import ReplicationCut
from chaos.run.manifest import ExpectedSymptom
from chaos.scenario.api import chaos_scenario
from chaos.scenario.bridge import fault_event
from chaos.scenario.model import Scenario, ScenarioDefinitionError, ScenarioError, Variant
from chaos.scenario.registry import discover, find, pytest_args, scenarios_dir
from chaos.scenario.result import ScenarioResult
from chaos.scenario.runner import ScenarioRun

__all__ = [
    "ClusterNeeds",
    "ExpectedSymptom",
    "ReplicationCut",
    "Scenario",
    "ScenarioDefinitionError",
    "ScenarioError",
    "ScenarioResult",
    "ScenarioRun",
    "Variant",
    "chaos_scenario",
    "discover",
    "fault_event",
    "find",
    "pytest_args",
    "scenarios_dir",
]
