"""The history event model: every kind validates, round-trips through rows, and matches the stored schema."""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pytest

from chaos.errors import HistoryError
from chaos.history import (
    ARROW_SCHEMA,
    COLUMN_KINDS,
    EVENT_TYPES,
    SCHEMA_VERSION,
    ClientLog,
    ClusterSample,
    Commit,
    Delivery,
    DrainEnd,
    DrainRead,
    Event,
    FaultEvent,
    InvalidEvent,
    LogStart,
    PartitionOffset,
    PartitionState,
    ProbeCall,
    Rebalance,
    SendInvoke,
    SendOutcome,
    TopicPolicy,
    TxnMarker,
    json_text,
    kind_columns,
    parse_value_id,
    syslog_level,
    value_id_for,
)

RUN = "run-20260101-000000-t1"
DOCS = Path(__file__).resolve().parents[3] / "docs" / "history.md"


def _vid(seq: int, producer: str = "producer-0", run: str = RUN) -> str:
    return value_id_for(run, producer, seq)


def sample_events(run: str = RUN) -> list[Event]:
    """At least one event of every kind, with every optional field set in one of them."""
    p0 = PartitionOffset(topic="chaos", partition=0)
    return [
        SendInvoke(
            run_id=run,
            process="producer-0",
            value_id=_vid(0, run=run),
            producer="producer-0",
            seq=0,
            topic="chaos",
            key="k0",
            tombstone=True,
        ),
        SendInvoke(
            run_id=run,
            process="producer-0",
            value_id=_vid(1, run=run),
            producer="producer-0",
            seq=1,
            topic="chaos",
            key=None,
            partition=2,
        ),
        SendOutcome(
            run_id=run,
            process="producer-0",
            value_id=_vid(0, run=run),
            outcome="ok",
            partition=1,
            offset=41,
            latency_ms=3.5,
        ),
        SendOutcome(
            run_id=run,
            process="producer-0",
            value_id=_vid(1, run=run),
            outcome="fail",
            partition=2,
            latency_ms=1200.0,
            error="NOT_ENOUGH_REPLICAS",
            retriable=True,
            fatal=False,
            message="Broker: Not enough in-sync replicas",
        ),
        SendOutcome(
            run_id=run,
            process="producer-0",
            value_id=_vid(2, run=run),
            outcome="info",
            error="_MSG_TIMED_OUT",
            message="Local: Message timed out",
        ),
        SendOutcome(
            run_id=run, process="producer-1", value_id=_vid(0, "producer-1", run), outcome="ok", partition=0
        ),  # acks=0: no offset
        Delivery(
            run_id=run,
            process="consumer-0",
            group="g1",
            topic="chaos",
            partition=1,
            offset=41,
            value_id=_vid(0, run=run),
            key="k0",
            member="rdkafka-4c1f-aa",
            generation=3,
        ),
        Delivery(run_id=run, process="consumer-1", group="g1", topic="chaos", partition=0, offset=7),
        Commit(
            run_id=run,
            process="consumer-0",
            group="g1",
            outcome="ok",
            member="rdkafka-4c1f-aa",
            generation=3,
            offsets=(PartitionOffset(topic="chaos", partition=1, offset=42),),
        ),
        Commit(
            run_id=run,
            process="consumer-0",
            group="g1",
            outcome="fail",
            error="UNKNOWN_MEMBER_ID",
            message="Commit failed: Broker: Unknown member",
            offsets=(PartitionOffset(topic="chaos", partition=1, offset=50, error="UNKNOWN_MEMBER_ID"),),
        ),
        Rebalance(
            run_id=run,
            process="consumer-0",
            action="assign",
            group="g1",
            member="rdkafka-4c1f-aa",
            generation=3,
            partitions=(p0, PartitionOffset(topic="chaos", partition=1)),
        ),
        Rebalance(run_id=run, process="consumer-0", action="revoke", group="g1", partitions=(p0,)),
        Rebalance(run_id=run, process="consumer-2", action="lost", group="g1", partitions=()),
        DrainRead(
            run_id=run,
            process="drain",
            isolation="read_committed",
            topic="chaos",
            partition=1,
            offset=41,
            value_id=_vid(0, run=run),
            key="k0",
        ),
        DrainRead(
            run_id=run, process="drain", isolation="read_uncommitted", topic="chaos", partition=0, offset=7
        ),
        DrainEnd(
            run_id=run,
            process="drain",
            isolation="read_committed",
            topic="chaos",
            partition=1,
            outcome="ok",
            low_offset=0,
            high_offset=42,
        ),
        DrainEnd(
            run_id=run,
            process="drain",
            isolation="read_uncommitted",
            topic="chaos",
            partition=2,
            outcome="fail",
            error="_TIMED_OUT",
            message="list_offsets timed out",
        ),
        FaultEvent(
            run_id=run,
            process="nemesis",
            action="inject",
            fault="network_cut",
            target="broker-2",
            params=json_text({"direction": "both", "duration_s": 12.5}),
        ),
        FaultEvent(
            run_id=run,
            process="nemesis",
            action="heal",
            fault="network_cut",
            target="broker-2",
            error="APIError",
            message="iptables: exit 1",
        ),
        ClusterSample(
            run_id=run,
            process="probe",
            controller=1,
            brokers=(0, 1),
            offline_partitions=1,
            under_replicated=2,
            group="g1",
            group_state="Stable",
            group_members=("rdkafka-4c1f-aa", "rdkafka-77b0-bb"),
            duration_ms=12.0,
            partition_states=(
                PartitionState(topic="chaos", partition=0, leader=0, isr=(0, 1), replicas=(0, 1, 2)),
                PartitionState(
                    topic="chaos",
                    partition=1,
                    leader=None,
                    isr=(),
                    replicas=(2, 0, 1),
                    error="LEADER_NOT_AVAILABLE",
                ),
            ),
        ),
        ClusterSample(run_id=run, process="probe", error="_TIMED_OUT", message="describe_cluster timed out"),
        ClientLog(
            run_id=run,
            process="consumer-0",
            level="warning",
            facility="MAXPOLL",
            error="_MAX_POLL_EXCEEDED",
            retriable=False,
            fatal=False,
            message="Application maximum poll interval (3000ms) exceeded by 512ms",
        ),
        ClientLog(run_id=run, process="producer-0", level="error", message="无法连接 broker 2 — ümlaut"),
        ProbeCall(
            run_id=run,
            process="restore-0",
            operation="list_offsets",
            duration_ms=30001.5,
            timeout_ms=30000.0,
            error="_TIMED_OUT",
            message="Failed to get offsets",
            topic="chaos",
            partition=2,
        ),
        ProbeCall(
            run_id=run,
            process="restore-0",
            operation="poll",
            duration_ms=10.25,
            result="1 msg",
            topic="chaos",
            partition=1,
            offset=40,
            low_offset=0,
            high_offset=42,
        ),
        TxnMarker(run_id=run, process="txn-worker-0", action="begin", transactional_id="tx-0", outcome="ok"),
        TxnMarker(
            run_id=run,
            process="txn-worker-0",
            action="commit",
            transactional_id="tx-0",
            outcome="info",
            value_ids=(_vid(0, "txn-worker-0", run), _vid(1, "txn-worker-0", run)),
            offsets=(PartitionOffset(topic="input", partition=0, offset=10),),
            error="_TIMED_OUT",
        ),
        TxnMarker(
            run_id=run,
            process="txn-worker-0",
            action="abort",
            transactional_id="tx-0",
            outcome="ok",
            value_ids=(_vid(2, "txn-worker-0", run),),
        ),
        TopicPolicy(
            run_id=run,
            process="scenario",
            topic="chaos",
            cleanup_policy="compact,delete",
            retention_ms=5000,
            retention_bytes=-1,
            delete_retention_ms=86_400_000,
        ),
        LogStart(run_id=run, process="scenario", topic="chaos", partition=0, offset=200, action="deleted"),
    ]


