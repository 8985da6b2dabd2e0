"""Attribution: which fault windows and which broker lines about its partition surround an example."""

from __future__ import annotations

from pathlib import Path

from chaos.audit.facts import Example
from chaos.cluster.logs import write_log
from chaos.report.attribution import NEAR_S, attribute, partition_events
from chaos.report.symptoms import LogLine
from chaos.report.timeline import FaultSpan

T0 = 1_800_000_000.0


def span(fault: str, target: str, start: float, end: float | None) -> FaultSpan:
    return FaultSpan(fault, target, T0 + start, None if end is None else T0 + end, start, end, "{}")


SPANS = (
    span("pause", "broker-3", 2.0, 4.0),
    span("crash", "broker-2", 10.0, 20.0),
    span("pause", "broker-1", 60.0, None),
    span("latency", "broker-1", 70.0, 75.0),
)


def test_faults_during_it_then_the_last_one_before_and_the_next_one_after() -> None:
    def faults(at: float) -> tuple[str, ...]:
        return attribute(Example("v", "t", 0, 5, T0 + at), SPANS, []).faults

    assert faults(15.0) == ("during crash broker-2", "11.0 s after pause broker-3 healed")
    assert faults(9.2) == ("5.2 s after pause broker-3 healed", "0.8 s before crash broker-2")
    assert faults(25.0) == ("5.0 s after crash broker-2 healed",)
    assert faults(72.0) == ("during pause broker-1", "during latency broker-1")  # never healed: open
    assert faults(35.0) == ("15.0 s after crash broker-2 healed", "25.0 s before pause broker-1")
    assert faults(20.0 + NEAR_S + 1) == ("9.0 s before pause broker-1",)
    assert faults(21.0) == ("1.0 s after crash broker-2 healed",)  # the nearest only: not pause broker-3
    assert attribute(Example("v", "t", 0, 5, None), SPANS, []).empty


def test_the_next_fault_on_each_kind_of_target_is_named() -> None:
    """A value a service took in before a broker crashed and lost when the service was killed later: both
    coming faults are named, the broker's and the service's; a second broker fault is not."""
    spans = (
        *SPANS[:2],
        span("service_crash", "service-0", 14.0, 18.0),
        span("crash", "broker-3", 12.0, 13.0),
    )
    found = attribute(Example("v", "t", 0, 5, T0 + 9.0), spans, []).faults
    assert found == (
        "5.0 s after pause broker-3 healed",
        "1.0 s before crash broker-2",
        "5.0 s before service_crash service-0",
    )


def test_broker_lines_are_those_about_the_examples_partition_shortly_after_it(tmp_path: Path) -> None:
    lines = [
        "[2026-01-01 00:00:00,000] INFO Truncating partition t-1 with TruncationState(offset=0, "
        "completed=true)",
        "[2026-01-01 00:00:01,000] INFO [QuorumController id=1] UNCLEAN partition change for t-1 with topic "
        "ID x: isr: [2] -> [3], leader: 2 -> 3",
        "[2026-01-01 00:00:02,000] INFO [Partition t-10 broker=1] Shrinking ISR from 1,2 to 1.",
        "[2026-01-01 00:00:03,000] INFO [UnifiedLog partition=t-1] Truncating to 35 has no effect",
        "[2026-01-01 00:00:04,000] INFO [ReplicaFetcher replicaId=2, leaderId=3] Truncating partition t-1 "
        "with TruncationState(offset=35, completed=true) due to leader epoch and offset EpochEndOffset(x)",
        "[2026-01-01 00:00:05,000] INFO heartbeat ok for t-1",
        "[2026-01-01 00:10:00,000] INFO [QuorumController id=1] UNCLEAN partition change for t-1 later",
    ]
    write_log(tmp_path, "broker-1", ("\n".join(lines) + "\n").encode())
    write_log(tmp_path, "toxiproxy", b"[2026-01-01 00:00:01,000] UNCLEAN partition change for t-1\n")
    files = sorted(tmp_path.iterdir())
    events = partition_events(files, "t")
    assert [e.lineno for e in events] == [2, 3, 5, 7]  # offset-0 truncations, no-ops and noise left out
    at = events[0].ts
    assert at is not None
    why = attribute(Example("v", "t", 1, 30, at - 1.0), (), events)
    assert [ln.lineno for ln in why.broker_lines] == [2, 5]  # t-10 is another partition; 00:10 is too late
    assert why.broker_lines[0].text.startswith("[QuorumController id=1] UNCLEAN partition change for t-1")
    assert all(isinstance(ln, LogLine) and ln.file == "broker-1.log.gz" for ln in why.broker_lines)
