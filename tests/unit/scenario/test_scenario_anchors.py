"""A scenario finds the moments of its timeline by the events that are those moments — a fault's own
inject or heal, a named mark — never by their position among the notes or faults, to which a gate run
(its own notes first) or a nemesis adds. No Docker: synthetic histories."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Final

import pytest

from chaos.faults.base import FaultRecord
from chaos.history import ClientLog, Event, FaultEvent, SendOutcome, json_text
from chaos.scenario import views
from chaos.scenario.leaderloss import CUT_DONE, SETTLE_S, acked_during_cut

T0: Final = 1_700_000_000.0
RUN: Final = "l2-gate-x1"
SCENARIOS: Final = Path(__file__).resolve().parents[3] / "scenarios"

GATE_NOTES: Final = (
    "gate: producer sasl.password not passed to the run's clients: the gate's cluster is plaintext, "
    "without credentials",
    "gate: consumer group.id not passed to the run's clients: the run's group is the run's own",
)


def note(mono: float, text: str) -> ClientLog:
    return ClientLog(
        run_id=RUN,
        process="scenario",
        ts=T0 + mono,
        mono=mono,
        level="notice",
        message=text,
        facility="SCENARIO",
    )


def mark(mono: float, name: str) -> ClientLog:
    return note(mono, views.mark_text(name))


def fault(action: str, mono: float, kind: str, broker: int, seq: int) -> FaultEvent:
    return FaultEvent(
        run_id=RUN,
        process="nemesis",
        ts=T0 + mono,
        mono=mono,
        action=action,  # type: ignore[arg-type]
        fault=kind,
        target=f"broker-{broker}",
        params=json_text({"seq": seq, "asked": f"broker {broker}"}),
    )


def record(kind: str, broker: int, seq: int) -> FaultRecord:
    return FaultRecord(
        seq=seq, kind=kind, target=f"broker {broker}", brokers=(broker,), params=(), injected_at=T0
    )


def ack(mono: float, n: int, partition: int) -> SendOutcome:
    return SendOutcome(
        run_id=RUN,
        process="producer-0",
        ts=T0 + mono,
        mono=mono,
        value_id=f"{RUN}:producer-0:{n}",
        outcome="ok",
        partition=partition,
        offset=n,
        latency_ms=5.0,
    )


def l2_history(*, acks_in_cut: int, gate_notes: bool) -> list[Event]:
    """L2's timeline: warm-up acks on L's partition 0 from 1 s, the two replication cuts (seq 0, 1) at
    10 s, the mark once both are in place, the scenario's own note, (``acks_in_cut`` acks during the cut),
    the crash of L (seq 2) at 12.5 s, the heals; a gate run's notes before anything else."""
    events: list[Event] = (
        [note(0.1 + i / 10, text) for i, text in enumerate(GATE_NOTES)] if gate_notes else []
    )
    events += [ack(1.0 + n * 0.2, n, n % 3) for n in range(40)]  # up to 8.8 s, partitions 0-2
    events += [fault("inject", 10.0, "replication_cut", 2, 0), fault("inject", 10.1, "replication_cut", 3, 1)]
    events += [mark(10.2, CUT_DONE), note(10.21, "followers (2, 3) cut from leader 1 (partitions [0])")]
    events += [ack(10.8 + n * 0.05, 100 + n, 0) for n in range(acks_in_cut)]
    events += [fault("inject", 12.5, "crash", 1, 2)]
    events += [ack(13.0 + n * 0.1, 200 + n, 0) for n in range(10)]  # after the crash: not in the window
    events += [fault("heal", 20.0, "replication_cut", 2, 0), fault("heal", 20.1, "replication_cut", 3, 1)]
    events += [fault("heal", 25.0, "crash", 1, 2)]
    return events


CRASH: Final = record("crash", 1, 2)


@pytest.mark.parametrize("gate_notes", [False, True])
def test_l2s_cut_held_precondition_finds_the_cut_by_its_mark_whatever_notes_come_first(
    gate_notes: bool,
) -> None:
    held = l2_history(acks_in_cut=0, gate_notes=gate_notes)
    # the remediated timeline (acks=all): nothing acknowledged on L's partitions while the cut held
    assert acked_during_cut(held, {0}, CRASH) == []
    # the vulnerable one (acks=1): exactly the acks between the cut (+ SETTLE_S) and the crash
    alone = l2_history(acks_in_cut=7, gate_notes=gate_notes)
    during = acked_during_cut(alone, {0}, CRASH)
    assert [e.offset for e in during] == list(range(100, 107))
    assert all(10.2 + SETTLE_S < e.mono < 12.5 for e in during)


