"""``chaos replay RUN_DIR``: the pytest command that runs a saved run's plan and configuration again.

A run that ran a plan (:meth:`~chaos.scenario.runner.ScenarioRun.nemesis`) left ``plan.json`` and, once it
ended, ``plan.resolved.json`` — the steps that ran, each aimed at the broker it hit. The replay runs the
same scenario and variant with the run's seed, time profile and Kafka version, and that plan
(``--chaos-plan``) in place of a drawn one, into a report directory of its own (``RUN_DIR/replay``): a
session empties its tests' directories in its report tree, and the original run must survive its replay.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from chaos.faults.plan import RESOLVED_PLAN_FILE, Plan
from chaos.run.layout import PLAN_NAME
from chaos.run.manifest import read_scenario
from chaos.scenario.model import Scenario, ScenarioError
from chaos.scenario.registry import find, pytest_args

_VARIANT = re.compile(r".*\[([a-z][a-z0-9_]*)\]")


@dataclass(frozen=True)
class Replay:
    """What a replay of ``run_dir`` runs."""

    scenario: Scenario
    variant: str
    seed: int | None
    profile: str
    kafka_version: str | None
    plan_file: Path
    plan: Plan
    out: Path
    """The replay's report directory: never the run's own tree, whose test directory the replay of the
    same test would empty (``RUN_DIR/replay`` by default)."""

    def pytest_args(self, extra: tuple[str, ...] = ()) -> list[str]:
        options: tuple[str, ...] = ("--chaos-plan", str(self.plan_file))
        if self.kafka_version:
            options += ("--kafka-version", self.kafka_version)
        return pytest_args(
            self.scenario,
            seed=self.seed,
            profile=self.profile,
            variant=self.variant,
            extra=options + extra,
            report_dir=self.out,
        )


def plan_file(run_dir: Path) -> Path:
    """The plan a replay of ``run_dir`` runs: ``plan.resolved.json``, else (a run that did not end)
    ``plan.json``; :class:`ScenarioError` when the run ran no plan."""
    for name in (RESOLVED_PLAN_FILE, PLAN_NAME):
        if (run_dir / name).is_file():
            return run_dir / name
    raise ScenarioError(
        f"{run_dir} has no {PLAN_NAME}: only a run whose scenario ran a fault plan (RN1, `chaos run RANDOM`, "
        "or a scenario calling run.nemesis()) can be replayed; give that run's directory"
    )


def replay_of(run_dir: Path, out: Path | None = None) -> Replay:
    """Read ``run_dir``'s ``scenario.json`` and plan; errors name the file and what to give instead.
    ``out``: the replay's report directory (default ``RUN_DIR/replay``)."""
    info = read_scenario(run_dir)
    if info is None:
        raise ScenarioError(f"{run_dir} has no scenario.json: give the directory of one scenario run")
    match = _VARIANT.fullmatch(info.scenario_id)
    if match is None or info.case_id is None:
        raise ScenarioError(
            f"{run_dir}/scenario.json names no catalog case and variant ({info.scenario_id!r})"
        )
    variant = match.group(1)
    if variant == "gate":
        raise ScenarioError(
            f"{run_dir} is a gate run: run its gate file again with the same seed "
            f"(chaos gate GATE_FILE --seed {info.seed})"
        )
    path = plan_file(run_dir)
    return Replay(
        scenario=find(info.case_id),
        variant=variant,
        seed=info.seed,
        profile=info.time_profile or "ci",
        kafka_version=info.kafka_version,
        plan_file=path.absolute(),
        plan=Plan.read(path),
        out=(out or run_dir / "replay").absolute(),
    )
