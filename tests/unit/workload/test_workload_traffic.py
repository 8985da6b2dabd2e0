"""The traffic shape without a cluster: validation, seeded draws, the records a shaped producer sends, the
value ids readers take back from them, and the rate patterns' schedule."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest

from chaos.errors import ConfigError
from chaos.run.context import RunContext
from chaos.run.events import VALUE_ID_HEADER, Event, SendInvoke, value_id_for
from chaos.scenario.workers import RunWorkers
from chaos.workload import (
    IDEMPOTENT,
    TRANSACTIONAL,
    JavaProducer,
    ProcessProducerSpec,
    ProducerSpec,
    Traffic,
    TxnProducerSpec,
)
from chaos.workload.common import header_value_id, payload_value_id, record_value_id
from chaos.workload.producer import Pacer, SendRecorder
from chaos.workload.traffic import RatePattern, unit
from tests.unit.audit.test_audit_streams import Host


class FakeProducer:
    """Captures ``produce()`` calls."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.reports: list[Any] = []

    def produce(self, topic: str, *, on_delivery: Any, **record: Any) -> None:
        self.reports.append(on_delivery)
        self.sent.append({"topic": topic, **record})

    def poll(self, _timeout: float) -> int:
        return 0


def context(seed: int | None = 7, **changes: Any) -> tuple[RunContext, list[Event]]:
    events: list[Event] = []
    fields: dict[str, Any] = {
        "run_id": "run1",
        "bootstrap_servers": "127.0.0.1:9",
        "topic": "t",
        "group": "g",
        "client": IDEMPOTENT,
        "sink": events.append,
        "seed": seed,
    }
    return RunContext(**{**fields, **changes}), events


def send(
    traffic: Traffic | None, count: int, *, seed: int | None = 7, keys: int = 16
) -> tuple[list[dict[str, Any]], list[SendInvoke]]:
    ctx, events = context(seed)
    spec = ProducerSpec(name="p", rate=None, count=count, keys=keys, traffic=traffic)
    recorder = SendRecorder(ctx, "p", "t", spec.keys, shape=spec.shape(ctx))
    producer = FakeProducer()
    for seq in range(count):
        recorder.send(producer, seq)  # type: ignore[arg-type]
    return producer.sent, [e for e in events if isinstance(e, SendInvoke)]


