"""The full gate's pytest wiring without Docker (``pytest -m chaos --chaos-gate GATE_FILE``), through pytester
with a stand-in run factory whose audit the test's body decides: parametrisation (``[gate]``, calibration),
selection, the body's own checks as evidence, retries and flaky cases, thresholds in scenario.json, the
gate's files (gate.json, gate.md, JUnit, the index banner) and the session's exit code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

import pytest
from junitparser import JUnitXml, TestCase, TestSuite

CONFTEST: Final = """
import uuid

import pytest

from chaos.audit.facts import ANOMALIES, AnomalyReport, AuditFacts, Availability, Totals
from chaos.audit.verdict import judge
from chaos.history import SendInvoke
from chaos.run.evidence import EvidenceLog
from chaos.run.manifest import ScenarioInfo, write_scenario
from chaos.scenario.result import ScenarioResult


class Cluster:
    def wait_healthy(self, timeout_s=60.0):
        return None


class Run:
    '''Stands in for ScenarioRun: the body sets what the audit finds (counts, outage).'''

    def __init__(self, scenario, variant, root):
        self.variant = scenario.variant(variant) if isinstance(variant, str) else variant
        assert self.variant in scenario.variants
        self.scenario = scenario
        self.run_id = f"{scenario.case_id.lower()}-{self.variant.name}-{uuid.uuid4().hex[:6]}"
        self.dir = root / self.run_id
        self.result = None
        self.counts = {}
        self.outage = 1.0
        self.notes = []
        self.cluster = Cluster()

    def not_applicable(self):
        return None

    def __enter__(self):
        self.dir.mkdir(parents=True)
        write_scenario(self.dir, ScenarioInfo(scenario_id=self.run_id, guarantee=self.variant.guarantee))
        return self

    def __exit__(self, *exc):
        return None

    def note(self, text):
        self.notes.append(text)

    def finish(self):
        facts = AuditFacts(
            self.run_id,
            tuple((name, AnomalyReport(self.counts.get(name, 0))) for name in ANOMALIES),
            Availability(self.outage, 0.0, self.outage, ()),
            Totals(10, 10, 0, 0, 10, 10),
        )
        audit = judge(facts, self.variant.guarantee, "reference")
        sends = tuple(
            SendInvoke(
                run_id=self.run_id, process="p", mono=float(i), value_id=f"{self.run_id}:p:{i}", producer="p",
                seq=i, topic="t",
            )
            for i in range(2)
        )
        self.result = ScenarioResult(
            self.dir, self.run_id, "t", audit, sends, (), self.variant.expected_verdict, EvidenceLog()
        )
        return self.result


@pytest.fixture
def scenario_run(run_dir):
    return lambda scenario, variant: Run(scenario, variant, run_dir)
"""

CASES: Final = """
from chaos.scenario import Scenario, Variant, chaos_scenario

ATTEMPTS = {}


def scenario(case):
    return Scenario(
        scenario_id=f"case_{case.lower()}", case_id=case, title=f"case {case}", source="s", symptom="s",
        guarantee="at_least_once", expected_verdict="pass",
        variants=(Variant("vulnerable", "v", expected_verdict="fail"), Variant("remediated", "r")),
    )


def attempt(case):
    ATTEMPTS[case] = ATTEMPTS.get(case, 0) + 1
    return ATTEMPTS[case]


@chaos_scenario(scenario("X1"))
def test_x1(run):
    if run.variant.name == "vulnerable":
        run.counts["lost_acked"] = 4  # the fault has teeth


@chaos_scenario(scenario("X2"))
def test_x2(run):
    if attempt("X2") == 1:
        run.counts["lost_acked"] = 3  # fails once, then passes: flaky


@chaos_scenario(scenario("X3"))
def test_x3(run):
    result = run.finish()
    assert result.count("lost_acked") > 0, "a check written for the vulnerable variant"


@chaos_scenario(scenario("X4"))
def test_x4(run):
    assert False, "the group never caught up"  # before finish(): the timeline was cut short


@chaos_scenario(scenario("X5"))
def test_x5(run):
    run.outage = 50.0  # over the gate's 20 s


@chaos_scenario(scenario("X6"))
def test_x6(run):
    raise RuntimeError("not selected, never run")
"""

GATE: Final = """
guarantee = "at_least_once"
cases = {cases}
retries = 1

[producer.settings]
acks = "all"
"enable.idempotence" = true
"sasl.password" = "hunter2"

[thresholds]
longest_outage_s = 20
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.delenv("CHAOS_REPORT_DIR", raising=False)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_cases=CASES)
    return pytester


def gate(pytester: pytest.Pytester, cases: str) -> Path:
    path = pytester.path / "gate.toml"
    path.write_text(GATE.format(cases=cases), encoding="utf-8")
    return path


