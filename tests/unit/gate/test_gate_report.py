"""The gate's results and files (chaos.gate.report) from synthetic case results: each case's outcome
(retries, flaky, calibration), the gate's verdict and exit code, gate.json (round trip, secrets redacted),
gate.md, and the JUnit XML read back by a real JUnit consumer (junitparser); the redaction function."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from junitparser import Error, Failure, JUnitXml, TestCase, TestSuite, xunit2

from chaos.gate.redact import MASK, redact
from chaos.gate.report import (
    Attempt,
    Calibration,
    CaseResult,
    GateReport,
    GateReportError,
    ThresholdRow,
    read_gate,
    write_gate,
)


def attempt(
    verdict: str | None = "pass",
    *,
    run_id: str = "run-1",
    failed_by: tuple[str, ...] = (),
    anomalies: dict[str, int] | None = None,
    thresholds: tuple[ThresholdRow, ...] = (),
    reasons: tuple[str, ...] = (),
    cut_short: str | None = None,
    error: str | None = None,
) -> Attempt:
    return Attempt(
        run_id,
        verdict,
        failed_by,
        anomalies or {},
        thresholds,
        reasons=reasons,
        report=f"tests/x/{run_id}/report.html",
        error=error,
        seconds=12.5,
        cut_short=cut_short,
    )


def case(name: str, *attempts: Attempt, calibration: tuple[Calibration, ...] = ()) -> CaseResult:
    return CaseResult(
        name,
        f"{name.lower()}_case",
        f"scenarios/t.py::test_{name.lower()}",
        "remediated",
        attempts,
        calibration,
    )


OK = ThresholdRow("longest_outage_s", 20, 4.5, True, "s", "whole run")
SLOW = ThresholdRow("p99_ack_latency_ms", 1000, 5750.0, False, "ms", "crash broker-1")
UNMEASURED = ThresholdRow(
    "heal_to_first_ack_s", 10, None, False, "s", "crash broker-1", "nothing acked after"
)
LOST = attempt("fail", failed_by=("lost_acked",), anomalies={"lost_acked": 217, "duplicate_in_log": 3})


def report(*cases: CaseResult, **kwargs: object) -> GateReport:
    """A gate report of ``cases`` whose lint found the claim not kept; advisory unless said otherwise (the
    cases alone decide), so each test judges what it is about."""
    kwargs.setdefault("lint_advisory", True)
    return GateReport(
        "examples/gate-weak.toml",
        "at_least_once",
        "ci",
        cases,
        lint={"kept": False, "strongest": None, "violations": [{"rule": "acks_1"}]},
        configuration={"producer": {"acks": "1", "sasl.password": "hunter2"}},
        started_ts=1.8e9,
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("attempts", "outcome"),
    [
        ((attempt("pass", thresholds=(OK,)),), "pass"),
        ((LOST,), "fail"),
        ((attempt("pass", thresholds=(SLOW,)),), "fail"),
        ((attempt("pass", thresholds=(UNMEASURED,)),), "unknown"),
        ((attempt("unknown", reasons=("precondition not met: the fault landed",)),), "unknown"),
        ((attempt("pass", cut_short="wait timed out"),), "unknown"),
        ((attempt("fail", cut_short="wait timed out"),), "fail"),
        ((LOST, attempt("pass", run_id="run-2")), "flaky"),
        ((attempt("unknown"), attempt("pass", run_id="run-2")), "pass"),
        ((LOST, attempt("unknown", run_id="run-2")), "fail"),
        ((LOST, attempt(None, run_id="run-2", error="DockerUnavailable: no engine")), "fail"),
        ((attempt(None, error="ScenarioError: boom"),), "error"),
        ((), "error"),
    ],
)
def test_a_cases_outcome_from_its_attempts(attempts: tuple[Attempt, ...], outcome: str) -> None:
    assert case("ISR2", *attempts).outcome == outcome


def test_a_pass_whose_calibration_did_not_show_the_fault_is_inconclusive() -> None:
    teeth = Calibration("vulnerable", "fail", False, "verdict pass, expected fail")
    result = case("ISR2", attempt("pass"), calibration=(teeth, Calibration("remediated", "pass", True)))
    assert result.outcome == "unknown"
    assert "calibration: vulnerable did not reach its expected verdict fail" in result.message()
    md = report(result, calibrate=True).markdown()
    assert "### Calibration" in md
    assert "| ISR2 | vulnerable | fail | **no** (verdict pass, expected fail) |" in md
    assert "| ISR2 | remediated | pass | yes |" in md


@pytest.mark.parametrize(
    ("outcomes", "allow_flaky", "errors", "verdict", "code"),
    [
        (("pass", "pass"), False, (), "pass", 0),
        (("pass", "fail", "error", "unknown"), False, (), "fail", 1),
        (("pass", "flaky"), False, (), "fail", 1),
        (("pass", "flaky"), True, (), "pass", 0),
        (("pass", "error", "unknown"), False, (), "error", 2),
        (("pass", "pass"), False, ("pytest ended with INTERRUPTED (exit 2)",), "error", 2),
        ((), False, (), "error", 2),
        (("pass", "unknown"), False, (), "inconclusive", 3),
    ],
)
def test_the_gates_verdict_and_exit_code(
    outcomes: tuple[str, ...], allow_flaky: bool, errors: tuple[str, ...], verdict: str, code: int
) -> None:
    by_outcome = {
        "pass": (attempt("pass"),),
        "fail": (LOST,),
        "flaky": (LOST, attempt("pass", run_id="run-2")),
        "unknown": (attempt("unknown"),),
        "error": (attempt(None, error="boom"),),
    }
    cases = tuple(case(f"C{i}", *by_outcome[o]) for i, o in enumerate(outcomes))
    gate = report(*cases, allow_flaky=allow_flaky, errors=errors)
    assert (gate.verdict, gate.exit_code) == (verdict, code)


def test_gate_json_round_trips_and_never_holds_a_secret(tmp_path: Path) -> None:
    flaky = case("L2", LOST, attempt("pass", run_id="run-2", thresholds=(OK,)))
    gate = report(
        case("ISR2", attempt("fail", failed_by=("lost_acked",), anomalies={"lost_acked": 3})), flaky
    )
    written = write_gate(tmp_path, gate)
    assert [p.name for p in written] == ["gate.json", "gate.md", "junit.xml"]
    text = (tmp_path / "gate.json").read_text(encoding="utf-8")
    assert "hunter2" not in text
    data = json.loads(text)
    assert data["configuration"]["producer"] == {"acks": "1", "sasl.password": MASK}
    assert (data["verdict"], data["exit_code"]) == ("fail", 1)
    l2 = data["cases"][1]
    assert (l2["case"], l2["outcome"], l2["flaky"], l2["retries"], l2["verdict"]) == (
        "L2",
        "flaky",
        True,
        1,
        "pass",
    )
    assert l2["thresholds"][0] == {
        "name": "longest_outage_s",
        "limit": 20,
        "observed": 4.5,
        "passed": True,
        "unit": "s",
        "window": "whole run",
        "note": "",
    }
    assert l2["report"] == "tests/x/run-2/report.html"
    back = read_gate(tmp_path)
    assert back is not None
    assert back.to_dict() == gate.to_dict()
    assert read_gate(tmp_path / "nowhere") is None
    (tmp_path / "gate.json").write_text('{"format": 99}', encoding="utf-8")
    with pytest.raises(GateReportError, match="format 99"):
        read_gate(tmp_path)


def test_gate_md_names_the_cases_anomalies_and_thresholds_with_numbers() -> None:
    failing = attempt("fail", failed_by=("lost_acked",), anomalies={"lost_acked": 217}, thresholds=(OK, SLOW))
    md = report(case("ISR2", failing), case("PB1", attempt("pass", thresholds=(OK,)))).markdown()
    assert md.startswith(
        "## ❌ chaos gate FAILED (exit 1): claims at_least_once; 2 case(s): 1 pass; 1 fail (ISR2)"
    )
    assert (
        "at_least_once **NOT KEPT by the configuration (lint)** — the run did not reproduce it (`acks_1`"
        in md
    )
    row = next(line for line in md.splitlines() if line.startswith("| ISR2 |"))
    assert "**fail**" in row
    assert "lost_acked 217 (forbidden)" in row
    assert "✗ p99_ack_latency_ms 5750 ms > 1000 ms (crash broker-1)" in row
    assert "[report](tests/x/run-1/report.html)" in row
    assert (
        "- **ISR2** (fail): lost_acked: 217 (forbidden); threshold p99_ack_latency_ms 5750 ms > 1000 ms" in md
    )


def test_junit_has_one_testcase_per_case_read_back_by_junitparser(tmp_path: Path) -> None:
    failing = attempt("fail", failed_by=("lost_acked",), anomalies={"lost_acked": 217}, thresholds=(OK, SLOW))
    gate = report(
        case("ISR2", failing),
        case("L2", LOST, attempt("pass", run_id="run-2")),
        case("D1", attempt("unknown", reasons=("precondition not met: an ack was lost",))),
        case("MPI1", attempt(None, error="ScenarioError: boom")),
        case("PB1", attempt("pass", thresholds=(OK,))),
    )
    path = tmp_path / "out" / "gate-junit.xml"
    write_gate(tmp_path, gate, path)
    for flavour in (JUnitXml, xunit2.JUnitXml):
        xml = flavour.fromfile(str(path))
        suites = list(xml)
        assert len(suites) == 1
        suite = suites[0]
        assert isinstance(suite, TestSuite)
        assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (5, 2, 2, 0)
        cases = {c.name: c for c in suite if isinstance(c, TestCase)}
        assert list(cases) == ["ISR2", "L2", "D1", "MPI1", "PB1"]
        assert cases["PB1"].is_passed
        (failure,) = cases["ISR2"].result
        assert isinstance(failure, Failure)
        assert failure.type == "fail"
        assert failure.message is not None
        assert "lost_acked: 217 (forbidden)" in failure.message
        assert "threshold p99_ack_latency_ms 5750 ms > 1000 ms (crash broker-1)" in failure.message
        assert "(report: tests/x/run-1/report.html)" in failure.message
        (flaky,) = cases["L2"].result
        assert isinstance(flaky, Failure)
        assert flaky.type == "flaky"
        assert flaky.message is not None
        assert flaky.message.startswith("L2: flaky — flaky: failed 1 time(s)")
        (inconclusive,) = cases["D1"].result
        assert isinstance(inconclusive, Error)
        assert inconclusive.type == "inconclusive"
        (error,) = cases["MPI1"].result
        assert isinstance(error, Error)
        assert error.type == "error"
        assert cases["ISR2"].system_out is not None
        assert "report: tests/x/run-1/report.html" in cases["ISR2"].system_out
        assert all(c.classname == "chaos.gate.gate-weak" for c in cases.values())
    # the common JUnit schema's structure: testsuites > testsuite (properties, testcase*, system-err?), each
    # testcase (failure|error)? then system-out
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    suite_el = root.find("testsuite")
    assert suite_el is not None
    assert {"name", "tests", "failures", "errors", "skipped", "time", "timestamp", "hostname"} <= set(
        suite_el.attrib
    )
    assert [child.tag for child in suite_el] == ["properties", *["testcase"] * 5]
    for testcase in suite_el.iter("testcase"):
        assert {"name", "classname", "time"} <= set(testcase.attrib)
        assert [c.tag for c in testcase][-1] == "system-out"


def test_an_allowed_flaky_case_passes_in_junit_but_is_still_reported() -> None:
    gate = report(case("L2", LOST, attempt("pass", run_id="run-2")), allow_flaky=True)
    assert gate.exit_code == 0
    xml = JUnitXml.fromstring(gate.junit_xml())
    suite = next(iter(xml))
    assert isinstance(suite, TestSuite)
    (only,) = [c for c in suite if isinstance(c, TestCase)]
    assert only.is_passed
    assert only.system_out is not None
    assert "outcome: flaky" in only.system_out
    assert "1 flaky (L2)" in gate.headline()


def test_redact_masks_every_secret_key_at_any_depth() -> None:
    config = {
        "acks": "all",
        "sasl.password": "p",
        "ssl.key.password": "p",
        "sasl.oauthbearer.client.secret": "s",
        "sasl.jaas.config": "j",
        "my.api.token": "t",
        "ssl.key.pem": "k",
        "nested": {"basic.auth.user.info.password": "x", "linger.ms": 5},
        "sasl.username": "alice",
    }
    assert redact(config) == {
        "acks": "all",
        "sasl.password": MASK,
        "ssl.key.password": MASK,
        "sasl.oauthbearer.client.secret": MASK,
        "sasl.jaas.config": MASK,
        "my.api.token": MASK,
        "ssl.key.pem": MASK,
        "nested": {"basic.auth.user.info.password": MASK, "linger.ms": 5},
        "sasl.username": "alice",
    }


def test_the_log_policy_and_traffic_notes_in_gate_md_and_the_retention_in_why(tmp_path: Path) -> None:
    expired = (
        "expired 300, 270 of them unread by the group (retention.ms=3000, cleanup.policy=delete): removed by "
        "retention before the group read them: retention shorter than the group's outage"
    )
    l6 = Attempt(
        "l6-1",
        "fail",
        ("expired_unread",),
        {"expired_unread": 270},
        notes=("traffic: values of 500 bytes, 16 keys (sequential); the case's rate", expired),
    )
    compacted = "compacted 340 (cleanup.policy=compact): values superseded by a later value of their key"
    l2 = Attempt("l2-1", "pass", notes=(compacted,))
    o6 = Attempt("o6-1", "pass", notes=("traffic not applicable: its own transform's output",))
    gate = report(case("L6", l6), case("L2", l2), case("O6", o6))
    md = gate.markdown()
    assert f"- **L6** (fail): expired_unread: 270 (forbidden); {expired}" in md
    assert "### How each case ran" in md
    assert f"- **L2**: {compacted}" in md
    assert "- **O6**: traffic not applicable: its own transform's output" in md
    write_gate(tmp_path, gate)
    back = read_gate(tmp_path)
    assert back is not None
    assert back.cases[0].attempts[0].notes == l6.notes  # gate.json keeps them
