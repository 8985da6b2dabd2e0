"""The one fault-window pairing rule (chaos.history.windows) and its users: the reference audit, the Spark
job, the report's timeline and the scenario views all pair the same events the same way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pytest

from chaos.audit.reference import reference_audit
from chaos.audit.source import history_table, log_table
from chaos.faults.base import FaultRecord
from chaos.history import Event, FaultEvent, Recorder, SendInvoke, SendOutcome, json_text, load_history
from chaos.history.reader import arrow_to_spark
from chaos.history.windows import fault_seq, fault_windows
from chaos.report.timeline import fault_spans
from chaos.scenario import views

T0 = 1_700_000_000.0


def fault(
    action: str, mono: float, *, name: str = "pause", target: str = "broker-1", seq: int | None = None
) -> FaultEvent:
    return FaultEvent(
        run_id="w",
        process="nemesis",
        ts=T0 + mono,
        mono=mono,
        action=action,  # type: ignore[arg-type]
        fault=name,
        target=target,
        params=json_text({"seq": seq} if seq is not None else {}),
    )


def monos(events: list[FaultEvent]) -> list[tuple[float, float | None]]:
    return [(p.inject.mono, p.heal.mono if p.heal else None) for p in fault_windows(events)]


@pytest.mark.parametrize(
    ("params", "seq"),
    [
        (None, None),
        ("", None),
        ("{}", None),
        ('{"seq": 3}', 3),
        ('{"seq": true}', None),
        ("[1]", None),
        ("{", None),
    ],
)
def test_fault_seq_reads_an_int_seq_or_nothing(params: str | None, seq: int | None) -> None:
    assert fault_seq(params) == seq


def test_without_seqs_a_heal_closes_every_open_inject_of_its_fault_and_target() -> None:
    events = [
        fault("inject", 1),
        fault("inject", 2, name="latency", target="broker-2"),
        fault("inject", 3),
        fault("heal", 4, target="broker-3"),  # another target: closes nothing
        fault("heal", 5),
        fault("heal", 6),  # nothing open any more: ignored
        fault("inject", 8),
    ]
    assert monos(events) == [(1, 5), (2, None), (3, 5), (8, None)]


def test_with_seqs_each_inject_ends_at_the_heal_of_its_own_fault() -> None:
    events = [
        fault("inject", 1, seq=0),
        fault("inject", 2, seq=1),
        fault("heal", 3, seq=1),
        fault("heal", 4, seq=0),
    ]
    assert monos(events) == [(1, 4), (2, 3)]
    # one side without a seq: fault and target decide, as without seqs
    assert monos([fault("inject", 1, seq=0), fault("inject", 2), fault("heal", 3)]) == [(1, 3), (2, 3)]
    assert monos([fault("inject", 1, seq=0), fault("heal", 2, seq=5)]) == [(1, None)]


def test_record_order_decides_not_the_clock() -> None:
    # a heal recorded after its inject closes it even if its mono reads earlier; a heal recorded before
    # an inject never closes it
    assert monos([fault("inject", 5), fault("heal", 4)]) == [(5, 4)]
    assert monos([fault("heal", 1), fault("inject", 2)]) == [(2, None)]


def _run() -> tuple[list[Event], list[Any]]:
    """Two overlapping pauses of broker-1 (seq 0 healed last), acks around them."""
    events: list[Event] = []
    for n, mono in enumerate((0.5, 2.5, 4.5, 6.5)):
        vid = f"w:p:{n}"
        at = {"run_id": "w", "process": "p", "ts": T0 + mono, "mono": mono}
        events.append(SendInvoke(**at, value_id=vid, producer="p", seq=n, topic="t"))  # type: ignore[arg-type]
        events.append(
            SendOutcome(
                **{**at, "ts": T0 + mono + 0.1, "mono": mono + 0.1},  # type: ignore[arg-type]
                value_id=vid,
                outcome="ok",
                partition=0,
                offset=n,
                latency_ms=100.0,
            )
        )
    events += [
        fault("inject", 1, seq=0),
        fault("inject", 2, seq=1),
        fault("heal", 3, seq=1),
        fault("heal", 6, seq=0),
    ]
    events.sort(key=lambda e: e.mono)
    return events, []


def test_reference_views_and_timeline_pair_alike(tmp_path: Path) -> None:
    events, log = _run()
    windows = reference_audit(events, log, run_id="w").availability.windows
    assert [(w.inject_mono, w.heal_mono) for w in windows] == [(1, 6), (2, 3)]
    first = FaultRecord(seq=0, kind="pause", target="broker-1", brokers=(1,), params=(), injected_at=T0)
    second = FaultRecord(seq=1, kind="pause", target="broker-1", brokers=(1,), params=(), injected_at=T0)
    assert views.fault_window(events, first) == (1, 6)
    assert views.fault_window(events, second) == (2, 3)
    with Recorder(tmp_path, "w") as history:
        for e in events:
            history.record(e)
    spans = fault_spans(load_history(tmp_path).table)
    assert [(s.inject_mono, s.heal_mono) for s in spans] == [(1, 6), (2, 3)]


def test_spark_pairs_like_the_reference(audit_spark: Any) -> None:
    from chaos.audit.sparkjob import spark_audit

    events, log = _run()
    history = arrow_to_spark(audit_spark, history_table(events))
    got = spark_audit(history, arrow_to_spark(audit_spark, log_table(log, "w")))
    assert got == {"w": reference_audit(events, log, run_id="w")}


def test_arrow_to_spark_keeps_the_batches_after_an_empty_one(audit_spark: Any) -> None:
    """pyspark 4.1's createDataFrame drops every record batch after an empty one: a JSONL-only history
    with an empty segment lost the events after it."""
    events, _ = _run()
    table = history_table(events)
    empty = pa.RecordBatch.from_pylist([], schema=table.schema)
    batches = [*table.slice(0, 2).to_batches(), empty, *table.slice(2).to_batches()]
    chunked = pa.Table.from_batches(batches, schema=table.schema)
    assert chunked.num_rows == len(events) > 2
    assert chunked.column(0).num_chunks == 3
    assert arrow_to_spark(audit_spark, chunked).count() == len(events)
