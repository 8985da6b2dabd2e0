"""Evidence without Docker: symptoms never change the verdict, an unmet precondition makes it unknown,
``evidence.json`` round-trips and a malformed one is refused with its path; ``ScenarioResult.judge`` checks
the verdict always and symptoms only in strict mode."""

from __future__ import annotations

from pathlib import Path

import pytest

from chaos.audit.facts import ANOMALIES, AnomalyReport, AuditFacts, Availability, Totals
from chaos.audit.verdict import judge
from chaos.run.evidence import Check, Evidence, EvidenceError, EvidenceLog, read_evidence, write_evidence
from chaos.scenario import ScenarioResult


def audit(lost: int = 0) -> object:
    reports = {name: AnomalyReport(0) for name in ANOMALIES}
    reports["lost_acked"] = AnomalyReport(lost)
    facts = AuditFacts(
        "r",
        tuple((n, reports[n]) for n in ANOMALIES),
        Availability(0.0, None, None, ()),
        Totals(1, 1, 0, 0, 1, 1),
    )
    return judge(facts, "at_least_once", "reference")


def result(tmp_path: Path, *, lost: int = 0, expected: str = "pass", strict: bool = False) -> ScenarioResult:
    return ScenarioResult(
        run_dir=tmp_path,
        run_id="r",
        topic="t",
        audit=audit(lost),  # type: ignore[arg-type]
        events=(),
        drained=(),
        expected_verdict=expected,
        checks=EvidenceLog(strict),
    )


def test_symptoms_are_evidence_and_preconditions_decide_unknown() -> None:
    evidence = Evidence(
        (Check("symptom", "a log line", False, "not seen"), Check("precondition", "the cut landed", True))
    )
    assert evidence.verdict("pass") == "pass"
    assert evidence.missing_symptoms() == (Check("symptom", "a log line", False, "not seen"),)
    unmet = Evidence((Check("precondition", "the cut landed", False, "ISR never shrank"),))
    assert unmet.verdict("pass") == "unknown"
    assert unmet.verdict("fail") == "unknown"
    assert unmet.reasons() == ("precondition not met: the cut landed (ISR never shrank)",)


def test_evidence_json_round_trips_and_refuses_garbage(tmp_path: Path) -> None:
    assert read_evidence(tmp_path) is None
    evidence = Evidence((Check("symptom", "x", True, "3 lines"),), strict=True)
    write_evidence(tmp_path, evidence)
    assert read_evidence(tmp_path) == evidence
    assert [p.name for p in tmp_path.iterdir()] == ["evidence.json"]  # no temporary file left
    (tmp_path / "evidence.json").write_text('{"format": 1, "checks": [{"kind": "rumour"}]}')
    with pytest.raises(EvidenceError, match=r"Check\.kind: expected one of symptom, precondition"):
        read_evidence(tmp_path)
    (tmp_path / "evidence.json").write_text("{not json")
    with pytest.raises(EvidenceError, match=r"evidence\.json: not readable JSON"):
        read_evidence(tmp_path)


def test_a_check_needs_a_description_and_a_bool() -> None:
    with pytest.raises(EvidenceError, match="description"):
        Check("symptom", " ", True)
    with pytest.raises(EvidenceError, match="observed"):
        Check("symptom", "x", 1)  # type: ignore[arg-type]


def test_judge_fails_on_the_verdict_not_on_a_missing_symptom(tmp_path: Path) -> None:
    passing = result(tmp_path)
    assert passing.symptom("the client logged a timeout", False, "no such line") is False
    passing.judge()  # a missing symptom is evidence, not a failure
    assert read_evidence(tmp_path) == Evidence(
        (Check("symptom", "the client logged a timeout", False, "no such line"),)
    )
    failing = result(tmp_path, lost=3)
    with pytest.raises(AssertionError, match="verdict fail, expected pass"):
        failing.judge()


def test_strict_mode_fails_on_a_missing_symptom(tmp_path: Path) -> None:
    strict = result(tmp_path, strict=True)
    strict.symptom("seen", True)
    strict.judge()
    strict.symptom("never seen", False, "0 lines")
    with pytest.raises(AssertionError, match=r"strict symptoms: not observed: never seen \(0 lines\)"):
        strict.judge()


def test_an_unmet_precondition_is_inconclusive_never_a_pass(tmp_path: Path) -> None:
    run = result(tmp_path)
    assert run.precondition("the leader was cut", False, "leader never changed") is False
    assert run.verdict == "unknown"
    assert "inconclusive: precondition not met: the leader was cut" in run.summary()
    with pytest.raises(AssertionError, match="verdict unknown, expected pass — precondition not met"):
        run.judge()


def test_declared_symptoms_are_checked_against_the_history(tmp_path: Path) -> None:
    from chaos.run.events import ClientLog, ProbeCall
    from chaos.run.manifest import ExpectedSymptom

    events = (
        ProbeCall(
            run_id="r", process="restore", operation="list_offsets", duration_ms=6.0, error="_DESTROY_BROKER"
        ),
        ClientLog(run_id="r", process="p", level="warning", message="Timed out ProduceRequest in flight"),
    )
    run = ScenarioResult(tmp_path, "r", "t", audit(), events, (), "pass")  # type: ignore[arg-type]
    run.check_declared(
        (
            ExpectedSymptom("error_code", "_TIMED_OUT|_DESTROY_BROKER", regex=True),
            ExpectedSymptom("error_code", "_TIMED_OUT"),
            ExpectedSymptom("client_log", "Timed out ProduceRequest"),
            ExpectedSymptom("broker_log", "Shrinking ISR"),  # the report's to match, in the broker logs
        )
    )
    assert [(c.description, c.observed) for c in run.evidence.checks] == [
        ("error_code '_TIMED_OUT|_DESTROY_BROKER'", True),
        ("error_code '_TIMED_OUT'", False),
        ("client_log 'Timed out ProduceRequest'", True),
    ]


def test_a_clients_fatal_error_is_recorded_as_evidence_not_as_the_verdict(tmp_path: Path) -> None:
    from chaos.run.events import ClientLog
    from chaos.workload.common import CLIENT_FATAL

    events = (
        ClientLog(run_id="r", process="p0", level="critical", message="librdkafka's line", facility="FATAL"),
        ClientLog(
            run_id="r", process="p0", level="critical", facility=CLIENT_FATAL, error="_INCONSISTENT",
            fatal=True, message="fatal error of instance 1: ...; it was closed, a new instance continues",
        ),
    )  # fmt: skip
    run = ScenarioResult(tmp_path, "r", "t", audit(), events, (), "pass")  # type: ignore[arg-type]
    run.record_client_failures()
    assert [(c.kind, c.description, c.observed) for c in run.evidence.checks] == [
        ("symptom", "p0's client failed fatally (_INCONSISTENT)", True)
    ]
    assert run.verdict == "pass"
    run.judge()
