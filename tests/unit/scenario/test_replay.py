"""``chaos replay RUN_DIR`` reruns a run's resolved plan with its scenario, variant, seed and profile;
durations parse as users type them; a variant that needs a long run is skipped before it opens."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from chaos.errors import ConfigError
from chaos.faults.plan import RESOLVED_PLAN_FILE, FaultStep, Plan
from chaos.run.durations import parse_duration
from chaos.run.layout import PLAN_NAME
from chaos.run.manifest import ScenarioInfo, write_scenario
from chaos.scenario import ScenarioDefinitionError, ScenarioError, ScenarioRun, Variant, find
from chaos.scenario.replay import replay_of
from tests.unit.scenario.test_scenario_runner import cluster

PLAN = Plan(5, 3, (FaultStep(1.0, 2.0, "crash", 2),), 600.0)


@pytest.mark.parametrize(
    ("text", "seconds"), [("60", 60.0), ("90s", 90.0), ("5m", 300.0), ("1.5m", 90.0), ("1h", 3600.0)]
)
def test_durations_take_seconds_or_a_unit(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0", "5x", "-3s", "m", "1 minute"])
def test_a_bad_duration_names_the_forms_it_takes(text: str) -> None:
    with pytest.raises(ConfigError, match="60, 90s, 5m"):
        parse_duration(text)


def _run_dir(tmp_path: Path, scenario_id: str = "random[remediated]", *plans: str) -> Path:
    run = tmp_path / "run"
    write_scenario(
        run,
        ScenarioInfo(
            scenario_id=scenario_id, case_id="RN1", seed=5, time_profile="ci", kafka_version="4.1.1"
        ),
    )
    for name in plans:
        (run / name).write_text(PLAN.to_json())
    return run


def test_a_replay_runs_the_resolved_plan_with_the_runs_settings(tmp_path: Path) -> None:
    run = _run_dir(tmp_path, "random[remediated]", PLAN_NAME, RESOLVED_PLAN_FILE)
    again = replay_of(run)
    assert (again.scenario.case_id, again.variant, again.seed, again.profile) == (
        "RN1",
        "remediated",
        5,
        "ci",
    )
    assert again.plan == PLAN
    assert again.plan_file == (run / RESOLVED_PLAN_FILE).absolute()
    args = again.pytest_args()
    assert args[0].endswith("test_rn1_random_nemesis.py::test_random[remediated]")
    for option, value in (
        ("--chaos-plan", str(run.absolute() / RESOLVED_PLAN_FILE)),
        ("--chaos-seed", "5"),
        ("--chaos-profile", "ci"),
        ("--kafka-version", "4.1.1"),
        ("--chaos-report-dir", str(run.absolute() / "replay")),  # the run replayed is never emptied
    ):
        assert args[args.index(option) + 1] == value
    assert args.count("--chaos-report-dir") == 1
    elsewhere = replay_of(run, tmp_path / "elsewhere").pytest_args()
    assert elsewhere[elsewhere.index("--chaos-report-dir") + 1] == str(tmp_path / "elsewhere")


def test_a_run_that_did_not_end_replays_its_drawn_plan(tmp_path: Path) -> None:
    run = _run_dir(tmp_path, "random[remediated]", PLAN_NAME)
    assert replay_of(run).plan_file.name == PLAN_NAME


@pytest.mark.parametrize(
    ("scenario_id", "plans", "match"),
    [
        ("random[remediated]", (), "only a run whose scenario ran a fault plan"),
        ("random[gate]", (PLAN_NAME,), "is a gate run"),
        ("random", (PLAN_NAME,), "names no catalog case and variant"),
    ],
)
def test_what_cannot_be_replayed_says_why(
    tmp_path: Path, scenario_id: str, plans: tuple[str, ...], match: str
) -> None:
    with pytest.raises(ScenarioError, match=match):
        replay_of(_run_dir(tmp_path, scenario_id, *plans))
    with pytest.raises(ScenarioError, match=r"no scenario\.json"):
        replay_of(tmp_path / "elsewhere")


def test_the_weak_random_variant_needs_a_long_run_and_the_strong_one_does_not(tmp_path: Path) -> None:
    scenario = find("RANDOM")
    assert scenario.case_id == "RN1"
    weak = ScenarioRun(scenario, "vulnerable", cluster(3), tmp_path)
    assert weak.too_short() is not None
    assert "--chaos-duration 10m" in (weak.too_short() or "")
    assert ScenarioRun(scenario, "vulnerable", cluster(3), tmp_path, duration_s=600.0).too_short() is None
    assert ScenarioRun(scenario, "vulnerable", cluster(3), tmp_path, replay=PLAN).too_short() is None
    brief = Plan(5, 3, PLAN.steps, 20.0)  # a shrunk plan: replayed whatever its length
    assert ScenarioRun(scenario, "vulnerable", cluster(3), tmp_path, replay=brief).too_short() is None
    assert "60 s" in (
        ScenarioRun(scenario, "vulnerable", cluster(3), tmp_path, duration_s=60).too_short() or ""
    )
    assert ScenarioRun(scenario, "remediated", cluster(3), tmp_path).too_short() is None
    assert not (tmp_path / weak.run_id).exists()  # nothing opened


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["run", "RANDOM", "--duration", "5x"], "60, 90s, 5m"),
        (["replay", "."], "has no scenario.json"),
    ],
)
def test_bad_input_exits_2_with_the_fix(tmp_path: Path, args: list[str], says: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "from chaos.cli import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert says in proc.stdout + proc.stderr


def test_chaos_run_passes_the_variant_duration_and_seed_to_pytest(monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from chaos.cli import cli

    called: list[list[str]] = []

    def main(args: list[str]) -> int:
        called.append(args)
        return 0

    monkeypatch.setattr(pytest, "main", main)
    result = CliRunner().invoke(
        cli,
        [
            "run",
            "RANDOM",
            "--variant",
            "vulnerable",
            "--duration",
            "10m",
            "--seed",
            "3",
            "--fault-kinds",
            "all",
        ],
    )
    assert result.exit_code == 0, result.output
    (args,) = called
    assert args[0].endswith("test_rn1_random_nemesis.py::test_random[vulnerable]")
    assert args[args.index("--chaos-duration") + 1] == "10m"
    assert args[args.index("--chaos-seed") + 1] == "3"
    assert args[args.index("--chaos-fault-kinds") + 1] == "all"
    assert "test_random[vulnerable]" in result.output  # printed as given, not eaten as rich markup
    bad = CliRunner().invoke(cli, ["run", "RANDOM", "--fault-kinds", "crash,meteor"])
    assert bad.exit_code == 2, bad.output
    assert "meteor not known" in bad.output
    assert len(called) == 1


def test_a_variant_whose_case_cannot_happen_on_a_client_is_skipped_there_saying_why(tmp_path: Path) -> None:
    """L6's trap (an auto-commit of a batch still being processed) does not exist on the Java consumer,
    whose auto-commit runs inside poll(): its vulnerable variant is not applicable there, and says why;
    on librdkafka it runs, and so does the remediated variant on both."""
    scenario = find("L6")
    java = ScenarioRun(scenario, "vulnerable", cluster(3), tmp_path)
    java.workers.client_library = "java"  # as --chaos-client java sets it (without building the worker here)
    assert "does not apply on the java client" in (java.not_applicable() or "")
    assert "poll()" in (java.not_applicable() or "")
    assert ScenarioRun(scenario, "vulnerable", cluster(3), tmp_path).not_applicable() is None
    remediated = ScenarioRun(scenario, "remediated", cluster(3), tmp_path)
    remediated.workers.client_library = "java"
    assert remediated.not_applicable() is None
    assert ScenarioRun(find("RANDOM"), "vulnerable", cluster(3), tmp_path).not_applicable() is not None
    with pytest.raises(ScenarioDefinitionError, match="not_on_clients"):
        Variant("v", "d", not_on_clients={"kafka-python": "no"})
