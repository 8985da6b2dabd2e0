"""The report's inputs and helpers: scenario.json, audit.json read back, log timestamps, fault windows,
the reproduce command, JSON safe to embed."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Literal

import pytest

from chaos.history import FaultEvent, Recorder, load_history
from chaos.report import (
    ExpectedSymptom,
    InvalidReportInput,
    RunContext,
    ScenarioInfo,
    ThresholdResult,
    TopicInfo,
    read_audit,
    read_scenario,
    reproduce_command,
    write_scenario,
)
from chaos.report.symptoms import parse_line, scan_logs
from chaos.report.timeline import fault_spans, plot_text, safe_json
from tests.report_sample import SAMPLE_T0, write_sample_run


def full_info() -> ScenarioInfo:
    return ScenarioInfo(
        scenario_id="isr3_below_min_insync",
        title="ISR below min.insync.replicas",
        case_id="ISR3",
        source="003 § 6",
        symptom="如果两者相等，那么只要有一个副本挂机，整个分区就无法正常工作了",
        guarantee="at_least_once",
        client_profile="at_least_once",
        producer_config={"acks": "all", "retries": 10, "linger.ms": 5.5, "enable.idempotence": False},
        consumer_config={"isolation.level": "read_committed"},
        topic=TopicInfo("isr3", 3, 3, {"min.insync.replicas": 2}),
        broker_config={"unclean.leader.election.enable": False},
        time_profile="ci",
        brokers=3,
        seed=7,
        plan={"format": 1, "seed": 7, "brokers": 3, "steps": []},
        expected_symptoms=(ExpectedSymptom("broker_log", r"Shrinking ISR from \S+", regex=True),),
        remediation=("RF = min.insync.replicas + 1",),
        thresholds=(ThresholdResult("longest_outage_s", 30.0, None, False, "s"),),
        nodeid="scenarios/test_isr.py::test_isr3",
        started_ts=SAMPLE_T0,
        ended_ts=SAMPLE_T0 + 10,
        outcome="passed",
        timings={"history_s": 8.5, "audit_s": 1.25},
    )


def test_scenario_json_round_trips_and_is_stable(tmp_path: Path) -> None:
    info = full_info()
    path = write_scenario(tmp_path, info)
    assert path == tmp_path / "scenario.json"
    assert read_scenario(tmp_path) == info
    text = path.read_text(encoding="utf-8")
    assert text == info.to_json()
    assert json.loads(text)["format"] == 1
    assert "如果两者相等" in text  # readable, not \u-escaped
    assert read_scenario(tmp_path / "nowhere") is None


def test_minimal_scenario_json_needs_only_an_id(tmp_path: Path) -> None:
    (tmp_path / "scenario.json").write_text('{"scenario_id": "s1"}', encoding="utf-8")
    info = read_scenario(tmp_path)
    assert info is not None
    assert info.scenario_id == "s1"
    assert info.log_dir == "logs"
    assert info.expected_symptoms == ()
    assert dict(info.producer_config) == {}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"scenario_id": ""}, "ScenarioInfo.scenario_id: expected a non-empty str"),
        ({"scenario_id": "s", "format": 2}, "format 2; this harness reads format 1"),
        ({"scenario_id": "s", "extra": 1}, "unknown keys ['extra']"),
        ({"scenario_id": "s", "producer_config": {"acks": ["all"]}}, "ScenarioInfo.producer_config"),
        ({"scenario_id": "s", "outcome": "green"}, "ScenarioInfo.outcome: expected one of passed"),
        ({"scenario_id": "s", "log_dir": "/var/log"}, "a relative path inside the run dir"),
        (
            {"scenario_id": "s", "expected_symptoms": [{"kind": "smoke", "pattern": "x"}]},
            "ExpectedSymptom.kind: expected error_code or client_log or broker_log",
        ),
        (
            {
                "scenario_id": "s",
                "expected_symptoms": [{"kind": "broker_log", "pattern": "(", "regex": True}],
            },
            "is not a valid regex",
        ),
        ({"scenario_id": "s", "topic": {"name": "t", "partitions": 0}}, "TopicInfo.partitions"),
        ({"scenario_id": "s", "started_ts": "yesterday"}, "ScenarioInfo.started_ts: expected epoch seconds"),
        ({"scenario_id": "s", "timings": {"drain_s": 1.0}}, "ScenarioInfo.timings: expected seconds"),
        ({"scenario_id": "s", "timings": {"audit_s": -1.0}}, "ScenarioInfo.timings: expected seconds"),
        ({"scenario_id": "s", "timings": {"audit_s": "2"}}, "ScenarioInfo.timings: expected seconds"),
    ],
)
def test_invalid_scenario_json_names_the_field(tmp_path: Path, data: dict[str, object], message: str) -> None:
    (tmp_path / "scenario.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(InvalidReportInput) as err:
        read_scenario(tmp_path)
    assert message in str(err.value)


def test_symptom_matching_rules() -> None:
    assert ExpectedSymptom("error_code", "_TIMED_OUT").matches("_TIMED_OUT")
    assert not ExpectedSymptom("error_code", "_TIMED_OUT").matches("_MSG_TIMED_OUT")
    assert ExpectedSymptom("broker_log", "Shrinking ISR").matches("INFO [Partition t-0] Shrinking ISR from")
    assert ExpectedSymptom("broker_log", r"elect leader for partition \w+-\d", regex=True).matches(
        "Failed to elect leader for partition T-0 under strategy"
    )


def test_audit_json_reads_back_equal_to_the_result(tmp_path: Path) -> None:
    run = write_sample_run(tmp_path / "run", seconds=40, rate=5)
    result = read_audit(run)
    assert result is not None
    assert result.to_json() == (run / "audit.json").read_text(encoding="utf-8")
    assert result.verdict == "fail"
    assert result.failed_by == ("lost_acked",)
    assert read_audit(tmp_path) is None
    (tmp_path / "audit.json").write_text('{"verdict": "pass"}', encoding="utf-8")
    with pytest.raises(InvalidReportInput, match="not an audit result written by `chaos audit`"):
        read_audit(tmp_path)


@pytest.mark.parametrize(
    ("line", "ts", "text"),
    [
        (
            "2026-01-15T12:00:01.500000000Z [2026-01-15 12:00:01,497] INFO x",
            SAMPLE_T0 + 1.5,
            "[2026-01-15 12:00:01,497] INFO x",
        ),
        (
            "[2026-01-15 12:00:02,250] WARN y (kafka.x)",
            SAMPLE_T0 + 2.25,
            "[2026-01-15 12:00:02,250] WARN y (kafka.x)",
        ),
        ("\tat kafka.Foo.bar(Foo.scala:12)", None, "\tat kafka.Foo.bar(Foo.scala:12)"),
    ],
)
def test_log_line_times(line: str, ts: float | None, text: str) -> None:
    got_ts, got_text = parse_line(line)
    assert got_text == text
    assert got_ts == pytest.approx(ts) if ts is not None else got_ts is None


def test_fault_windows_pair_each_inject_with_the_next_heal(tmp_path: Path) -> None:
    def fault(action: Literal["inject", "heal"], name: str, target: str, t: float) -> FaultEvent:
        return FaultEvent(
            run_id="r",
            process="nemesis",
            action=action,
            fault=name,
            target=target,
            ts=SAMPLE_T0 + t,
            mono=t,
        )

    with Recorder(tmp_path, "r") as history:
        for ev in (
            fault("inject", "pause", "broker-1", 1),
            fault("inject", "latency", "broker-2", 2),
            fault("heal", "pause", "broker-1", 5),
            fault("heal", "pause", "broker-1", 6),
            fault("inject", "pause", "broker-1", 8),
        ):
            history.record(ev)
    spans = fault_spans(load_history(tmp_path).table)
    assert [(s.label, s.inject_mono, s.heal_mono) for s in spans] == [
        ("pause broker-1", 1.0, 5.0),
        ("latency broker-2", 2.0, None),
        ("pause broker-1", 8.0, None),
    ]


def test_reproduce_command() -> None:
    info = full_info()
    assert reproduce_command(info, None) == (
        ".venv/bin/pytest scenarios/test_isr.py::test_isr3 "
        "--chaos-seed=7 --chaos-profile=ci --chaos-brokers=3"
    )
    bare = ScenarioInfo("odd id; rm -rf /")
    assert reproduce_command(bare, RunContext(seed=3, profile="faithful")) == (
        ".venv/bin/pytest -m chaos scenarios -k 'odd id; rm -rf /' --chaos-seed=3 --chaos-profile=faithful"
    )
    assert (
        reproduce_command(None, RunContext(nodeid="tests/x.py::t[a b]"))
        == ".venv/bin/pytest 'tests/x.py::t[a b]'"
    )
    assert reproduce_command(None, None) is None
    assert reproduce_command(ScenarioInfo("s", command="make chaos"), None) == "make chaos"


def test_a_run_with_a_plan_offers_its_replay(tmp_path: Path) -> None:
    from chaos.report.render import replay_command

    run = tmp_path / "rn1 run"
    run.mkdir()
    assert replay_command(run) is None
    (run / "plan.json").write_text("{}")
    assert replay_command(run) == f".venv/bin/chaos replay '{run}'"


def test_embedded_json_and_plot_text_are_inert() -> None:
    hostile = "</script><!--<script>&\u2028"
    text = safe_json({"k": hostile})
    assert not set(text) & {"<", ">", "&", "\u2028"}
    assert json.loads(text) == {"k": hostile}
    assert plot_text("<b>a & b</b>") == "&lt;b&gt;a &amp; b&lt;/b&gt;"


def test_a_broker_log_symptom_is_only_matched_by_a_line_of_the_run_itself(tmp_path: Path) -> None:
    """The captured logs begin a margin before the run: a line the previous run caused stands there."""
    log = tmp_path / "kafka-1.log"
    log.write_text(
        "[2026-01-15 12:00:01,000] INFO [Partition t-0] Shrinking ISR from 1,2,3 to 1 (kafka.cluster)\n"
        "[2026-01-15 12:00:03,000] INFO unrelated (kafka.x)\n"
        "[2026-01-15 12:00:04,000] INFO [Partition t-1] Shrinking ISR from 1,2,3 to 2 (kafka.cluster)\n",
        encoding="utf-8",
    )
    symptom = ExpectedSymptom("broker_log", "Shrinking ISR")
    (whole,), _ = scan_logs([log], [symptom], ())
    (own,), _ = scan_logs([log], [symptom], (), since=SAMPLE_T0 + 2.0)
    (none,), _ = scan_logs([log], [symptom], (), since=SAMPLE_T0 + 5.0)
    assert (whole.count, own.count, none.count) == (2, 1, 0)
    assert own.first_ts == pytest.approx(SAMPLE_T0 + 4.0)
    assert not none.observed


def test_a_faults_measured_effect_reaches_its_timeline_row(tmp_path: Path) -> None:
    from chaos.faults.base import Effect, FaultRecord
    from chaos.scenario.bridge import fault_event

    def record(seq: int) -> FaultRecord:
        return FaultRecord(seq, "latency", f"broker {seq}", (seq,), (("ms", 500),), SAMPLE_T0 + seq)

    idle = Effect(False, "no byte entered its links while it held (ext1-1 upstream: 0 B)")
    landed = Effect(True, "512 bytes entered its links while it held (ext-2 downstream: 512 B)")
    unmeasured = ("effect not measured: the meter's sidecar is gone", "chain CHAOS-CUT-1 removed")
    with Recorder(tmp_path, "r") as history:
        for seq, effect, notes in ((1, idle, ()), (2, landed, ()), (3, None, ()), (4, None, unmeasured)):
            injected = record(seq)
            history.record(fault_event("r", "inject", injected))
            healed = replace(injected, healed_at=SAMPLE_T0 + seq + 4, effect=effect, notes=notes)
            history.record(fault_event("r", "heal", healed))
    spans = fault_spans(load_history(tmp_path).table)
    assert [s.effect for s in spans] == [
        f"no effect: {idle.evidence}",
        f"landed: {landed.evidence}",
        "",
        "effect not measured: the meter's sidecar is gone",
    ]
