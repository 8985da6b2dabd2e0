"""Scenario glue: a factory fixture that opens a :class:`~chaos.scenario.ScenarioRun` on the session's
cluster, in the test's run directory, with the session's seed and profile."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from chaos.audit.run import Engine
    from chaos.cluster.cluster import KafkaCluster
    from chaos.scenario import Scenario, ScenarioRun

    RunFactory = Callable[..., ScenarioRun]


@pytest.fixture
def scenario_run(
    request: pytest.FixtureRequest,
    pytestconfig: pytest.Config,
    kafka_cluster: KafkaCluster,
    run_dir: Path,
    chaos_seed: int,
) -> RunFactory:
    """``scenario_run(SCENARIO, "vulnerable", engine="reference")`` -> an unopened ScenarioRun."""
    from chaos.scenario import ScenarioRun

    def make(scenario: Scenario, variant: str, engine: Engine = "reference") -> ScenarioRun:
        return ScenarioRun(
            scenario,
            variant,
            kafka_cluster,
            run_dir,
            seed=chaos_seed,
            profile=pytestconfig.getoption("--chaos-profile"),
            nodeid=request.node.nodeid,
            engine=engine,
        )

    return make