def test_samples_cover_every_kind() -> None:
    assert {e.kind for e in sample_events()} == set(EVENT_TYPES)


@pytest.mark.parametrize("event", sample_events(), ids=lambda e: e.kind)
def test_row_round_trip(event: Event) -> None:
    row = event.to_row()
    assert row["kind"] == event.kind
    assert set(row) == {"run_id", "kind", "ts", "mono", "process", *kind_columns(event.kind)}
    assert Event.from_row(row) == event
    assert type(event).from_row(row) == event
    wide = {name: None for name in ARROW_SCHEMA.names} | row | {"index": 7}
    assert Event.from_row(wide) == event


def test_from_row_rejects_wrong_kind_and_foreign_columns() -> None:
    row = sample_events()[0].to_row()
    with pytest.raises(InvalidEvent, match="expected 'delivery'"):
        Delivery.from_row(row)
    with pytest.raises(InvalidEvent, match="does not use"):
        Event.from_row(row | {"group": "g1"})
    with pytest.raises(InvalidEvent, match="expected one of"):
        Event.from_row(row | {"kind": "nope"})


def test_events_are_frozen() -> None:
    event = sample_events()[0]
    assert isinstance(event, SendInvoke)
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.seq = 5  # type: ignore[misc]


def test_clocks_default_to_now_and_ints_become_floats() -> None:
    before = time.time()
    event = ProbeCall(run_id=RUN, process="probe", operation="metadata", duration_ms=5)
    assert before <= event.ts <= time.time()
    assert event.mono <= time.monotonic()
    assert type(event.duration_ms) is float
    assert (
        type(ProbeCall(run_id=RUN, process="probe", operation="x", duration_ms=1.0, ts=2_000_000_000).ts)
        is float
    )


