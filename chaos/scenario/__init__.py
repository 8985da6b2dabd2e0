"""Scenarios: CATALOG.md cases composed from the pipeline (cluster → faults → workload → history → audit
→ gate → report). docs/scenarios.md describes each one.

- :class:`Scenario` / :class:`Variant` — the frozen definition of a case and its configurations;
- :class:`ScenarioRun` — runs one variant on a cluster and returns a :class:`ScenarioResult` (audit
  result + history) for assertions;
- :func:`discover` / :func:`find` — the scenarios under ``scenarios/`` (``chaos list`` / ``chaos run``).
"""

from chaos.scenario.faults import ReplicationCut
from chaos.scenario.model import Scenario, ScenarioDefinitionError, ScenarioError, Variant
from chaos.scenario.registry import discover, find, pytest_args, scenarios_dir
from chaos.scenario.runner import ScenarioResult, ScenarioRun, fault_event

__all__ = [
    "ReplicationCut",
    "Scenario",
    "ScenarioDefinitionError",
    "ScenarioError",
    "ScenarioResult",
    "ScenarioRun",
    "Variant",
    "discover",
    "fault_event",
    "find",
    "pytest_args",
    "scenarios_dir",
]
