"""One definition, one owner: ``audit.json`` through :mod:`chaos.audit.auditfile`, the manifest and the event
model under :mod:`chaos.run` (re-exported, not copied, by the report and the history), one
``PartitionState`` for live reads and samples, ``ReplicationCut`` in :mod:`chaos.faults.network`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import chaos.history
import chaos.report
import chaos.report.inputs
import chaos.run.manifest
import chaos.scenario
from chaos.audit.auditfile import audit_path, read_audit, write_audit
from chaos.audit.facts import ANOMALIES, AnomalyReport, AuditFacts, Availability, Example, Totals
from chaos.audit.verdict import AuditResult, judge
from chaos.cluster.introspect import partition_states
from chaos.cluster.wire import WireMetadata, WirePartition
from chaos.faults.network import ReplicationCut
from chaos.run import events
from chaos.run.files import RunFileError
from chaos.run.terms import GUARANTEES, VERDICTS


def result(lost: int = 2) -> AuditResult:
    reports = {name: AnomalyReport(0) for name in ANOMALIES}
    reports["lost_acked"] = AnomalyReport(lost, (Example("r:producer-0:7", "t", 0, 12, 1_700_000_000.5),))
    facts = AuditFacts(
        "r",
        tuple((n, reports[n]) for n in ANOMALIES),
        Availability(1.5, 10.0, 11.5, ()),
        Totals(10, 9, 0, 1, 8, 9),
        ("one problem",),
    )
    return judge(facts, "at_least_once", "reference")


def test_audit_json_round_trips_through_its_one_module(tmp_path: Path) -> None:
    written = result()
    path = write_audit(tmp_path, written)
    assert path == audit_path(tmp_path) == tmp_path / "audit.json"
    assert path.read_text(encoding="utf-8") == written.to_json()
    assert read_audit(tmp_path) == written
    assert AuditResult.from_dict(json.loads(written.to_json())) == written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit.json"]  # no temporary file left
    assert read_audit(tmp_path / "nowhere") is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not readable JSON"),
        ("[1]", "expected a JSON object"),
        ('{"verdict": "pass"}', "not an audit result written by `chaos audit`"),
    ],
)
def test_a_malformed_audit_json_names_the_file(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "audit.json").write_text(text, encoding="utf-8")
    with pytest.raises(RunFileError, match=message) as err:
        read_audit(tmp_path)
    assert str(tmp_path / "audit.json") in str(err.value)


def test_the_report_and_the_history_re_export_the_run_definitions() -> None:
    for name in ("ScenarioInfo", "TopicInfo", "ExpectedSymptom", "ThresholdResult", "write_scenario"):
        assert getattr(chaos.report.inputs, name) is getattr(chaos.run.manifest, name)
    assert chaos.report.InvalidReportInput is RunFileError
    assert chaos.scenario.ExpectedSymptom is chaos.run.manifest.ExpectedSymptom
    assert chaos.history.PartitionState is events.PartitionState
    assert chaos.history.SendOutcome is events.SendOutcome
    assert chaos.scenario.ReplicationCut is ReplicationCut
    assert set(GUARANTEES) == {"at_most_once", "at_least_once", "idempotent", "exactly_once"}
    assert VERDICTS == ("pass", "fail", "unknown")


def test_a_live_read_becomes_the_same_partition_state_as_a_sample() -> None:
    meta = WireMetadata(
        brokers=(),
        partitions=(WirePartition("t", 0, 0, 2, (1, 2, 3), (2, 3)), WirePartition("t", 1, 5, -1, (1, 2), ())),
        topic_errors=(),
    )
    led, offline = partition_states(meta)
    assert led == events.PartitionState(topic="t", partition=0, leader=2, isr=(2, 3), replicas=(1, 2, 3))
    assert (led.offline, led.under_replicated, led.followers) == (False, True, (1, 3))
    assert offline.leader is None
    assert (offline.offline, offline.followers) == (True, (1, 2))
    with pytest.raises(events.InvalidEvent, match="-1 means no leader"):
        events.PartitionState(topic="t", partition=0, leader=-1)
