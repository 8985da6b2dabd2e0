"""The bounded waits a scenario composes its timeline with: on the run's recorded events (a condition over
the history so far) or on the cluster (an introspection question). Every wait has a timeout of at most
:data:`MAX_WAIT_S` and fails with an AssertionError that names what did not happen."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Final

from chaos.run.events import Delivery, Event, SendInvoke, SendOutcome
from chaos.scenario.model import ScenarioError

MAX_WAIT_S: Final = 300.0

Condition = Callable[[list[Event]], bool]


def _check_timeout(method: str, what: str, timeout_s: float) -> None:
    if not 0 < timeout_s <= MAX_WAIT_S:
        raise ScenarioError(f"{method}({what!r}): timeout_s must be in (0, {MAX_WAIT_S}]")


def wait_for_events(
    what: str,
    snapshot: Callable[[], list[Event]],
    condition: Condition,
    timeout_s: float,
    interval_s: float = 0.1,
) -> float:
    """Poll ``condition(snapshot())`` until true; the seconds it took (AssertionError on timeout)."""
    _check_timeout("wait_for", what, timeout_s)
    started = time.monotonic()
    while True:
        if condition(snapshot()):
            return time.monotonic() - started
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"{what}: not within {timeout_s:.0f} s")
        time.sleep(interval_s)


def quiet_for(select: Callable[[Event], bool], quiet_s: float, since: float) -> Condition:
    """True once no event matching ``select`` was recorded for ``quiet_s`` (counted from ``since``, a
    monotonic time, while there is none)."""

    def quiet(events: list[Event]) -> bool:
        last = max((e.mono for e in events if select(e)), default=since)
        return time.monotonic() - last >= quiet_s

    return quiet


def acked_ends(topic: str, events: list[Event]) -> dict[int, int]:
    """Per partition of ``topic``, one past the highest offset an acknowledgement named: the end offset
    the high watermark reaches once the followers have every acknowledged record (with ``acks=1`` the
    leader acknowledges before they fetch)."""
    topics = {e.value_id: e.topic for e in events if isinstance(e, SendInvoke)}
    ends: dict[int, int] = {}
    for e in events:
        if (
            isinstance(e, SendOutcome)
            and e.outcome == "ok"
            and e.partition is not None
            and e.offset is not None
            and topics.get(e.value_id) == topic
        ):
            ends[e.partition] = max(ends.get(e.partition, 0), e.offset + 1)
    return ends


def reached(topic: str, ends: dict[int, int]) -> Condition:
    """True once deliveries of ``topic`` reached, in every partition, the record before its end offset."""

    def caught_up(events: list[Event]) -> bool:
        last: dict[int, int] = {}
        for e in events:
            if isinstance(e, Delivery) and e.topic == topic:
                last[e.partition] = max(last.get(e.partition, -1), e.offset)
        return all(last.get(p, -1) >= end - 1 for p, end in ends.items())

    return caught_up


def wait_until(what: str, condition: Callable[[], bool], timeout_s: float, interval_s: float = 0.2) -> float:
    """Poll a cluster-side ``condition()`` until true, errors counting as false; the seconds it took."""
    _check_timeout("wait_until", what, timeout_s)
    started = time.monotonic()
    last = ""
    while time.monotonic() - started <= timeout_s:
        try:
            if condition():
                return time.monotonic() - started
        except Exception as exc:  # a broker that does not answer yet: keep polling
            last = f" (last error: {exc})"
        time.sleep(interval_s)
    raise AssertionError(f"{what}: not within {timeout_s:.0f} s{last}")


def caught_up(
    topic: str,
    events: Callable[[], list[Event]],
    end_offsets: Callable[[], dict[int, int]],
    timeout_s: float,
) -> float:
    """Wait until the group has delivered, in every partition of ``topic``, the record before the end
    offset; returns the seconds it took (AssertionError on timeout).

    The end offsets are read once the high watermarks cover every acknowledged record (an ``acks=1``
    leader acknowledges before its followers fetch: make chaos run c1 read L2's end offsets one record
    short and stopped the group before the last two) — or after at most a third of ``timeout_s``, since a
    tail the leader acknowledged and then lost never gets there."""
    started = time.monotonic()
    acked = acked_ends(topic, events())

    def covered() -> bool:
        ends = end_offsets()
        return all(ends.get(p, 0) >= end for p, end in acked.items())

    with contextlib.suppress(AssertionError):
        wait_until("the high watermarks cover every acknowledged record", covered, timeout_s / 3)
    ends = {p: end for p, end in end_offsets().items() if end > 0}
    left = max(timeout_s - (time.monotonic() - started), 1.0)
    wait_for_events(f"the group reached the end offsets {ends}", events, reached(topic, ends), left)
    return time.monotonic() - started
