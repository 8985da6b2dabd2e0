"""Hand-computed audit cases: availability, unknown facts, the verdict policy, value parsing, the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from chaos.audit.facts import ANOMALIES, AnomalyReport, AuditFacts, Availability, LogRecord, Totals
from chaos.audit.reference import log_from_drain, reference_audit
from chaos.audit.source import history_table, log_table, parse_value
from chaos.audit.verdict import FATAL, UnknownGuarantee, judge
from chaos.history.reader import arrow_to_spark
from chaos.run.events import (
    Delivery,
    DrainEnd,
    DrainRead,
    Event,
    FaultEvent,
    SendInvoke,
    SendOutcome,
    value_id_for,
)
from chaos.run.terms import GUARANTEES

T0 = 1_700_000_000.0


def _send(
    run: str, seq: int, mono: float, outcome: str = "ok", latency: float = 1.0, offset: int | None = None
) -> list[Event]:
    vid = value_id_for(run, "p", seq)
    at: dict[str, Any] = {"run_id": run, "process": "p"}
    invoke = SendInvoke(**at, ts=T0 + mono, mono=mono, value_id=vid, producer="p", seq=seq, topic="t")
    if outcome == "ok":
        out = SendOutcome(
            **at,
            ts=T0 + mono + 0.5,
            mono=mono + 0.5,
            value_id=vid,
            outcome="ok",
            partition=0,
            offset=seq if offset is None else offset,
            latency_ms=latency,
        )
    else:
        out = SendOutcome(
            **at,
            ts=T0 + mono + 0.5,
            mono=mono + 0.5,
            value_id=vid,
            outcome="info",
            error="_MSG_TIMED_OUT",
            latency_ms=latency,
        )
    return [invoke, out]


def _fault(run: str, action: str, mono: float) -> FaultEvent:
    return FaultEvent(
        run_id=run,
        process="nemesis",
        ts=T0 + mono,
        mono=mono,
        action=action,  # type: ignore[arg-type]
        fault="network_cut",
        target="broker-1",
    )


def _availability_run(run: str) -> tuple[list[Event], list[LogRecord]]:
    """Acks at monos 0.5, 1.5, 2.5 (latencies 10, 20, 30), a cut at 3.0, unknowns while cut, heal at 9.0,
    acks at 10.5 (40 ms) and 11.5 (50 ms), a delivery at 12.0."""
    events: list[Event] = []
    for seq, (mono, latency) in enumerate([(0.0, 10.0), (1.0, 20.0), (2.0, 30.0)]):
        events += _send(run, seq, mono, latency=latency)
    events.append(_fault(run, "inject", 3.0))
    events += _send(run, 3, 4.0, outcome="info", latency=2000.0)
    events.append(_fault(run, "heal", 9.0))
    events += _send(run, 4, 10.0, latency=40.0, offset=3)
    events += _send(run, 5, 11.0, latency=50.0, offset=4)
    events.append(
        Delivery(
            run_id=run,
            process="c",
            ts=T0 + 12,
            mono=12.0,
            group="g",
            topic="t",
            partition=0,
            offset=0,
            value_id=value_id_for(run, "p", 0),
        )
    )
    log = [
        LogRecord("t", 0, o, value_id_for(run, "p", s), "read_uncommitted")
        for o, s in [(0, 0), (1, 1), (2, 2), (3, 4), (4, 5)]
    ]
    events += [
        DrainRead(
            run_id=run,
            process="d",
            ts=T0 + 13,
            mono=13.0,
            isolation=r.isolation,
            topic="t",
            partition=0,
            offset=r.offset,
            value_id=r.value_id,
        )
        for r in log
    ]
    events.append(
        DrainEnd(
            run_id=run,
            process="d",
            ts=T0 + 14,
            mono=14.0,
            isolation="read_uncommitted",
            topic="t",
            partition=0,
            outcome="ok",
            low_offset=0,
            high_offset=5,
        )
    )
    return events, log


def test_availability_by_hand() -> None:
    events, log = _availability_run("a")
    facts = reference_audit(events, log)
    # ack points 0.5, 1.5, 2.5, 10.5, 11.5 plus first invoke 0.0: longest gap 2.5 -> 10.5
    assert (facts.availability.longest_outage_s, facts.availability.outage_start_mono) == (8.0, 2.5)
    (window,) = facts.availability.windows
    assert (window.inject_mono, window.heal_mono) == (3.0, 9.0)
    assert (window.before.count, window.before.p50_ms, window.before.p99_ms) == (3, 20.0, 30.0)
    assert window.during.count == 0  # the unknown send has no ack
    assert window.during.p50_ms is None
    assert (window.after.count, window.after.p50_ms, window.after.p99_ms) == (2, 40.0, 50.0)
    assert window.heal_to_first_ack_s == 1.5
    assert window.heal_to_first_delivery_s == 3.0
    assert facts.counts()["lost_indeterminate"] == 1
    assert facts.counts()["unseen_by_group"] == 4  # only seq 0 was delivered
    assert facts.problems == ()


def _problem_runs() -> dict[str, tuple[list[Event], list[LogRecord]]]:
    runs: dict[str, tuple[list[Event], list[LogRecord]]] = {}
    events, log = _availability_run("ok")
    runs["ok"] = (events, log)
    events, log = _availability_run("drainfail")
    events.append(
        DrainEnd(
            run_id="drainfail",
            process="d",
            ts=T0 + 15,
            mono=15.0,
            isolation="read_committed",
            topic="t",
            partition=1,
            outcome="fail",
            error="_TIMED_OUT",
        )
    )
    runs["drainfail"] = (events, log)
    events, log = _availability_run("nodrain")
    runs["nodrain"] = ([e for e in events if not isinstance(e, DrainEnd)], log)
    events, log = _availability_run("nosends")
    runs["nosends"] = ([e for e in events if not isinstance(e, SendInvoke)], log)
    return runs


def _tied_latencies_run(run: str) -> tuple[list[Event], list[LogRecord]]:
    """Before a fault: ten acks whose latencies repeat (4 x 5.0, 3 x 5.0005, 3 x 5.001 ms: one histogram
    bucket holds both wanted ranks, and rank 5 falls inside a run of equal values); after it, two acks of
    one latency."""
    latencies = [5.0] * 4 + [5.0005] * 3 + [5.001] * 3
    events: list[Event] = []
    for seq, latency in enumerate(latencies):
        events += _send(run, seq, float(seq), latency=latency)
    events.append(_fault(run, "inject", 20.0))
    events.append(_fault(run, "heal", 21.0))
    events += _send(run, 10, 22.0, latency=7.0)
    events += _send(run, 11, 23.0, latency=7.0)
    log = [LogRecord("t", 0, seq, value_id_for(run, "p", seq), "read_uncommitted") for seq in range(12)]
    return events, log


def test_nearest_ranks_among_repeated_latencies_by_hand() -> None:
    events, log = _tied_latencies_run("ties")
    (window,) = reference_audit(events, log).availability.windows
    assert (window.before.count, window.before.p50_ms, window.before.p99_ms) == (10, 5.0005, 5.001)
    assert (window.after.count, window.after.p50_ms, window.after.p99_ms) == (2, 7.0, 7.0)


def _transform_run(run: str) -> tuple[list[Event], list[LogRecord]]:
    """:func:`_availability_run`, plus a consume-transform-produce worker's read of value 0 from its input
    topic and a second delivery of value 1 from the run's topic."""
    events, log = _availability_run(run)
    for process, topic, seq in (("x", "in", 0), ("c", "t", 1), ("c", "t", 1)):
        events.append(
            Delivery(
                run_id=run,
                process=process,
                ts=T0 + 12.5,
                mono=12.5,
                group=f"g{process}",
                topic=topic,
                partition=0,
                offset=seq,
                value_id=value_id_for(run, "p", seq),
            )
        )
    return events, log