def run_gate(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-m", "chaos", "-p", "no:cacheprovider", "--chaos-gate", "gate.toml", *args)


def test_a_normal_run_keeps_the_variant_ids(project: pytest.Pytester) -> None:
    result = project.runpytest("-m", "chaos", "-p", "no:cacheprovider", "--collect-only", "-q")
    ids = [line for line in result.outlines if "::" in line]
    assert ids[:2] == ["test_cases.py::test_x1[vulnerable]", "test_cases.py::test_x1[remediated]"]
    assert len(ids) == 12


def test_the_gate_runs_each_selected_case_once_and_judges_it(project: pytest.Pytester) -> None:
    gate(project, '["X1", "X2", "X3", "X4", "X5"]')
    ids = [line for line in run_gate(project, "--collect-only", "-q").outlines if "::" in line]
    assert ids == [f"test_cases.py::test_x{i}[gate]" for i in range(1, 6)]  # X6 not selected

    result = run_gate(project)
    assert result.ret == 1  # X5's threshold failed, X2 was flaky
    result.assert_outcomes(passed=2, failed=3)
    result.stdout.fnmatch_lines(
        ["*= chaos gate =*", "gate FAILED (exit 1): claims at_least_once; 5 case(s)*"]
    )
    out = project.path / "reports" / "gate"
    data = json.loads((out / "gate.json").read_text(encoding="utf-8"))
    cases = {c["case"]: c for c in data["cases"]}
    assert {k: c["outcome"] for k, c in cases.items()} == {
        "X1": "pass",
        "X2": "flaky",
        "X3": "pass",
        "X4": "unknown",
        "X5": "fail",
    }
    assert (data["verdict"], data["exit_code"]) == ("fail", 1)
    assert "hunter2" not in (out / "gate.json").read_text(encoding="utf-8")
    assert any("sasl.password not passed" in n for n in data["configuration"]["not_passed_to_the_run"])
    # X2: failed (lost_acked 3), retried, passed
    x2 = cases["X2"]
    assert (x2["retries"], x2["flaky"]) == (1, True)
    assert [a["outcome"] for a in x2["attempts"]] == ["fail", "pass"]
    assert x2["attempts"][0]["anomalies"] == {"lost_acked": 3}
    # X3: the body's own assertion is evidence, not the verdict
    x3 = cases["X3"]["attempts"][0]
    assert x3["own_checks"] == ["a check written for the vulnerable variant"]
    run_dir = out / Path(x3["report"]).parent
    evidence = json.loads((run_dir / "evidence.json").read_text(encoding="utf-8"))
    (check,) = evidence["checks"]
    assert check["kind"] == "symptom"
    assert check["description"].startswith("the case's own check: a check written for the vulnerable variant")
    assert not check["observed"]
    # X4: cut short before the audit, retried, still inconclusive
    x4 = cases["X4"]
    assert [a["cut_short"] for a in x4["attempts"]] == ["the group never caught up"] * 2
    # X5: the threshold, in gate.json and in the run's scenario.json
    (threshold,) = cases["X5"]["thresholds"]
    assert (threshold["name"], threshold["observed"], threshold["limit"], threshold["passed"]) == (
        "longest_outage_s",
        50.0,
        20,
        False,
    )
    x5_dir = out / Path(cases["X5"]["report"]).parent
    scenario = json.loads((x5_dir / "scenario.json").read_text(encoding="utf-8"))
    assert scenario["thresholds"] == [
        {"name": "longest_outage_s", "limit": 20, "observed": 50.0, "passed": False, "unit": "s"}
    ]
    # the other outputs
    md = (out / "gate.md").read_text(encoding="utf-8")
    assert "longest_outage_s 50 s > 20 s (whole run)" in md
    xml = JUnitXml.fromfile(str(out / "junit.xml"))
    suite = next(iter(xml))
    assert isinstance(suite, TestSuite)
    names = [c.name for c in suite if isinstance(c, TestCase)]
    assert names == ["X1", "X2", "X3", "X4", "X5"]
    index = (out / "index.html").read_text(encoding="utf-8")
    assert '<section id="gate" class="banner fail">' in index
    assert "gate FAILED (exit 1)" in index


@pytest.mark.parametrize(
    ("cases", "args", "code", "verdict"),
    [
        ('["X1", "X3"]', (), 0, "pass"),
        ('["X1", "X4"]', (), 3, "inconclusive"),
        ('["X1", "X2"]', ("--chaos-gate-allow-flaky",), 0, "pass"),
    ],
)
def test_the_session_exits_with_the_gates_code(
    project: pytest.Pytester, cases: str, args: tuple[str, ...], code: int, verdict: str
) -> None:
    gate(project, cases)
    result = run_gate(project, *args)
    assert result.ret == code
    data = json.loads((project.path / "reports" / "gate" / "gate.json").read_text(encoding="utf-8"))
    assert (data["verdict"], data["exit_code"]) == (verdict, code)


def test_calibration_runs_the_built_in_variants_beside_the_gate(project: pytest.Pytester) -> None:
    gate(project, '["X1"]')
    result = run_gate(project, "--chaos-calibrate", "--chaos-gate-junit", "ci/junit.xml")
    result.assert_outcomes(passed=3)
    assert result.ret == 0
    out = project.path / "reports" / "gate"
    (x1,) = json.loads((out / "gate.json").read_text(encoding="utf-8"))["cases"]
    assert x1["calibration"] == [
        {"variant": "vulnerable", "expected": "fail", "matched": True, "detail": "reached it"},
        {"variant": "remediated", "expected": "pass", "matched": True, "detail": "reached it"},
    ]
    assert (project.path / "ci" / "junit.xml").is_file()
    assert not (out / "junit.xml").exists()


def test_bad_gate_input_is_a_usage_error_before_anything_runs(project: pytest.Pytester) -> None:
    (project.path / "gate.toml").write_text('guarantee = "idempotent"\n[producer.settings]\nacsk = 1\n')
    result = run_gate(project)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*chaos gate: gate.toml: the gate file cannot be used*", "*did you mean 'acks'*"]
    )
    gate(project, '["Z9"]')
    result = run_gate(project)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*Z9: not a catalog case*"])
    assert not (project.path / "reports" / "gate" / "gate.json").exists()


def test_a_case_another_filter_leaves_out_is_not_reported_missing(project: pytest.Pytester) -> None:
    gate(project, '["X1", "X5"]')
    result = run_gate(project, "-k", "x1")
    assert result.ret == 0
    data = json.loads((project.path / "reports" / "gate" / "gate.json").read_text(encoding="utf-8"))
    assert [c["case"] for c in data["cases"]] == ["X1"]
