"""The gate's thresholds on one run (chaos.gate.thresholds): synthetic audit facts and histories — which
window is worst, what does not apply to a case, and what is unmeasured (never a pass)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import pytest

from chaos.audit.facts import (
    ANOMALIES,
    AnomalyReport,
    AuditFacts,
    Availability,
    ConsumeGap,
    Consumption,
    FaultWindow,
    Handover,
    LatencyStats,
    Totals,
)
from chaos.gate.gatefile import GateFileError, Thresholds, load_gate
from chaos.gate.thresholds import Measurement, measure
from chaos.history import Delivery, Event, SendInvoke, SendOutcome

RUN = "r1"
TS = 1.8e9


def stats(p99: float | None, count: int = 10) -> LatencyStats:
    return LatencyStats(count if p99 is not None else 0, p99, p99)


def window(
    fault: str,
    inject: float,
    heal: float | None,
    *,
    p99: float | None = None,
    ack: float | None = None,
    delivery: float | None = None,
    target: str = "broker-1",
) -> FaultWindow:
    return FaultWindow(fault, target, inject, heal, stats(1.0), stats(p99), stats(1.0), ack, delivery)


def facts(
    windows: Sequence[FaultWindow] = (),
    *,
    outage: float | None = 2.0,
    counts: dict[str, int] | None = None,
    sends: int = 100,
) -> AuditFacts:
    given = counts or {}
    anomalies = tuple((name, AnomalyReport(given.get(name, 0))) for name in ANOMALIES)
    return AuditFacts(
        RUN,
        anomalies,
        Availability(outage, 0.0 if outage else None, outage, tuple(windows)),
        Totals(sends, sends, 0, 0, sends, sends),
    )


def send(mono: float, seq: int) -> list[Event]:
    value = f"{RUN}:p:{seq}"
    return [
        SendInvoke(
            run_id=RUN, process="p", ts=TS, mono=mono, value_id=value, producer="p", seq=seq, topic="t"
        ),
        SendOutcome(
            run_id=RUN,
            process="p",
            ts=TS,
            mono=mono + 0.01,
            value_id=value,
            outcome="ok",
            partition=0,
            offset=seq,
        ),
    ]


def deliver(mono: float, offset: int) -> Event:
    return Delivery(
        run_id=RUN, process="c", ts=TS, mono=mono, group="g", topic="t", partition=0, offset=offset
    )


def workload(*monos: float, delivered: Sequence[float] = ()) -> list[Event]:
    events: list[Event] = []
    for seq, mono in enumerate(monos):
        events += send(mono, seq)
    events += [deliver(m, i) for i, m in enumerate(delivered)]
    return events


def by_name(found: Sequence[Measurement]) -> dict[str, Measurement]:
    return {m.name: m for m in found}


def test_the_worst_window_counts_and_each_threshold_is_judged_against_its_limit() -> None:
    limits = Thresholds(
        longest_outage_s=5, p99_ack_latency_ms=1000, heal_to_first_ack_s=2, heal_to_first_delivery_s=3
    )
    windows = [
        window("crash", 10, 20, p99=300.0, ack=0.5, delivery=1.0, target="broker-1"),
        window("network_cut", 30, 40, p99=1500.0, ack=2.5, delivery=0.2, target="broker-2"),
    ]
    events = workload(1, 5, 15, 25, 35, 45, delivered=(2, 6, 21, 41))
    result = measure(limits, facts(windows, outage=4.0), events)
    got = by_name(result.measurements)
    assert not result.not_applicable
    assert got["longest_outage_s"].observed == 4.0
    assert got["longest_outage_s"].passed
    assert (got["p99_ack_latency_ms"].observed, got["p99_ack_latency_ms"].window) == (
        1500.0,
        "network_cut broker-2",
    )
    assert not got["p99_ack_latency_ms"].passed
    assert (got["heal_to_first_ack_s"].observed, got["heal_to_first_ack_s"].passed) == (2.5, False)
    assert (got["heal_to_first_delivery_s"].observed, got["heal_to_first_delivery_s"].window) == (
        1.0,
        "crash broker-1",
    )
    assert {m.name for m in result.broken} == {"p99_ack_latency_ms", "heal_to_first_ack_s"}
    assert result.unmeasured == ()
    assert (
        got["p99_ack_latency_ms"].describe() == "p99_ack_latency_ms 1500 ms > 1000 ms (network_cut broker-2)"
    )
    scenario_json = {t.name: t for t in result.results()}
    assert scenario_json["heal_to_first_ack_s"].to_dict() == {
        "name": "heal_to_first_ack_s",
        "limit": 2,
        "observed": 2.5,
        "passed": False,
        "unit": "s",
    }


def test_a_case_without_faults_or_without_a_working_producer_skips_the_window_thresholds() -> None:
    limits = Thresholds(
        p99_ack_latency_ms=1000, heal_to_first_ack_s=2, heal_to_first_delivery_s=3, duplicates=0
    )
    no_fault = measure(limits, facts(), workload(1, 2))
    assert [m.name for m in no_fault.measurements] == ["duplicates"]
    assert len(no_fault.not_applicable) == 3
    assert all("no fault window" in line for line in no_fault.not_applicable)
    # PB1-like: the producer prefilled before the fault and stopped; no group across the heal
    idle = measure(limits, facts([window("network_cut", 10, 20)]), workload(1, 2, delivered=(3,)))
    assert [m.name for m in idle.measurements] == ["duplicates"]
    assert [line.split(":")[0] for line in idle.not_applicable] == [
        "p99_ack_latency_ms",
        "heal_to_first_ack_s",
        "heal_to_first_delivery_s",
    ]


def test_what_the_case_exercises_but_the_run_does_not_show_is_unmeasured_never_a_pass() -> None:
    limits = Thresholds(p99_ack_latency_ms=1000, heal_to_first_ack_s=2, heal_to_first_delivery_s=3)
    # sends during the fault, none acknowledged in it; sends after the heal, none acknowledged before the end
    windows = [window("crash", 10, 20, p99=None, ack=None, delivery=None)]
    result = measure(limits, facts(windows), workload(1, 12, 25, delivered=(2,)))
    assert {m.name for m in result.unmeasured} == {
        "p99_ack_latency_ms",
        "heal_to_first_ack_s",
        "heal_to_first_delivery_s",
    }
    assert all(not m.passed and m.observed is None for m in result.unmeasured)
    assert result.broken == ()
    note = by_name(result.measurements)["heal_to_first_ack_s"]
    assert "nothing was acknowledged after the heal" in note.describe()
    assert all(t.observed is None and not t.passed for t in result.results())


def test_a_window_never_healed_is_not_judged_for_recovery() -> None:
    limits = Thresholds(heal_to_first_ack_s=2)
    result = measure(limits, facts([window("crash", 10, None, p99=5.0)]), workload(1, 12, 30))
    assert result.measurements == ()
    assert "sends nothing after its faults heal" in result.not_applicable[0]


def test_duplicates_count_every_copy_and_the_rate_divides_by_the_sends() -> None:
    counts = {"duplicate_in_log": 3, "duplicate_delivery_after_rebalance": 4, "duplicate_delivery_other": 1}
    got = by_name(measure(Thresholds(duplicates=7), facts(counts=counts), ()).measurements)
    assert (got["duplicates"].observed, got["duplicates"].passed) == (8.0, False)
    rate = by_name(measure(Thresholds(duplicate_rate=0.1), facts(counts=counts, sends=200), ()).measurements)
    assert rate["duplicate_rate"].observed == pytest.approx(0.04)
    assert rate["duplicate_rate"].passed
    none_sent = measure(Thresholds(duplicate_rate=0.1, longest_outage_s=1), facts(sends=0, outage=None), ())
    assert none_sent.measurements == ()
    assert len(none_sent.not_applicable) == 2


def test_an_outage_the_audit_could_not_compute_is_unmeasured() -> None:
    result = measure(Thresholds(longest_outage_s=1), facts(outage=None), workload(1))
    (outage,) = result.measurements
    assert outage.observed is None
    assert not outage.passed


def test_windows_of_the_same_fault_and_target_are_numbered() -> None:
    windows = [
        window("latency", 10, 12, p99=10.0, target="broker-1"),
        window("latency", 20, 22, p99=900.0, target="broker-1"),
    ]
    result = measure(Thresholds(p99_ack_latency_ms=100), facts(windows), workload(11, 21))
    assert result.measurements[0].window == "latency broker-1 #2"


# ---- the consumer side (availability.consumer) ------------------------------------------------------


def consumer_facts(consumer: Consumption) -> AuditFacts:
    base = facts()
    return dataclasses.replace(base, availability=dataclasses.replace(base.availability, consumer=consumer))


STALL = ConsumeGap("t", 1, 10.9, 5.0, 15.9, True)
HANDOVER = Handover("t", 1, "consumer-1", "m1", "consumer-0", "m0", 4.5, 15.9, 11.4, False)


def test_consumer_thresholds_judge_the_longest_stall_e2e_p99_and_handover() -> None:
    limits = Thresholds(max_consume_gap_s=5, p99_e2e_latency_ms=20_000, max_handover_s=30)
    consumer = Consumption(
        gaps=(ConsumeGap("t", 0, 0.2, 1.0, 1.2, True), STALL),
        e2e=LatencyStats(40, 12.0, 11_000.0),
        handovers=(HANDOVER,),
    )
    result = measure(limits, consumer_facts(consumer), workload(1, 2, delivered=(3,)))
    got = by_name(result.measurements)
    assert (got["max_consume_gap_s"].observed, got["max_consume_gap_s"].window) == (10.9, "t-1")
    assert got["max_consume_gap_s"].describe() == "max_consume_gap_s 10.9 s > 5 s (t-1)"
    assert (got["p99_e2e_latency_ms"].observed, got["p99_e2e_latency_ms"].passed) == (11_000.0, True)
    assert got["max_handover_s"].observed == 11.4
    assert got["max_handover_s"].window == "t-1 consumer-1 → consumer-0"
    assert [m.name for m in result.broken] == ["max_consume_gap_s"]
    assert {t.name: t.unit for t in result.results()} == {
        "max_consume_gap_s": "s",
        "p99_e2e_latency_ms": "ms",
        "max_handover_s": "s",
    }


def test_a_services_input_stall_counts_as_a_consume_gap() -> None:
    """A service's input partition that waited longer than any output partition is the run's stall."""
    limits = Thresholds(max_consume_gap_s=5)
    consumer = Consumption(
        gaps=(ConsumeGap("out", 0, 0.4, 1.0, 1.4, True),),
        service_gaps=(ConsumeGap("in", 1, 7.5, 2.0, 9.5, True), ConsumeGap("in", 0, 0.3, 1.0, 1.3, True)),
    )
    got = by_name(measure(limits, consumer_facts(consumer), workload(1, 2, delivered=(3,))).measurements)
    assert (got["max_consume_gap_s"].observed, got["max_consume_gap_s"].window) == (7.5, "in-1")
    assert not got["max_consume_gap_s"].passed
    quiet = Consumption(gaps=consumer.gaps, service_gaps=(ConsumeGap("in", 1, 0.1, 2.0, 2.1, True),))
    got = by_name(measure(limits, consumer_facts(quiet), workload(1, 2, delivered=(3,))).measurements)
    assert (got["max_consume_gap_s"].observed, got["max_consume_gap_s"].window) == (0.4, "out-0")


def test_consumer_thresholds_without_a_group_do_not_apply_and_without_values_are_unmeasured() -> None:
    limits = Thresholds(max_consume_gap_s=5, p99_e2e_latency_ms=1000, max_handover_s=30)
    no_group = measure(limits, consumer_facts(Consumption()), workload(1, 2))
    assert no_group.measurements == ()
    assert all("no consumer group" in line for line in no_group.not_applicable)
    # the group delivered: nothing ever waited (0 s), no readable value delivered (unmeasured), no handover
    quiet = measure(limits, consumer_facts(Consumption()), workload(1, delivered=(2,)))
    got = by_name(quiet.measurements)
    assert (got["max_consume_gap_s"].observed, got["max_consume_gap_s"].passed) == (0.0, True)
    assert got["p99_e2e_latency_ms"] in quiet.unmeasured
    assert "no delivered value has a time it became readable" in got["p99_e2e_latency_ms"].describe()
    assert [line.split(":")[0] for line in quiet.not_applicable] == ["max_handover_s"]
    never = Consumption(gaps=(ConsumeGap("t", 2, 40.0, 5.0, 45.0, False),))
    stuck = by_name(measure(limits, consumer_facts(never), workload(1, delivered=(2,))).measurements)
    assert stuck["max_consume_gap_s"].window == "t-2, never resumed"
    assert not stuck["max_consume_gap_s"].passed


def test_consumer_thresholds_parse_validate_and_override_per_case(tmp_path: Path) -> None:
    path = tmp_path / "gate.toml"
    path.write_text(
        'guarantee = "at_least_once"\n[producer]\n[thresholds]\nmax_consume_gap_s = 15\n'
        "p99_e2e_latency_ms = 5000.5\nmax_handover_s = 45\n[thresholds.MPI1]\nmax_handover_s = 60\n",
        encoding="utf-8",
    )
    gate = load_gate(path)
    assert (gate.thresholds.max_consume_gap_s, gate.thresholds.p99_e2e_latency_ms) == (15, 5000.5)
    assert gate.thresholds_for("MPI1").max_handover_s == 60
    assert gate.thresholds_for("MPI1").max_consume_gap_s == 15
    for key, value, shown in (("max_consume_gap_s", "-1", "-1"), ("max_handover_s", '"soon"', "'soon'")):
        path.write_text(
            f'guarantee = "at_least_once"\n[producer]\n[thresholds]\n{key} = {value}\n', encoding="utf-8"
        )
        with pytest.raises(GateFileError) as raised:
            load_gate(path)
        assert f"gate.toml:3: thresholds.{key}: expected a number >= 0; got {shown}" in str(raised.value)
    with pytest.raises(GateFileError, match="p99_e2e_latency_ms"):
        Thresholds(p99_e2e_latency_ms=True)