def test_a_copy_read_from_another_topic_is_no_redelivery() -> None:
    facts = reference_audit(*_transform_run("x"))
    counts = facts.counts()
    # value 0 read from the transformer's input and from the run's topic: two records, one delivery each;
    # value 1 read twice from the run's topic: one redelivery
    assert (counts["duplicate_delivery_other"], counts["duplicate_delivery_after_rebalance"]) == (1, 0)
    (example,) = facts.anomaly("duplicate_delivery_other").examples
    assert (example.value_id, example.topic) == (value_id_for("x", "p", 1), "t")


def test_facts_that_cannot_be_established_make_the_verdict_unknown() -> None:
    runs = _problem_runs()
    problems = {run: reference_audit(ev, log).problems for run, (ev, log) in runs.items()}
    assert problems == {
        "ok": (),
        "drainfail": ("drain incomplete: t[1] read_committed (_TIMED_OUT)",),
        "nodrain": ("no drain_end events: the final drain did not run or was not recorded",),
        "nosends": ("history has no send_invoke events",),
    }
    events, _ = runs["ok"]
    assert reference_audit(events, None).problems == ("topic contents unavailable",)
    for guarantee in GUARANTEES:
        assert judge(reference_audit(events, None), guarantee, "reference").verdict == "unknown"


