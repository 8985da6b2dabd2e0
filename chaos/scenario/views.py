"""Small read-only views over a run's history, for scenario assertions.

Assertions go through the history (and the audit), never through counters kept on the side: these
helpers only filter and summarise typed events (``read_events(run_dir)`` or the runner's live copy).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from chaos.history.events import (
    ClientLog,
    ClusterSample,
    Commit,
    Delivery,
    Event,
    FaultEvent,
    ProbeCall,
    Rebalance,
    SendOutcome,
)
from chaos.history.windows import fault_windows


def probe_calls(events: Iterable[Event], operation: str | None = None) -> list[ProbeCall]:
    """The restore reader's / probes' timed calls, optionally of one operation (``list_offsets``…)."""
    return [e for e in events if isinstance(e, ProbeCall) and (operation is None or e.operation == operation)]


def faults(events: Iterable[Event], fault: str | None = None) -> list[FaultEvent]:
    return [e for e in events if isinstance(e, FaultEvent) and (fault is None or e.fault == fault)]


def fault_window(events: Sequence[Event], fault: str) -> tuple[float, float | None]:
    """``(inject mono, heal mono or None)`` of the first ``fault`` injected in the history (``events`` in
    record order), paired with its heal by :func:`chaos.history.windows.fault_windows`."""
    first = next(iter(fault_windows(faults(events, fault))), None)
    if first is None:
        raise AssertionError(f"no {fault} inject in the history")
    return first.inject.mono, first.heal.mono if first.heal is not None else None


def samples(
    events: Iterable[Event], *, ok_only: bool = True, process: str | None = None
) -> list[ClusterSample]:
    """Cluster-state samples (``process``: ``sampler`` for the raw-request sampler, ``introspect`` for the
    runner's raw-metadata readings; ``None``: both)."""
    return [
        e
        for e in events
        if isinstance(e, ClusterSample)
        and (not ok_only or e.error is None)
        and (process is None or e.process == process)
    ]


def deliveries(events: Iterable[Event], process: str | None = None) -> list[Delivery]:
    return [e for e in events if isinstance(e, Delivery) and (process is None or e.process == process)]


def rebalances(events: Iterable[Event], process: str | None = None) -> list[Rebalance]:
    return [e for e in events if isinstance(e, Rebalance) and (process is None or e.process == process)]


def commits(events: Iterable[Event], process: str | None = None) -> list[Commit]:
    return [e for e in events if isinstance(e, Commit) and (process is None or e.process == process)]


def client_logs(
    events: Iterable[Event], *, error: str | None = None, facility: str | None = None
) -> list[ClientLog]:
    return [
        e
        for e in events
        if isinstance(e, ClientLog)
        and (error is None or e.error == error)
        and (facility is None or e.facility == facility)
    ]


def outcomes(events: Iterable[Event], outcome: str | None = None) -> list[SendOutcome]:
    return [e for e in events if isinstance(e, SendOutcome) and (outcome is None or e.outcome == outcome)]


def acked_ids(events: Iterable[Event]) -> set[str]:
    return {e.value_id for e in outcomes(events, "ok")}


def delivered_ids(events: Iterable[Event]) -> set[str]:
    return {e.value_id for e in deliveries(events) if e.value_id is not None}


@dataclass(frozen=True)
class LeaderSpan:
    """A stretch of consecutive samples with the same leader of one partition (``None``: offline)."""

    leader: int | None
    first_mono: float
    last_mono: float
    samples: int


def leader_timeline(
    events: Iterable[Event], topic: str, partition: int, process: str | None = None
) -> list[LeaderSpan]:
    """The partition's leader as the samples saw it, run-length encoded (failed samples skipped)."""
    spans: list[LeaderSpan] = []
    for sample in samples(events, process=process):
        state = next(
            (s for s in sample.partition_states if s.topic == topic and s.partition == partition), None
        )
        if state is None:
            continue
        if spans and spans[-1].leader == state.leader:
            last = spans[-1]
            spans[-1] = LeaderSpan(last.leader, last.first_mono, sample.mono, last.samples + 1)
        else:
            spans.append(LeaderSpan(state.leader, sample.mono, sample.mono, 1))
    return spans


def isr_of(sample: ClusterSample, topic: str, partition: int) -> tuple[int, ...] | None:
    state = next((s for s in sample.partition_states if s.topic == topic and s.partition == partition), None)
    return state.isr if state is not None else None
