"""The gate's thresholds on one run (chaos.gate.thresholds): synthetic audit facts and histories — which
window is worst, what does not apply to a case, and what is unmeasured (never a pass)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from chaos.audit.model import (
    ANOMALIES,
    AnomalyReport,
    AuditFacts,
    Availability,
    FaultWindow,
    LatencyStats,
    Totals,
)
from chaos.gate.gatefile import Thresholds
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
