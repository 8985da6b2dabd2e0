"""Streams judged by their own guarantee: the audit counts each anomaly per producer named in the value ids
(both engines: the property tests compare whole facts), and the verdict judges a producer's share by the
guarantee its client claims, the rest by the run's."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from chaos.audit.facts import ANOMALIES, AnomalyReport, AuditFacts, Availability, Example, LogRecord, Totals
from chaos.audit.reference import reference_audit
from chaos.audit.verdict import AuditResult, UnknownGuarantee, judge
from chaos.cli import cli
from chaos.errors import AuditError
from chaos.run.events import (
    Delivery,
    DrainEnd,
    DrainRead,
    Event,
    SendInvoke,
    SendOutcome,
    producer_of,
    value_id_for,
)
from chaos.scenario.model import ScenarioError
from chaos.scenario.workers import RunWorkers
from chaos.workload import AT_LEAST_ONCE, IDEMPOTENT, RunContext
from chaos.workload.java_build import JavaWorker

T0 = 1_700_000_000.0
RUN = "r"


def _history(duplicated: str) -> tuple[list[Event], list[LogRecord]]:
    """Producers ``p0`` and ``p1`` send two values each, all acked and delivered; ``duplicated``'s first value
    is in the log twice (a retry without idempotence), read once by the group."""
    events: list[Event] = []
    log: list[LogRecord] = []
    offset = 0
    for producer in ("p0", "p1"):
        for seq in range(2):
            vid = value_id_for(RUN, producer, seq)
            at: dict[str, Any] = {"run_id": RUN, "process": producer}
            mono = float(offset)
            events.append(
                SendInvoke(**at, ts=T0 + mono, mono=mono, value_id=vid, producer=producer, seq=seq, topic="t")
            )
            copies = 2 if (producer, seq) == (duplicated, 0) else 1
            for _ in range(copies):
                log.append(LogRecord("t", 0, offset, vid, "read_uncommitted"))
                offset += 1
            ack = offset - 1
            events.append(
                SendOutcome(**at, ts=T0 + mono + 0.5, mono=mono + 0.5, value_id=vid, outcome="ok",
                            partition=0, offset=ack, latency_ms=1.0)
            )  # fmt: skip
    delivered: set[str | None] = set()
    for record in log:
        if record.value_id not in delivered:  # the group reads each value once
            delivered.add(record.value_id)
            mono = 20.0 + record.offset
            events.append(
                Delivery(run_id=RUN, process="c", ts=T0 + mono, mono=mono, group="g", topic="t", partition=0,
                         offset=record.offset, value_id=record.value_id)
            )  # fmt: skip
        events.append(
            DrainRead(run_id=RUN, process="d", ts=T0 + 40, mono=40.0, isolation=record.isolation, topic="t",
                      partition=0, offset=record.offset, value_id=record.value_id)
        )  # fmt: skip
    events.append(
        DrainEnd(run_id=RUN, process="d", ts=T0 + 41, mono=41.0, isolation="read_uncommitted", topic="t",
                 partition=0, outcome="ok", low_offset=0, high_offset=offset)
    )  # fmt: skip
    return events, log


def test_each_anomaly_is_counted_per_producer_of_its_values() -> None:
    events, log = _history(duplicated="p1")
    facts = reference_audit(events, log)
    duplicates = facts.anomaly("duplicate_in_log")
    assert duplicates.count == 1
    assert duplicates.by_producer == (("p1", 1),)
    assert facts.to_dict()["anomalies"]["duplicate_in_log"]["by_producer"] == {"p1": 1}
    assert all(not facts.anomaly(name).by_producer for name in ANOMALIES if not facts.anomaly(name).count)


@pytest.mark.parametrize(
    ("duplicated", "guarantee", "streams", "verdict"),
    [
        ("p1", "idempotent", {}, "fail"),  # one guarantee for all: p1's duplicate breaks it
        ("p1", "idempotent", {"p1": "at_least_once"}, "pass"),  # p1 claims only at-least-once
        ("p0", "idempotent", {"p1": "at_least_once"}, "fail"),  # p0's duplicate is judged by idempotent
        ("p0", "at_least_once", {"p0": "idempotent"}, "fail"),  # a stream can claim more than the run
        ("p1", "at_least_once", {"p0": "idempotent"}, "pass"),
    ],
)
def test_a_producers_share_is_judged_by_its_own_guarantee(
    duplicated: str, guarantee: str, streams: dict[str, str], verdict: str
) -> None:
    events, log = _history(duplicated)
    result = judge(reference_audit(events, log), guarantee, "reference", streams)
    assert result.verdict == verdict
    assert result.failed_by == (("duplicate_in_log",) if verdict == "fail" else ())
    assert result.expected == (() if verdict == "fail" else ("duplicate_in_log",))
    assert result.streams == tuple(sorted(streams.items()))


def test_instances_without_a_producer_are_judged_by_the_runs_guarantee() -> None:
    foreign = Example(None, "t", 0, 7, None)
    reports = {
        "unexpected": AnomalyReport(1, (foreign,)),
        "duplicate_in_log": AnomalyReport(3, (), (("p1", 2),)),
    }
    facts = AuditFacts(
        RUN,
        tuple((name, reports.get(name, AnomalyReport(0))) for name in ANOMALIES),
        Availability(None, None, None),
        Totals(4, 4, 0, 0, 5, 5),
    )
    result = judge(facts, "idempotent", "reference", {"p1": "at_least_once"})
    # one duplicate is not p1's (a value of a producer without a stream): idempotent forbids it
    assert result.failed_by == ("duplicate_in_log", "unexpected")


def test_streams_survive_audit_json_and_reject_an_unknown_guarantee() -> None:
    events, log = _history("p1")
    result = judge(reference_audit(events, log), "idempotent", "reference", {"p1": "at_least_once"})
    data = result.to_dict()
    assert data["streams"] == {"p1": "at_least_once"}
    again = AuditResult.from_dict(data)
    assert again == result
    assert again.facts.anomaly("duplicate_in_log").by_producer == (("p1", 1),)
    with pytest.raises(UnknownGuarantee, match="best_effort"):
        judge(result.facts, "idempotent", "reference", {"p1": "best_effort"})


@pytest.mark.parametrize(
    "by_producer",
    [(("p1", 2), ("p0", 1)), (("p0", 0),), (("p0", 4),), (("p0", 1), ("p0", 1))],
)
def test_counts_per_producer_are_sorted_positive_and_within_the_count(by_producer: Any) -> None:
    with pytest.raises(AuditError, match="by_producer"):
        AnomalyReport(3, (), by_producer)


@pytest.mark.parametrize(
    ("value_id", "producer"),
    [("r:p-1:0", "p-1"), ("r:p:12", "p"), ("r:p:01", None), ("hello", None), (None, None), ("r:p:1:2", None)],
)
def test_the_producer_is_read_from_a_well_formed_value_id_only(
    value_id: str | None, producer: str | None
) -> None:
    assert producer_of(value_id) == producer


def test_the_cli_takes_streams_and_refuses_a_malformed_one(tmp_path: Any) -> None:
    result = CliRunner().invoke(cli, ["audit", str(tmp_path), "--stream", "p1"])
    assert result.exit_code == 2
    assert "expected PRODUCER=GUARANTEE" in result.output
    result = CliRunner().invoke(cli, ["audit", str(tmp_path), "--stream", "p1=sometimes"])
    assert result.exit_code == 2
    assert "'p1=sometimes'" in result.output


class Host:
    """A run as the workers see it: only its context."""

    def __init__(self, context: RunContext) -> None:
        self.context = context

    def client_bootstrap(self, client_path: str) -> str:
        raise AssertionError("no client path in this test")

    def java_worker(self) -> JavaWorker:
        raise AssertionError("no Java worker in this test")


def test_a_producer_handed_its_own_profile_is_a_stream_of_that_profiles_guarantee() -> None:
    base = RunContext("r", "127.0.0.1:9092", "t", "g", IDEMPOTENT, lambda e: None)
    workers = RunWorkers(Host(base))
    assert workers.stream_context("producer-0", None) is base
    plain = workers.stream_context("producer-1", "at_least_once")
    assert plain.client == AT_LEAST_ONCE
    assert workers.stream_context("producer-2", IDEMPOTENT).client == IDEMPOTENT
    assert workers.streams == {"producer-1": "at_least_once", "producer-2": "idempotent"}
    with pytest.raises(ScenarioError, match="producer-1 already claims at_least_once"):
        workers.stream_context("producer-1", IDEMPOTENT)