def test_value_id_helpers() -> None:
    assert value_id_for("r1", "producer-3", 17) == "r1:producer-3:17"
    assert parse_value_id("r1:producer-3:17") == ("r1", "producer-3", 17)
    for bad in ("r1:producer-3", "r1:p:x", "r1:p:-1", "a:b:c:1", "r 1:p:1"):
        with pytest.raises(InvalidEvent, match="run_id:producer:seq"):
            parse_value_id(bad)


def test_syslog_level() -> None:
    assert syslog_level(3) == "error"
    assert syslog_level(7) == "debug"
    with pytest.raises(InvalidEvent):
        syslog_level(8)


def test_invalid_event_is_a_history_error_and_a_value_error() -> None:
    assert issubclass(InvalidEvent, HistoryError)
    assert issubclass(InvalidEvent, ValueError)


def test_event_base_is_abstract() -> None:
    with pytest.raises(TypeError, match="abstract"):
        Event(run_id=RUN, process="x")


def _invoke(**kw: object) -> SendInvoke:
    args: dict[str, object] = {
        "run_id": RUN,
        "process": "producer-0",
        "value_id": _vid(3),
        "producer": "producer-0",
        "seq": 3,
        "topic": "chaos",
    }
    return SendInvoke(**(args | kw))  # type: ignore[arg-type]


def _outcome(**kw: object) -> SendOutcome:
    args: dict[str, object] = {"run_id": RUN, "process": "producer-0", "value_id": _vid(3)}
    return SendOutcome(**(args | kw))  # type: ignore[arg-type]