# ---- validation ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"size": 0}, r"Traffic\.size: expected a value size in bytes"),
        ({"size": 10, "sizes": (1, 5)}, r"set size .* or sizes .*, not both"),
        ({"sizes": (500, 100)}, r"sizes: expected \(lo, hi\)"),
        ({"sizes": [(100, 0.5), (200, -1)]}, r"the pair \(200, -1\)"),
        ({"sizes": "big"}, r"Traffic\.sizes"),
        ({"keys": 0}, r"Traffic\.keys: expected the number of distinct keys"),
        ({"key_skew": "pareto"}, r"key_skew: expected one of sequential, uniform, zipf"),
        ({"keys": None, "key_skew": "zipf"}, r"needs keys: set keys=N"),
        ({"key_skew": "zipf", "zipf_s": 0}, r"zipf_s: expected an exponent > 0"),
        ({"headers": {"a": 1}}, r"headers: expected a mapping of header name to value"),
        ({"headers": {VALUE_ID_HEADER: "x"}}, r"the harness's own header"),
        ({"tombstones": 1.0}, r"tombstones: expected the share of null-value records, 0 <= share < 1"),
        ({"tombstones": 0.1, "keys": None}, r"a tombstone deletes a key.*set keys=N"),
        ({"burst": (1.0, 0.0)}, r"burst: expected \(on_s, off_s\), both seconds > 0"),
        ({"burst": (1.0, 1.0), "steps": [(10, 1)]}, r"set burst=.* or steps=.*, not both"),
        ({"steps": [(0, 1), (0, 2)]}, r"every rate .* is 0: nothing would be sent"),
        ({"steps": [(10, 0)]}, r"seconds > 0"),
        ({"seed": "x"}, r"Traffic\.seed: expected an int"),
    ],
)
def test_a_bad_traffic_is_refused_saying_how_to_fix_it(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Traffic(**options)


def test_specs_take_the_traffic_and_refuse_what_does_not_fit() -> None:
    with pytest.raises(ConfigError, match=r"keys=8 and traffic\.keys=16 disagree"):
        ProducerSpec(name="p", keys=8, traffic=Traffic())
    with pytest.raises(ConfigError, match=r"give the producer a rate"):
        ProducerSpec(name="p", rate=None, count=10, traffic=Traffic(burst=(1, 1)))
    with pytest.raises(ConfigError, match=r"expected a chaos\.workload\.Traffic"):
        ProducerSpec(name="p", traffic={"size": 10})  # type: ignore[arg-type]
    assert ProducerSpec(name="p", keys=8, traffic=Traffic(keys=8)).traffic == Traffic(keys=8)


@pytest.mark.parametrize("spec_type", [ProducerSpec, ProcessProducerSpec, TxnProducerSpec])
def test_a_spec_with_traffic_round_trips_through_a_child_payload(spec_type: type[ProducerSpec]) -> None:
    traffic = Traffic(
        sizes=[(100, 3), (5000, 1)],
        keys=8,
        key_skew="zipf",
        zipf_s=1.3,
        headers={"source": "billing", "tenant": "a"},
        tombstones=0.05,
        steps=[(50, 1.0), (0, 0.5)],
        seed=11,
    )
    spec = spec_type(name="p", count=100, keys=8, traffic=traffic)
    assert spec_type.from_data(spec.to_data()) == spec
    ranged = spec_type(name="p", count=100, traffic=Traffic(sizes=(10, 20), burst=(2, 1)))
    assert spec_type.from_data(ranged.to_data()) == ranged


def test_the_java_producer_refuses_a_traffic_shape_rather_than_ignore_it() -> None:
    ctx, _ = context()
    with pytest.raises(ConfigError, match=r"(?s)Java client.s worker sends only the bare value id.*fix:"):
        JavaProducer(ctx, ProducerSpec(name="p", traffic=Traffic(size=100)), worker=None)  # type: ignore[arg-type]


# ---- the records -----------------------------------------------------------------------------------


def test_without_traffic_the_records_are_the_bare_ids_as_before() -> None:
    sent, invokes = send(None, 20, keys=4)
    for seq, (record, invoke) in enumerate(zip(sent, invokes, strict=True)):
        vid = value_id_for("run1", "p", seq)
        assert record["value"] == vid.encode()
        assert record["key"] == f"k{seq % 4}".encode()
        assert record["headers"] is None
        assert invoke.tombstone is None
        assert invoke.key == f"k{seq % 4}"


def test_a_sized_value_is_its_id_a_bar_and_padding_to_the_exact_size() -> None:
    sent, _ = send(Traffic(size=200, headers={"source": "billing"}), 30)
    for seq, record in enumerate(sent):
        vid = value_id_for("run1", "p", seq)
        value = record["value"]
        assert len(value) == 200
        assert value.startswith(vid.encode() + b"|")
        assert b"|" not in value[len(vid) + 1 :]
        assert payload_value_id(value) == vid
        assert ("source", b"billing") in record["headers"]
        assert record["headers"][-1] == (VALUE_ID_HEADER, vid.encode())
        assert value.decode("ascii")  # printable padding: a string deserializer reads it


def test_a_size_below_the_id_gives_the_id_and_its_bar() -> None:
    sent, _ = send(Traffic(size=3), 1)
    assert sent[0]["value"] == b"run1:p:0|"


def test_sizes_follow_the_distribution() -> None:
    sent, _ = send(Traffic(sizes=(100, 10_000)), 2000)
    sizes = [len(r["value"]) for r in sent]
    assert min(sizes) >= 100
    assert max(sizes) <= 10_000
    assert max(sizes) - min(sizes) > 9000  # spread over the range
    weighted, _ = send(Traffic(sizes=[(100, 0.9), (4000, 0.1)]), 2000)
    counts = Counter(len(r["value"]) for r in weighted)
    assert set(counts) == {100, 4000}
    assert 0.85 < counts[100] / 2000 < 0.95


def test_a_tombstone_has_a_null_value_its_id_in_the_header_and_is_recorded() -> None:
    sent, invokes = send(Traffic(keys=16, tombstones=0.2, size=64), 500)
    tombstones = [(r, i) for r, i in zip(sent, invokes, strict=True) if r["value"] is None]
    assert 60 < len(tombstones) < 140
    for record, invoke in tombstones:
        assert invoke.tombstone is True
        assert record["key"] is not None
        assert header_value_id(record["headers"]) == invoke.value_id
        assert record_value_id(None, record["headers"]) == invoke.value_id
    assert all(i.tombstone is None for r, i in zip(sent, invokes, strict=True) if r["value"] is not None)


def test_a_tombstones_delivery_report_resolves_its_own_value() -> None:
    class Delivered:
        def value(self) -> None:
            return None

        def partition(self) -> int:
            return 1

        def offset(self) -> int:
            return 5

    ctx, events = context()
    spec = ProducerSpec(name="p", rate=None, count=1, traffic=Traffic(tombstones=0.99))
    recorder = SendRecorder(ctx, "p", "t", spec.keys, shape=spec.shape(ctx))
    producer = FakeProducer()
    vid = recorder.send(producer, 0)  # type: ignore[arg-type]
    assert producer.sent[0]["value"] is None
    producer.reports[0](None, Delivered())
    outcome = events[-1]
    assert (outcome.kind, outcome.value_id, outcome.outcome) == ("send_outcome", vid, "ok")  # type: ignore[attr-defined]
    assert recorder.counts() == (1, 1, 0, 0)


def test_keyless_records_have_no_key() -> None:
    sent, invokes = send(Traffic(keys=None), 10)
    assert all(r["key"] is None for r in sent)
    assert all(i.key is None for i in invokes)


def test_zipf_keys_are_skewed_and_uniform_keys_are_not() -> None:
    n = 5000
    zipf, _ = send(Traffic(keys=100, key_skew="zipf", zipf_s=1.2), n)
    counts = Counter(r["key"] for r in zipf)
    ranked = [c for _, c in counts.most_common()]
    assert counts.most_common(1)[0][0] == b"k0"
    assert sum(ranked[:5]) > 0.5 * n  # five hot keys carry most records
    uniform, _ = send(Traffic(keys=100, key_skew="uniform"), n)
    ucounts = Counter(r["key"] for r in uniform)
    assert len(ucounts) == 100
    assert max(ucounts.values()) < 3 * n / 100
    sequential, _ = send(Traffic(keys=5), 10)
    assert [r["key"] for r in sequential] == [f"k{s % 5}".encode() for s in range(10)]


def test_the_draws_are_fixed_by_the_seed_and_differ_per_producer_and_seed() -> None:
    traffic = Traffic(keys=50, key_skew="uniform", sizes=(10, 1000), tombstones=0.1)
    first, _ = send(traffic, 300, seed=7)
    again, _ = send(traffic, 300, seed=7)
    other, _ = send(traffic, 300, seed=8)
    assert first == again
    assert first != other
    pinned = Traffic(keys=50, key_skew="uniform", seed=3)
    assert send(pinned, 50, seed=1)[0] == send(pinned, 50, seed=2)[0]  # its own seed wins over the run's
    a, b = traffic.shape("producer-0", 7), traffic.shape("producer-1", 7)
    assert [a.key(s) for s in range(50)] != [b.key(s) for s in range(50)]
    # a pure function of (seed, seq): a resent sequence number is the same record
    assert a.record(42, "run1:producer-0:42") == traffic.shape("producer-0", 7).record(
        42, "run1:producer-0:42"
    )
    assert 0.0 <= unit(1, 2, 3) < 1.0
    assert unit(1, 2, 3) == unit(1, 2, 3)


def test_readers_take_the_id_from_the_value_or_a_tombstones_header() -> None:
    vid = "run1:p:12"
    assert payload_value_id(vid.encode()) == vid
    assert payload_value_id(f"{vid}|xxxx".encode()) == vid
    assert payload_value_id(f"{vid} trailing".encode()) == vid
    assert payload_value_id(b"not ours") is None
    assert payload_value_id(b"run1:p:x|pad") is None
    assert payload_value_id(b"a" * 500) is None
    assert record_value_id(None, [("other", b"v"), (VALUE_ID_HEADER, vid.encode())]) == vid
    assert record_value_id(None, None) is None
    assert record_value_id(None, [(VALUE_ID_HEADER, b"garbage")]) is None
    assert record_value_id(f"{vid}|p".encode(), [(VALUE_ID_HEADER, b"run1:p:99")]) == vid


# ---- pacing ----------------------------------------------------------------------------------------


def test_a_burst_sends_at_the_rate_while_on_and_nothing_while_off() -> None:
    spec = ProducerSpec(name="p", rate=100, count=1000, duration_s=None, traffic=Traffic(burst=(2.0, 3.0)))
    pattern = spec.pattern()
    assert pattern is not None
    dues = [pattern.due(n) for n in range(600)]
    assert dues[0] == 0.0
    assert dues[199] == pytest.approx(1.99)
    assert dues[200] == pytest.approx(5.0)  # the second burst starts after 2 s on, 3 s off
    assert dues[400] == pytest.approx(10.0)
    assert not any(2.0 <= d % 5.0 < 5.0 - 1e-9 for d in dues)
    assert spec.sending_s() == pytest.approx(pattern.due(1000))
    assert pattern.rate_at(1.0) == 100
    assert pattern.rate_at(3.0) == 0


def test_steps_replace_the_rate_and_repeat() -> None:
    pattern = RatePattern(((10.0, 1.0), (100.0, 1.0)))
    assert [pattern.due(n) for n in (0, 9, 10, 109, 110)] == pytest.approx([0.0, 0.9, 1.0, 1.99, 2.0])
    spec = ProducerSpec(
        name="p", rate=None, count=110, duration_s=None, traffic=Traffic(steps=[(10, 1), (100, 1)])
    )
    assert spec.sending_s() == pytest.approx(2.0)


def test_the_pacer_follows_the_pattern() -> None:
    spec = ProducerSpec(name="p", rate=1000, count=50, traffic=Traffic(burst=(0.01, 0.05)))
    pace = Pacer(spec, threading.Event(), start=20)
    assert pace.due(0) == 0.0
    assert pace.due(10) == pytest.approx(0.06)
    steady = Pacer(ProducerSpec(name="p", rate=50, count=5), threading.Event())
    assert steady.due(5) == pytest.approx(0.1)


# ---- the scenario's producers ----------------------------------------------------------------------


def test_an_input_producer_is_plain_idempotent_under_a_transactional_variant() -> None:
    ctx, _ = context(client=TRANSACTIONAL)
    workers = RunWorkers(Host(ctx))
    chosen = workers.stream_context("feeder", None, role="input")
    assert chosen.client == IDEMPOTENT
    assert not chosen.client.transactional
    assert workers.streams == {"feeder": "idempotent"}
    assert workers.stream_context("app", None).client == TRANSACTIONAL
    with pytest.raises(ConfigError, match=r"role='input' is a plain producer.*transactional"):
        workers.stream_context("feeder-2", TRANSACTIONAL, role="input")
    with pytest.raises(ConfigError, match=r"role expected 'app'"):
        workers.stream_context("feeder-3", None, role="output")  # type: ignore[arg-type]


def test_keys_given_to_the_call_win_over_the_traffics() -> None:
    from chaos.scenario.workers import UNSET, producer_traffic

    assert producer_traffic(UNSET, None) == (16, None)
    assert producer_traffic(8, None) == (8, None)
    assert producer_traffic(None, None) == (16, Traffic(keys=None))
    assert producer_traffic(8, Traffic(size=10)) == (8, Traffic(size=10, keys=8))
    assert producer_traffic(UNSET, Traffic(keys=4)) == (4, Traffic(keys=4))
    with pytest.raises(ConfigError, match=r"a tombstone deletes a key"):
        producer_traffic(None, Traffic(tombstones=0.1))
    with pytest.raises(ConfigError, match=r"producer keys: expected"):
        producer_traffic(0, None)