def test_spark_agrees_on_hand_cases_and_unreadable_topic(audit_spark: Any) -> None:
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

    from chaos.audit.checks import frames
    from chaos.audit.sparkjob import spark_audit

    runs = {**_problem_runs(), "transform": _transform_run("transform"), "ties": _tied_latencies_run("ties")}
    history = arrow_to_spark(audit_spark, pa.concat_tables([history_table(ev) for ev, _ in runs.values()]))
    log = arrow_to_spark(audit_spark, pa.concat_tables([log_table(lg, run) for run, (_, lg) in runs.items()]))
    kept = audit_spark.sparkContext._jsc.getPersistentRDDs
    held: list[int] = []
    release = frames.release

    def counted(df: Any) -> None:
        held.append(kept().size())
        release(df)

    before = kept().size()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(frames, "release", counted)
        got = spark_audit(history, log)
    assert got == {run: reference_audit(ev, lg, run_id=run) for run, (ev, lg) in runs.items()}
    # the frames the job materialised were held while it ran, and none is left in the session after it
    assert held
    assert max(held) > before
    assert kept().size() == before
    unread = spark_audit(history, None)
    assert unread == {run: reference_audit(ev, None, run_id=run) for run, (ev, _) in runs.items()}
    assert kept().size() == before


def test_the_session_sends_no_call_sites_to_the_jvm(audit_spark: Any) -> None:
    """PySpark 4 sends each DataFrame call's Python call site to the JVM (five py4j round trips a call) unless
    ``spark.python.sql.dataFrameDebugging.enabled`` is off, as ``spark_session`` sets it."""
    from pyspark.sql import functions as F

    from chaos.audit.spark import DATAFRAME_DEBUGGING

    client = audit_spark.sparkContext._gateway._gateway_client
    sent: list[str] = []
    send = client.send_command

    def recorded(command: str, *args: Any, **kwargs: Any) -> Any:
        sent.append(command)
        return send(command, *args, **kwargs)

    assert audit_spark.conf.get(DATAFRAME_DEBUGGING) == "false"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(client, "send_command", recorded)
        rows = audit_spark.range(4).select((F.col("id") * 2).alias("x")).where(F.col("x") > 2).collect()
    assert [r.x for r in rows] == [4, 6]
    assert sent  # the calls did go through this client
    assert not [c for c in sent if "PySparkCurrentOrigin" in c]


def _facts(**counts: int) -> AuditFacts:
    return AuditFacts(
        "r",
        tuple((name, AnomalyReport(counts.get(name, 0))) for name in ANOMALIES),
        Availability(None, None, None),
        Totals(1, 1, 0, 0, 1, 1),
    )


@pytest.mark.parametrize(
    ("guarantee", "counts", "verdict"),
    [
        ("at_least_once", {}, "pass"),
        ("at_least_once", {"duplicate_in_log": 2, "duplicate_delivery_other": 1}, "pass"),
        ("at_least_once", {"lost_acked": 1}, "fail"),
        ("at_least_once", {"lost_indeterminate": 5}, "pass"),
        ("at_most_once", {"lost_acked": 1, "unseen_by_group": 1}, "pass"),
        ("at_most_once", {"duplicate_in_log": 1}, "fail"),
        ("idempotent", {"duplicate_in_log": 1}, "fail"),
        ("idempotent", {"duplicate_delivery_after_rebalance": 1}, "pass"),
        ("exactly_once", {"duplicate_delivery_after_rebalance": 1}, "fail"),
        ("exactly_once", {"lost_indeterminate": 1}, "pass"),
    ],
)
def test_policy(guarantee: str, counts: dict[str, int], verdict: str) -> None:
    result = judge(_facts(**counts), guarantee, "reference")
    assert result.verdict == verdict
    assert set(result.failed_by) | set(result.expected) == {n for n, c in counts.items() if c}


def test_policy_never_passes_by_default() -> None:
    for guarantee in GUARANTEES:
        for name in ("inconsistent_offsets", "unexpected", "aborted_read", "reordered"):
            assert name in FATAL[guarantee]
    with pytest.raises(UnknownGuarantee, match="at_least_once"):
        judge(_facts(), "best_effort", "reference")


def test_result_json_is_stable() -> None:
    events, log = _availability_run("a")
    result = judge(reference_audit(events, log), "at_least_once", "reference")
    text = result.to_json()
    assert text == result.to_json()
    data = json.loads(text)
    assert list(data) == sorted(data)
    assert data["verdict"] == "fail"  # unseen_by_group
    assert data["failed_by"] == ["unseen_by_group"]
    assert data["facts"]["anomalies"]["lost_indeterminate"]["count"] == 1


PAYLOADS = [
    b"r:p:1",
    b"r:p:12 padding",
    b"r:p:3|xxxx",
    b"r:p:01",
    b"hello",
    b"r:p",
    b"\xff\xfe",
    b"r:p:7\n",
    b"",
    b"a.b-c:producer_0:0",
]


