"""The public scenario API without Docker: Scenario defaults resolved into each Variant, the decorator's
parametrisation and verdict check (through pytester, with a stand-in run factory — the decorator's
mechanics, not a scenario), and the repo's collection rules (`pytest` vs `pytest -m chaos`)."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

from chaos.paths import REPO_ROOT
from chaos.scenario import Scenario, ScenarioDefinitionError, Variant, chaos_scenario
from chaos.workload import IDEMPOTENT


def scenario(*variants: Variant, **defaults: object) -> Scenario:
    return Scenario(
        scenario_id="my_case",
        case_id="X1",
        title="t",
        source="mine",
        symptom="s",
        variants=variants,
        **defaults,  # type: ignore[arg-type]
    )


def test_variants_take_the_scenarios_defaults_and_override_key_by_key() -> None:
    s = scenario(
        Variant("vulnerable", "acks=1", producer_config={"acks": 1}, expected_verdict="fail"),
        Variant("remediated", "the defaults"),
        guarantee="at_least_once",
        expected_verdict="pass",
        client=IDEMPOTENT,
        topic_config={"min.insync.replicas": 2},
        consumer_config={"enable.auto.commit": False},
    )
    vulnerable, remediated = s.variants
    assert vulnerable.expected_verdict == "fail"
    assert remediated.expected_verdict == "pass"
    assert vulnerable.guarantee == remediated.guarantee == "at_least_once"
    assert vulnerable.producer_config is not None
    assert remediated.producer_config is not None
    assert vulnerable.producer_config["acks"] == 1
    assert remediated.producer_config == dict(IDEMPOTENT.producer_settings)
    assert (
        vulnerable.producer_config["enable.idempotence"] == IDEMPOTENT.producer_settings["enable.idempotence"]
    )
    assert vulnerable.client_profile == IDEMPOTENT.name
    assert remediated.topic_settings() == {"min.insync.replicas": "2"}
    assert remediated.consumer_config == {**dict(IDEMPOTENT.consumer_settings), "enable.auto.commit": False}


def test_a_variant_without_guarantee_or_verdict_anywhere_is_refused() -> None:
    with pytest.raises(ScenarioDefinitionError, match="Variant only: no guarantee and expected_verdict"):
        scenario(Variant("only", "d"))
    with pytest.raises(ScenarioDefinitionError, match="Variant only: no expected_verdict"):
        scenario(Variant("only", "d"), guarantee="idempotent")


def test_the_decorator_needs_run_first() -> None:
    s = scenario(Variant("only", "d"), guarantee="at_least_once", expected_verdict="pass")
    with pytest.raises(ScenarioDefinitionError, match="the first parameter must be `run`"):

        @chaos_scenario(s)
        def test_x(cluster: object) -> None: ...


def test_the_decorator_marks_and_leaves_the_parametrisation_to_the_plugin() -> None:
    """The chaos plugin's ``pytest_generate_tests`` parametrizes ``variant`` (the built-in variant names, or
    the gate's under ``--chaos-gate``): the decorator only marks the test and records its scenario."""
    s = scenario(Variant("only", "d"), guarantee="at_least_once", expected_verdict="pass")

    @chaos_scenario(s)
    def test_x(run: object) -> None: ...

    assert [m.name for m in test_x.pytestmark] == ["chaos"]  # type: ignore[attr-defined]
    assert test_x.scenario is s  # type: ignore[attr-defined]
    assert list(inspect.signature(test_x).parameters) == ["scenario_run", "variant"]


def test_the_decorator_marks_parametrizes_finishes_and_judges(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import contextlib
        import pytest

        class Result:
            def __init__(self, verdict, expected):
                self.verdict, self.expected = verdict, expected
            def judge(self):
                assert self.verdict == self.expected, f"verdict {self.verdict}, expected {self.expected}"

        class Run:
            def __init__(self, scenario, variant):
                self.variant = scenario.variant(variant)
                self.result = None
            def finish(self):
                verdict = "fail" if self.variant.name == "broken" else "pass"
                self.result = Result(verdict, self.variant.expected_verdict)
                return self.result
            def not_applicable(self):
                return None
            def __enter__(self):
                return self
            def __exit__(self, *exc):
                return None

        @pytest.fixture
        def scenario_run():
            return Run
        """
    )
    pytester.makepyfile(
        """
        from chaos.scenario import Scenario, Variant, chaos_scenario

        SCENARIO = Scenario(
            scenario_id="my_case", case_id="X1", title="t", source="s", symptom="s",
            guarantee="at_least_once", expected_verdict="pass",
            variants=(Variant("good", "g"), Variant("broken", "b"), Variant("finished", "f")),
        )

        @chaos_scenario(SCENARIO)
        def test_mine(run, tmp_path):
            assert tmp_path.is_dir()  # other fixtures reach the body
            if run.variant.name == "finished":
                run.finish()
        """
    )
    result = pytester.runpytest("-m", "chaos", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*verdict fail, expected pass*"])
    assert pytester.runpytest("-m", "not chaos").ret == pytest.ExitCode.NO_TESTS_COLLECTED


def _collect(*args: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return [line for line in out.stdout.splitlines() if "::" in line]


def test_pytest_m_chaos_at_the_root_collects_every_scenario_and_plain_pytest_none() -> None:
    scenarios = _collect("-m", "chaos")
    assert len(scenarios) >= 38, scenarios
    assert all(line.startswith("scenarios/") for line in scenarios)
    plain = _collect()
    assert plain
    assert not any(line.startswith("scenarios/") for line in plain)
    named = _collect("scenarios/test_mpi1_max_poll.py")
    assert named == [
        f"scenarios/test_mpi1_max_poll.py::test_mpi1[{v}]"
        for v in ("vulnerable", "remediated", "remediated_interval")
    ]
