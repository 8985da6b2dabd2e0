"""Scenario definitions: validation messages, variants, node ids; the registry finds the real scenarios."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from chaos.cli import cli
from chaos.paths import REPO_ROOT
from chaos.run.manifest import ExpectedSymptom
from chaos.scenario import (
    Scenario,
    ScenarioDefinitionError,
    ScenarioError,
    Variant,
    discover,
    find,
)


def variant(*names: str, **kwargs: object) -> Variant:
    fields: dict[str, object] = {
        "name": names[0] if names else "vulnerable",
        "description": "a configuration",
        "guarantee": "at_least_once",
        "expected_verdict": "pass",
    }
    fields.update(kwargs)
    return Variant(**fields)  # type: ignore[arg-type]


def scenario(**kwargs: object) -> Scenario:
    fields: dict[str, object] = {
        "scenario_id": "pb_cut_one_broker_then_start_client",
        "case_id": "PB1",
        "title": "t",
        "source": "002",
        "symptom": "Failed to get offsets by times in 30000ms",
        "variants": (variant("vulnerable"), variant("remediated")),
        "module": "scenarios/test_pb1.py",
        "test": "test_pb1",
    }
    fields.update(kwargs)
    return Scenario(**fields)  # type: ignore[arg-type]


def test_a_valid_scenario_gives_node_ids_and_variants() -> None:
    s = scenario()
    assert s.variant_names == ("vulnerable", "remediated")
    assert s.nodeid() == "scenarios/test_pb1.py::test_pb1"
    assert s.nodeid("remediated") == "scenarios/test_pb1.py::test_pb1[remediated]"
    assert s.variant("vulnerable").guarantee == "at_least_once"
    with pytest.raises(ScenarioError, match="no variant 'crash'; variants: vulnerable, remediated"):
        s.nodeid("crash")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"scenario_id": "PB1"}, "catalog's snake-case id"),
        ({"case_id": "pb1"}, "case ids look like 'PB1'"),
        ({"related": ("L-4",)}, "case ids look like 'PB1'"),
        ({"symptom": " "}, "symptom must be a non-empty str"),
        ({"module": "tests/test_x.txt"}, "module must be a path like 'scenarios/test_x.py'"),
        ({"variants": ()}, "needs at least one Variant"),
        ({"variants": (variant("vulnerable"), variant("vulnerable"))}, "variant names repeat"),
    ],
)
def test_invalid_scenarios_say_what_to_change(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ScenarioDefinitionError, match=message):
        scenario(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "Vulnerable"}, "Variant.name"),
        ({"name": "bad name"}, "Variant.name"),
        ({"guarantee": "exactly_twice"}, "guarantee must be one of at_most_once"),
        ({"expected_verdict": "ok"}, "expected_verdict must be one of pass, fail, unknown"),
        ({"topic_config": {"min.insync.replicas": [2]}}, "topic_config: expected a mapping"),
        ({"expected_symptoms": ["_TIMED_OUT"]}, "tuple of ExpectedSymptom"),
        ({"description": ""}, "description must be a non-empty str"),
    ],
)
def test_invalid_variants_say_what_to_change(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ScenarioDefinitionError, match=message):
        variant(**kwargs)


def test_variant_settings_are_frozen_and_topic_config_is_stringified() -> None:
    v = variant(topic_config={"unclean.leader.election.enable": True, "min.insync.replicas": 2})
    assert v.topic_settings() == {"min.insync.replicas": "2", "unclean.leader.election.enable": "true"}
    with pytest.raises(TypeError):
        v.topic_config["x"] = 1  # type: ignore[index]


def test_symptoms_are_the_scenarios_then_the_variants() -> None:
    common = ExpectedSymptom("broker_log", "Shrinking ISR")
    own = ExpectedSymptom("error_code", "_TIMED_OUT")
    s = scenario(
        expected_symptoms=(common,),
        variants=(variant("vulnerable", expected_symptoms=(own,)), variant("remediated")),
    )
    assert s.symptoms(s.variant("vulnerable")) == (common, own)
    assert s.symptoms(s.variant("remediated")) == (common,)


def test_the_registry_finds_every_scenario_file_with_catalog_ids() -> None:
    found = discover()
    # The minimum set, in docs/catalog.md's section order.
    assert [s.case_id for s in found] == [
        "PB1", "PB4", "ISR2", "ISR3", "MD1", "MD2", "MD3", "MPI1", "L1", "L2", "L6", "D1", "D3", "O1", "O6",
        "CJ1", "DF1", "PL1", "RN1", "SV1",
    ]  # fmt: skip
    for s in found:
        path = REPO_ROOT / s.module  # absolute when filled in by @chaos_scenario
        assert path.is_file()
        source = path.read_text()
        assert f"def {s.test}(" in source
        assert "@chaos_scenario(SCENARIO)" in source
        # every catalog case proves both sides
        assert {"vulnerable", "remediated"} <= set(s.variant_names)
    assert find("pb1") == find("pb_cut_one_broker_then_start_client")
    with pytest.raises(ScenarioError, match="no scenario 'MD9'; known: PB1"):
        find("MD9")


def test_the_registry_refuses_a_broken_file_and_a_duplicate_id(tmp_path: Path) -> None:
    (tmp_path / "test_broken.py").write_text("raise RuntimeError('boom')\n")
    with pytest.raises(ScenarioError, match=r"test_broken\.py failed to import: RuntimeError"):
        discover(tmp_path)
    (tmp_path / "test_broken.py").unlink()
    text = (REPO_ROOT / "scenarios/test_mpi1_max_poll.py").read_text()
    (tmp_path / "test_a.py").write_text(text)
    (tmp_path / "test_b.py").write_text(text)
    with pytest.raises(ScenarioError, match="defined twice"):
        discover(tmp_path)


def test_chaos_list_shows_case_ids_and_variants() -> None:
    result = CliRunner().invoke(cli, ["list"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for case, variant_name in (("PB1", "crash"), ("ISR2", "unclean_off"), ("MPI1", "remediated_interval")):
        line = next(line for line in result.output.splitlines() if f" {case} " in line)
        assert variant_name in line


def test_chaos_run_refuses_an_unknown_scenario_or_variant() -> None:
    result = CliRunner().invoke(cli, ["run", "NOPE1"])
    assert isinstance(result.exception, ScenarioError)
    assert "chaos list" in str(result.exception)
    result = CliRunner().invoke(cli, ["run", "PB1", "--variant", "nope"])
    assert isinstance(result.exception, ScenarioError)
    assert "variants: vulnerable, remediated, long_timeout, crash" in str(result.exception)
