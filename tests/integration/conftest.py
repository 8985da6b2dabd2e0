"""The harness's own integration tests audit their runs with the reference engine.

They test the cluster, the faults and the workload; the audit's two engines are proven equal by the unit
property tests (tests/unit/audit/test_audit_properties.py and its siblings, Spark against the reference),
and Spark audits real runs in the catalog's scenarios (``make chaos``; in ``make test`` ISR2's vulnerable
run) and on a standalone Spark cluster (test_spark_standalone.py). A Spark audit costs ≈ 12–30 s per small
run on a 2-core machine (docs/audit.md, "Per-run cost"); these ~25 runs would add ≈ 8 min to ``make test``.
A test here may still ask for Spark: ``scenario_run(SCENARIO, variant, engine="spark")``.

A test marked ``own_cluster`` starts a cluster of its own (or a ``chaos gate`` / pytest process that does):
those run first, in their collected order, before any test starts the session's cluster, so two clusters
never share the machine's cores.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from chaos.audit.run import Engine
    from chaos.faults.plan import Plan
    from chaos.scenario import Scenario, ScenarioRun

INTEGRATION_ENGINE: Engine = "reference"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    own = [item for item in items if item.get_closest_marker("own_cluster") is not None]
    if own:
        items[:] = own + [item for item in items if item.get_closest_marker("own_cluster") is None]


@pytest.fixture
def scenario_run(scenario_run: Callable[..., ScenarioRun]) -> Callable[..., ScenarioRun]:
    """The plugin's factory, with the reference engine unless a test names one."""

    def make(
        scenario: Scenario,
        variant: str,
        engine: Engine = INTEGRATION_ENGINE,
        *,
        replay: Plan | None = None,
        client_library: str | None = None,
    ) -> ScenarioRun:
        return scenario_run(scenario, variant, engine, replay=replay, client_library=client_library)

    return make