INVALID: list[tuple[str, Callable[[], object], str]] = [
    ("run id with colon", lambda: _invoke(run_id="a:b"), r"SendInvoke\.run_id: expected a name"),
    ("process with space", lambda: _invoke(process="producer 0"), r"SendInvoke\.process"),
    ("process unhashable", lambda: _invoke(process=["producer-0"]), r"SendInvoke\.process: expected a name"),
    ("topic unhashable", lambda: _invoke(topic={"chaos"}), r"SendInvoke\.topic: expected a Kafka topic"),
    ("mono as ts", lambda: _invoke(ts=time.monotonic()), r"looks like time\.monotonic\(\)"),
    ("ts not a number", lambda: _invoke(ts="now"), r"SendInvoke\.ts: expected wall-clock"),
    ("mono negative", lambda: _invoke(mono=-1.0), r"SendInvoke\.mono: expected a finite float >= 0"),
    ("value id mismatch", lambda: _invoke(value_id=_vid(4)), r"SendInvoke\.value_id: expected value_id_for"),
    ("seq bool", lambda: _invoke(seq=True), r"SendInvoke\.seq: expected an int >= 0"),
    ("bad topic", lambda: _invoke(topic="a topic"), r"SendInvoke\.topic: expected a Kafka topic name"),
    ("key bytes", lambda: _invoke(key=b"k"), r"SendInvoke\.key: expected a str or None"),
    ("partition negative", lambda: _invoke(partition=-1), r"SendInvoke\.partition: expected an int in"),
    ("unknown outcome", lambda: _outcome(outcome="timeout"), r"expected one of 'ok', 'fail', 'info'"),
    ("ok without partition", lambda: _outcome(outcome="ok"), r"SendOutcome\.partition"),
    (
        "ok with error",
        lambda: _outcome(outcome="ok", partition=0, offset=1, error="X"),
        r"SendOutcome\.error: expected None for outcome 'ok'",
    ),
    ("logical offset", lambda: _outcome(outcome="ok", partition=0, offset=-1001), r"-1001 means no offset"),
    (
        "fail without error",
        lambda: _outcome(outcome="fail", retriable=False, fatal=False),
        r"SendOutcome\.error: expected an error code name",
    ),
    (
        "fail without retriable",
        lambda: _outcome(outcome="fail", error="X", fatal=False),
        r"SendOutcome\.retriable: expected a bool;",
    ),
    (
        "fail with offset",
        lambda: _outcome(outcome="fail", error="X", retriable=True, fatal=False, offset=3),
        r"only 'ok' has one",
    ),
    ("info with offset", lambda: _outcome(outcome="info", error="_MSG_TIMED_OUT", offset=3), r"only 'ok'"),
    (
        "error as free text",
        lambda: _outcome(outcome="info", error="Local: Message timed out"),
        r"put free text in 'message'",
    ),
    (
        "negative latency",
        lambda: _outcome(outcome="ok", partition=0, latency_ms=-1.0),
        r"SendOutcome\.latency_ms: expected a finite float >= 0",
    ),
    ("nan latency", lambda: _outcome(outcome="ok", partition=0, latency_ms=float("nan")), r"latency_ms"),
    (
        "bad value id",
        lambda: _outcome(value_id="not-a-value-id", outcome="ok", partition=0),
        r"SendOutcome\.value_id: expected a value id",
    ),
    (
        "delivery generation -1",
        lambda: Delivery(run_id=RUN, process="c", group="g", topic="t", partition=0, offset=0, generation=-1),
        r"-1 means no generation",
    ),
    (
        "delivery empty group",
        lambda: Delivery(run_id=RUN, process="c", group="", topic="t", partition=0, offset=0),
        r"Delivery\.group: expected a non-empty str",
    ),
    (
        "commit offsets as list",
        lambda: Commit(
            run_id=RUN,
            process="c",
            group="g",
            outcome="ok",
            offsets=[PartitionOffset(topic="t", partition=0)],  # type: ignore[arg-type]
        ),
        r"Commit\.offsets: expected a tuple of PartitionOffset",
    ),
    (
        "commit fail without error",
        lambda: Commit(run_id=RUN, process="c", group="g", outcome="fail"),
        r"Commit\.error",
    ),
    (
        "rebalance action",
        lambda: Rebalance(run_id=RUN, process="c", action="assigned", group="g"),  # type: ignore[arg-type]
        r"'assign', 'revoke', 'lost'",
    ),
    (
        "drain isolation",
        lambda: DrainRead(
            run_id=RUN,
            process="d",
            isolation="read-committed",  # type: ignore[arg-type]
            topic="t",
            partition=0,
            offset=0,
        ),
        r"'read_uncommitted', 'read_committed'",
    ),
    (
        "drain end ok without offsets",
        lambda: DrainEnd(
            run_id=RUN, process="d", isolation="read_committed", topic="t", partition=0, outcome="ok"
        ),
        r"DrainEnd\.low_offset",
    ),
    (
        "drain end low > high",
        lambda: DrainEnd(
            run_id=RUN,
            process="d",
            isolation="read_committed",
            topic="t",
            partition=0,
            outcome="ok",
            low_offset=5,
            high_offset=4,
        ),
        r"DrainEnd\.high_offset: expected >= low_offset \(5\)",
    ),
    (
        "fault params not an object",
        lambda: FaultEvent(
            run_id=RUN, process="n", action="inject", fault="pause", target="broker-1", params="[1]"
        ),
        r"a JSON object",
    ),
    (
        "fault action",
        lambda: FaultEvent(
            run_id=RUN,
            process="n",
            action="apply",  # type: ignore[arg-type]
            fault="pause",
            target="broker-1",
        ),
        r"'inject', 'heal'",
    ),
    ("leader -1", lambda: PartitionState(topic="t", partition=0, leader=-1), r"-1 means no leader"),
    (
        "isr as list",
        lambda: PartitionState(topic="t", partition=0, leader=1, isr=[1]),  # type: ignore[arg-type]
        r"PartitionState\.isr: expected a tuple",
    ),
    (
        "members not str",
        lambda: ClusterSample(run_id=RUN, process="p", group_members=(1,)),  # type: ignore[arg-type]
        r"ClusterSample\.group_members",
    ),
    (
        "log level",
        lambda: ClientLog(run_id=RUN, process="p", level="warn", message="m"),  # type: ignore[arg-type]
        r"'warning'",
    ),
    (
        "probe negative duration",
        lambda: ProbeCall(run_id=RUN, process="p", operation="poll", duration_ms=-2),
        r"ProbeCall\.duration_ms",
    ),
    (
        "txn value ids",
        lambda: TxnMarker(
            run_id=RUN, process="w", action="commit", transactional_id="tx", outcome="ok", value_ids=("nope",)
        ),
        r"TxnMarker\.value_ids\[\]",
    ),
    (
        "txn fail without error",
        lambda: TxnMarker(run_id=RUN, process="w", action="commit", transactional_id="tx", outcome="fail"),
        r"TxnMarker\.error",
    ),
]


