"""Fault windows: a run's fault ``inject`` / ``heal`` events paired into windows.

The one place the pairing rule lives: the reference audit and the Spark job (availability per window), the
report (the timeline's shaded windows, log excerpts) and the scenario views (``views.fault_window``) all
call :func:`fault_windows`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar


class FaultMark(Protocol):
    """What pairing reads of a fault event: :class:`~chaos.history.FaultEvent` has it, and so does a row
    of the history table read by attribute (a Spark ``Row``)."""

    @property
    def action(self) -> str: ...

    @property
    def fault(self) -> str: ...

    @property
    def target(self) -> str: ...

    @property
    def params(self) -> str | None: ...


M = TypeVar("M", bound=FaultMark)


@dataclass(frozen=True, slots=True)
class FaultPair(Generic[M]):
    """One window: the event that injected the fault and the one that healed it (``None``: never healed)."""

    inject: M
    heal: M | None


def fault_seq(params: str | None) -> int | None:
    """The fault's ``seq`` in a fault event's ``params`` (JSON object text), or ``None`` when absent.

    :func:`chaos.scenario.runner.fault_event` writes the :class:`~chaos.faults.base.FaultLog` number of the
    fault object there, the same in its inject and its heal; histories from elsewhere may have none.
    """
    if not params:
        return None
    try:
        data = json.loads(params)
    except ValueError:
        return None
    seq = data.get("seq") if isinstance(data, dict) else None
    return seq if type(seq) is int else None


def fault_windows(events: Iterable[M]) -> list[FaultPair[M]]:
    """Pair fault events (one run's, in record order) into windows, one per ``inject``, in inject order.

    The rule: every ``inject`` opens a window. A ``heal`` closes every window still open that has the same
    ``fault`` and ``target`` and — when both the inject and the heal carry a ``seq`` in their ``params``
    (:func:`fault_seq`) — the same ``seq``. So with seqs each inject ends at the heal of its own fault
    object; without them (or against an event that has none), at the first later heal of the same fault and
    target, several open injects sharing that heal. A heal closes its windows even when the heal itself
    failed (its ``error`` says so); a heal that matches no open window is ignored; a window no heal closes
    has ``heal`` ``None``. Only order matters, never clocks: pass the events in record order (the history's
    ``index``). Events whose ``action`` is neither inject nor heal are skipped.
    """
    pairs: list[FaultPair[M]] = []
    open_: list[tuple[int, int | None]] = []  # (index in pairs, seq) of the windows still open
    for event in events:
        if event.action == "inject":
            open_.append((len(pairs), fault_seq(event.params)))
            pairs.append(FaultPair(event, None))
        elif event.action == "heal":
            seq = fault_seq(event.params)
            still_open = []
            for index, inject_seq in open_:
                inject = pairs[index].inject
                if (
                    inject.fault == event.fault
                    and inject.target == event.target
                    and (seq is None or inject_seq is None or seq == inject_seq)
                ):
                    pairs[index] = FaultPair(inject, event)
                else:
                    still_open.append((index, inject_seq))
            open_ = still_open
    return pairs
