"""Small read-only views over a run's history, for scenario assertions.

Assertions go through the history (and the audit), never through counters kept on the side: these
helpers only filter and summarise typed events (``read_events(run_dir)`` or the runner's live copy).

A moment of the timeline is found by the event that *is* that moment, never by its position in a list
other code may add to (a gate run writes notes of its own first; a nemesis adds faults): a fault's own
inject or heal (:func:`fault_event`, :func:`fault_window`: matched by the fault's kind, target and sequence
number in the run's fault log) or a scenario's named mark (:func:`mark`, written by
:meth:`chaos.scenario.ScenarioRun.mark`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from chaos.faults.base import Fault, FaultRecord
from chaos.history.windows import fault_seq
from chaos.run.events import (
    ClientLog,
    ClusterSample,
    Commit,
    Delivery,
    Event,
    FaultAction,
    FaultEvent,
    ProbeCall,
    Rebalance,
    SendOutcome,
)
from chaos.scenario.bridge import event_target

MARK_FACILITY: Final = "SCENARIO"
"""The facility of a scenario's notes and marks (``client_log`` from the process ``scenario``)."""
MARK_PREFIX: Final = "mark: "
"""A mark's message is exactly this prefix and its name (``mark: cut-done``)."""
MARK_NAME: Final = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
"""A mark's name: lower-case words joined by ``-``, ``.`` or ``_`` (``cut-done``, ``step-t1a``)."""


def probe_calls(events: Iterable[Event], operation: str | None = None) -> list[ProbeCall]:
    """The restore reader's / probes' timed calls, optionally of one operation (``list_offsets``…)."""
    return [e for e in events if isinstance(e, ProbeCall) and (operation is None or e.operation == operation)]


def faults(events: Iterable[Event], fault: str | None = None) -> list[FaultEvent]:
    return [e for e in events if isinstance(e, FaultEvent) and (fault is None or e.fault == fault)]


def _record(fault: Fault | FaultRecord) -> FaultRecord:
    if isinstance(fault, FaultRecord):
        return fault
    if fault.record is None:
        raise AssertionError(f"{fault.kind} on {fault.target_text} was never injected")
    return fault.record


def fault_event(
    events: Iterable[Event], fault: Fault | FaultRecord, action: FaultAction = "inject"
) -> FaultEvent:
    """``fault``'s own ``inject`` (or ``heal``) event: the one of its kind, its target and its sequence
    number in the run's fault log — whatever other faults (a nemesis, another case step) the history holds
    and in whatever order. AssertionError when the history has none (a heal not done) or, impossibly,
    several."""
    record = _record(fault)
    found = [e for e in fault_events(events, record) if e.action == action]
    if len(found) != 1:
        what = "no" if not found else f"{len(found)}"
        raise AssertionError(
            f"{what} {action} event of {record.kind} #{record.seq} on {event_target(record)} in the history"
        )
    return found[0]


def fault_events(events: Iterable[Event], fault: Fault | FaultRecord) -> list[FaultEvent]:
    """``fault``'s own events in record order: its inject and, once healed, its heal."""
    record = _record(fault)
    target = event_target(record)
    return [
        e for e in faults(events, record.kind) if e.target == target and fault_seq(e.params) == record.seq
    ]


def fault_window(events: Sequence[Event], fault: Fault | FaultRecord) -> tuple[float, float | None]:
    """``(inject mono, heal mono or None)`` of ``fault`` (the handle :meth:`ScenarioRun.fault` returned, or
    its record): its own events (:func:`fault_event`), ``None`` for a heal the history does not hold."""
    inject = fault_event(events, fault, "inject")
    try:
        heal: float | None = fault_event(events, fault, "heal").mono
    except AssertionError:
        heal = None
    return inject.mono, heal


def mark_text(name: str) -> str:
    """The message of the mark ``name`` (a ``ValueError`` for a name :data:`MARK_NAME` refuses)."""
    if not isinstance(name, str) or not MARK_NAME.fullmatch(name):
        raise ValueError(
            f"mark name {name!r}: expected lower-case words joined by '-', '.' or '_' (e.g. 'cut-done')"
        )
    return MARK_PREFIX + name


def marks(events: Iterable[Event]) -> dict[str, ClientLog]:
    """Every mark of the history by name (notes and the gate's own notes are not marks)."""
    found: dict[str, ClientLog] = {}
    for e in client_logs(events, facility=MARK_FACILITY):
        if e.process == "scenario" and e.message.startswith(MARK_PREFIX):
            name = e.message.removeprefix(MARK_PREFIX)
            if name in found:
                raise AssertionError(f"the mark {name!r} is in the history twice")
            found[name] = e
    return found


def find_mark(events: Iterable[Event], name: str) -> ClientLog | None:
    """The mark ``name`` (:meth:`ScenarioRun.mark`), ``None`` when the timeline never reached it."""
    return marks(events).get(name)


def mark(events: Iterable[Event], name: str) -> ClientLog:
    """The mark ``name``; AssertionError when the history has none."""
    found = find_mark(events, name)
    if found is None:
        raise AssertionError(f"no mark {name!r} in the history")
    return found


def short_value_id(value_id: str) -> str:
    """A value id without its run id (``producer-0:12``): what a sentence about one run needs."""
    parts = value_id.split(":")
    return ":".join(parts[-2:]) if len(parts) >= 3 else value_id


def values_text(value_ids: Iterable[str], total: int | None = None, shown: int = 3) -> str:
    """``61 values, e.g. producer-0:12, producer-0:13, producer-0:14 …`` (``total``: how many there are,
    when ``value_ids`` is a sample of them); ``no value`` when there is none."""
    ids = list(value_ids)
    count = len(ids) if total is None else total
    if not count:
        return "no value"
    head = ", ".join(short_value_id(v) for v in ids[:shown])
    more = " …" if count > min(len(ids), shown) else ""
    noun = "value" if count == 1 else "values"
    return f"{count} {noun}, e.g. {head}{more}" if more else f"{count} {noun}: {head}"


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