@pytest.mark.parametrize(
    ("factory", "pattern"), [(f, p) for _, f, p in INVALID], ids=[n for n, _, _ in INVALID]
)
def test_invalid_events_say_what_is_wrong(factory: Callable[[], object], pattern: str) -> None:
    with pytest.raises(InvalidEvent, match=pattern) as info:
        factory()
    assert "got " in str(info.value)  # every message shows the offending value


_ARROW_FOR: dict[str, tuple[pa.DataType, ...]] = {
    "str": (pa.string(),),
    "int": (pa.int32(), pa.int64()),
    "float": (pa.float64(),),
    "bool": (pa.bool_(),),
}


def test_schema_matches_the_model() -> None:
    assert ARROW_SCHEMA.names[:6] == ["index", "run_id", "kind", "ts", "mono", "process"]
    for kind, cls in EVENT_TYPES.items():
        for f in dataclasses.fields(cls):
            if f.name in ("run_id", "process", "ts", "mono"):
                continue
            assert f.name in ARROW_SCHEMA.names, f"{kind}.{f.name} has no column"
            arrow_type = ARROW_SCHEMA.field(f.name).type
            annotation = str(f.type)
            if annotation.startswith("tuple["):
                assert pa.types.is_list(arrow_type), f"{kind}.{f.name}"
            else:
                base = annotation.split(" | ")[0]
                expected = _ARROW_FOR.get(base, (pa.string(),))  # Literal aliases are strings
                assert arrow_type in expected, f"{kind}.{f.name}: {annotation} stored as {arrow_type}"
    unused = [name for name, kinds in COLUMN_KINDS.items() if not kinds]
    assert unused == []


def test_docs_describe_every_column_and_kind() -> None:
    text = DOCS.read_text(encoding="utf-8")
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(\w+)` \|(.*)$", text, flags=re.M)}
    for name in ARROW_SCHEMA.names:
        assert name in rows, f"docs/history.md has no table row for column {name!r}"
        cells = [c.strip() for c in rows[name].split(" | ")]
        arrow_type = str(ARROW_SCHEMA.field(name).type).replace("item: ", "")
        assert cells[0] == arrow_type, f"column {name}: docs say {cells[0]}, schema is {arrow_type}"
        documented = tuple(EVENT_TYPES) if cells[1] == "all" else tuple(re.findall(r"`(\w+)`", cells[1]))
        assert documented == COLUMN_KINDS[name], f"column {name}: docs list kinds {documented}"
    for kind in EVENT_TYPES:
        assert f"| `{kind}` |" in text, kind
    assert f"SCHEMA_VERSION = {SCHEMA_VERSION}" in text