def test_value_parsing_agrees_between_python_and_spark(audit_spark: Any) -> None:
    from pyspark.sql import functions as F

    from chaos.audit.source import VALUE_ID_PATTERN

    expected = [parse_value(p) for p in PAYLOADS]
    assert expected == [
        "r:p:1",
        "r:p:12",
        "r:p:3",
        None,
        None,
        None,
        None,
        "r:p:7",
        None,
        "a.b-c:producer_0:0",
    ]
    frame = audit_spark.createDataFrame([(i, p) for i, p in enumerate(PAYLOADS)], "i int, value binary")
    extracted = F.regexp_extract(F.col("value").cast("string"), VALUE_ID_PATTERN, 1)
    rows = frame.select("i", F.when(extracted != "", extracted).alias("v")).orderBy("i").collect()
    assert [r.v for r in rows] == expected


def _record_clean_run(run_dir: Path, run: str) -> None:
    from chaos.history import Recorder

    events, _ = _availability_run(run)
    keep = [
        e
        for e in events
        if not (isinstance(e, SendOutcome) and e.outcome == "info")
        and not (isinstance(e, SendInvoke) and e.seq == 3)
    ]
    for seq in (1, 2, 4, 5):
        vid = value_id_for(run, "p", seq)
        keep.append(
            Delivery(
                run_id=run,
                process="c",
                ts=T0 + 12,
                mono=12.0,
                group="g",
                topic="t",
                partition=0,
                offset={1: 1, 2: 2, 4: 3, 5: 4}[seq],
                value_id=vid,
            )
        )
    with Recorder(run_dir, run) as history:
        for event in keep:
            history.record(event)


def test_cli_audits_a_saved_run_with_both_engines(tmp_path: Path, audit_spark: Any) -> None:
    from chaos.cli import cli

    run_dir = tmp_path / "run-1"
    _record_clean_run(run_dir, "run1")
    outputs = {}
    for engine in ("reference", "spark"):
        result = CliRunner().invoke(
            cli, ["audit", str(run_dir), "--engine", engine, "--spark-master", "local[2]"]
        )
        assert result.exit_code == 0, result.output
        assert "pass" in result.output
        outputs[engine] = json.loads((run_dir / "audit.json").read_text())
    assert outputs["reference"].pop("engine") == "reference"
    assert outputs["spark"].pop("engine") == "spark"
    assert outputs["reference"] == outputs["spark"]
    assert outputs["spark"]["verdict"] == "pass"
    assert outputs["spark"]["facts"]["totals"]["sends"] == 5


def test_cli_audit_of_a_run_without_history_is_unknown(tmp_path: Path) -> None:
    """A run killed before its history was written (scenario.json only): inconclusive, exit 3; a directory
    that is no run at all is bad input (exit 2), and gets no stray audit.json."""
    import shutil

    from chaos.cli import cli
    from tests.report_sample import write_sample_run

    run_dir = tmp_path / "run"
    write_sample_run(run_dir, seconds=5, rate=2)
    shutil.rmtree(run_dir / "history")
    (run_dir / "audit.json").unlink(missing_ok=True)
    result = CliRunner().invoke(cli, ["audit", str(run_dir), "--engine", "reference"])
    assert result.exit_code == 3, result.output
    assert json.loads((run_dir / "audit.json").read_text())["verdict"] == "unknown"
    assert log_from_drain([]) == []

    empty = tmp_path / "empty"
    empty.mkdir()
    result = CliRunner().invoke(cli, ["audit", str(empty), "--engine", "reference"])
    assert result.exit_code == 2, result.output
    assert "is not a run directory" in result.output
    assert list(empty.iterdir()) == []


def test_spark_fast_path_only_takes_clean_values_and_steps_aside_on_topic_hash_collisions(
    audit_spark: Any, clean_value_ids: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyspark.sql import functions as F

    from chaos.audit.checks import frames, values
    from chaos.audit.sparkjob import spark_audit

    events, log = _availability_run("c")
    log.append(LogRecord("u", 0, 0, None, "read_uncommitted"))  # a second topic, holding a foreign record
    history = arrow_to_spark(audit_spark, history_table(events))
    topic = arrow_to_spark(audit_spark, log_table(log, "c"))
    want = reference_audit(events, log, run_id="c")
    # seq 0 is the only value delivered; the others are unseen or lost, so they take the general path
    assert clean_value_ids(history, topic) == {value_id_for("c", "p", 0)}
    assert spark_audit(history, topic) == {"c": want}
    # too many keys to broadcast (a workload whose every record has its own key): the clean values' keys,
    # and the other values' ids, are joined by a shuffle instead
    with monkeypatch.context() as patch:
        patch.setattr(frames, "BROADCAST_KEYS", 0)
        assert spark_audit(history, topic) == {"c": want}
    # every string sharing one hash (topics "t" and "u", producers, keys): no value of the run is judged
    # clean by comparing hashes
    monkeypatch.setattr(values, "_string_hash", lambda _F, _s: F.lit(7))
    assert clean_value_ids(history, topic) == set()
    assert spark_audit(history, topic) == {"c": want}