def test_the_first_scenario_note_of_a_gate_run_is_the_gates_not_the_cut() -> None:
    """What went wrong before: the first SCENARIO log is the gate's note, so a window opened there
    counted the warm-up's acks as acks during the cut."""
    events = l2_history(acks_in_cut=0, gate_notes=True)
    first = views.client_logs(events, facility="SCENARIO")[0]
    assert first.message.startswith("gate: ")
    warm_up = [
        e for e in views.outcomes(events, "ok") if e.partition == 0 and first.mono + 0.5 < e.mono < 12.5
    ]
    assert warm_up  # the wrong anchor sees acks; the mark does not
    assert views.mark(events, CUT_DONE).mono == 10.2


def test_a_fault_is_found_by_its_own_identity_not_by_its_place_among_faults() -> None:
    events = l2_history(acks_in_cut=0, gate_notes=True)
    # a crash of another broker injected earlier (a nemesis, another step) is not this one
    events.insert(0, fault("inject", 0.5, "crash", 3, 7))
    assert views.fault_event(events, CRASH).mono == 12.5
    assert views.fault_window(events, CRASH) == (12.5, 25.0)
    assert views.fault_window(events, record("replication_cut", 3, 1)) == (10.1, 20.1)
    assert [e.action for e in views.fault_events(events, record("replication_cut", 2, 0))] == [
        "inject",
        "heal",
    ]
    with pytest.raises(AssertionError, match="no inject event of crash #9 on broker-1"):
        views.fault_event(events, record("crash", 1, 9))
    unhealed = [e for e in events if not (isinstance(e, FaultEvent) and e.action == "heal")]
    assert views.fault_window(unhealed, CRASH) == (12.5, None)


def test_marks_are_found_by_name_and_notes_are_not_marks() -> None:
    events: list[Event] = [note(0.1, GATE_NOTES[0]), note(0.2, "mark cut-done"), mark(1.0, "window-start")]
    assert set(views.marks(events)) == {"window-start"}
    assert views.find_mark(events, "window-end") is None
    with pytest.raises(AssertionError, match="no mark 'window-end'"):
        views.mark(events, "window-end")
    with pytest.raises(AssertionError, match="twice"):
        views.marks([*events, mark(2.0, "window-start")])
    for bad in ("", "Cut done", "cut done", "-cut"):
        with pytest.raises(ValueError, match="mark name"):
            views.mark_text(bad)


def test_values_read_as_a_sentence() -> None:
    ids = [f"{RUN}:producer-0:{n}" for n in range(12, 73)]
    assert views.values_text(ids) == "61 values, e.g. producer-0:12, producer-0:13, producer-0:14 …"
    assert views.values_text(ids[:2]) == "2 values: producer-0:12, producer-0:13"
    assert views.values_text([]) == "no value"
    assert (
        views.values_text(ids[:5], total=30)
        == "30 values, e.g. producer-0:12, producer-0:13, producer-0:14 …"
    )


# ---- the catalog holds no anchor by position ----------------------------------------------------------

LISTS: Final = re.compile(
    r"views\.(client_logs|faults|rebalances|probe_calls|deliveries|commits|outcomes|samples)\([^()]*\)"
    r"\s*\[\s*(0|-1|:\d+|-\d+:)\s*\]"
)


def test_no_scenario_anchors_a_moment_by_its_position_in_a_views_list() -> None:
    offenders: list[str] = []
    for path in sorted(SCENARIOS.glob("test_*.py")):
        text = path.read_text(encoding="utf-8")
        offenders += [f"{path.name}: {m.group(0)}" for m in LISTS.finditer(text)]
        tree = ast.parse(text)
        for node in ast.walk(tree):
            # a scenario note found by a piece of its text: a mark (views.mark) names the moment exactly
            if isinstance(node, ast.Compare) and any(isinstance(op, ast.In) for op in node.ops):
                source = ast.get_source_segment(text, node) or ""
                if "SIGKILL" in source:
                    offenders.append(f"{path.name}:{node.lineno}: {source}")
            if isinstance(node, ast.Call) and ast.get_source_segment(text, node.func) == "views.fault_window":
                arg = node.args[1] if len(node.args) > 1 else None
                if isinstance(arg, ast.Constant):
                    offenders.append(f"{path.name}:{node.lineno}: fault_window by kind {arg.value!r}")
    assert offenders == []
