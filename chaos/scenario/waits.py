"""The bounded waits a scenario composes its timeline with: on the run's recorded events (a condition over
the history so far) or on the cluster (an introspection question). Every wait has a timeout of at most
:data:`MAX_WAIT_S` and fails with an AssertionError that names what did not happen."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final

from chaos.run.events import Delivery, Event, Isolation, SendInvoke, SendOutcome, TxnMarker
from chaos.scenario.model import ScenarioError

MAX_WAIT_S: Final = 300.0

Condition = Callable[[list[Event]], bool]
Targets = Callable[[float], Mapping[int, int]]
"""``targets(timeout_s)``: per partition, the last offset the group can read (none: nothing to wait for)."""


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


def reached(topic: str, targets: Mapping[int, int]) -> Condition:
    """True once deliveries of ``topic`` reached, in every partition of ``targets``, its target offset (the
    last record the group can read there: :func:`chaos.workload.tail.last_data_offsets`)."""

    def caught_up(events: list[Event]) -> bool:
        last: dict[int, int] = {}
        for e in events:
            if isinstance(e, Delivery) and e.topic == topic:
                last[e.partition] = max(last.get(e.partition, -1), e.offset)
        return all(last.get(p, -1) >= target for p, target in targets.items())

    return caught_up


def group_isolation(topic: str, events: Sequence[Event], configured: Iterable[str]) -> Isolation:
    """The isolation level a caught-up wait takes for the group reading ``topic``: read_uncommitted only
    when every level in ``configured`` (its members' ``isolation.level``) is read_uncommitted and no
    transactional worker (whose consumer reads read_committed: it recorded a :class:`TxnMarker`) delivered
    from ``topic``; otherwise read_committed.

    read_committed is the level that lets the wait end: its target offset is never above
    read_uncommitted's (aborted records and an open transaction's lie above the LSO or are skipped), and a
    read_committed member never delivers what only read_uncommitted sees. On a topic with no transactional
    writer both levels give the same target, so an unknown level (nothing ``configured``, or librdkafka's
    default, read_committed) costs nothing there."""
    levels = set(configured)
    transactional = {e.process for e in events if isinstance(e, TxnMarker)}
    if any(isinstance(e, Delivery) and e.topic == topic and e.process in transactional for e in events):
        levels.add("read_committed")
    return "read_uncommitted" if levels == {"read_uncommitted"} else "read_committed"


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
    targets: Targets,
) -> float:
    """Wait until the group has delivered, in every partition of ``topic``, the last record it can read;
    returns the seconds it took (AssertionError on timeout).

    ``end_offsets()``: the high watermarks. ``targets(timeout_s)``: per partition, the greatest offset below
    the end at the group's isolation level that holds a record the group can read (partitions with none
    left out: nothing to wait for) — :func:`chaos.workload.tail.last_data_offsets`; on a transactional
    topic the end − 1 is a commit or abort marker, never delivered. Its errors count as "not yet" until the
    budget is spent.

    The targets are read once the high watermarks cover every acknowledged record (an ``acks=1`` leader
    acknowledges before its followers fetch: make chaos run c1 read L2's end offsets one record short and
    stopped the group before the last two) — or after at most a third of ``timeout_s``, since a tail the
    leader acknowledged and then lost never gets there."""
    _check_timeout("wait_caught_up", topic, timeout_s)
    started = time.monotonic()
    acked = acked_ends(topic, events())

    def covered() -> bool:
        ends = end_offsets()
        return all(ends.get(p, 0) >= end for p, end in acked.items())

    with contextlib.suppress(AssertionError):
        wait_until("the high watermarks cover every acknowledged record", covered, timeout_s / 3)
    found: dict[int, int] = {}

    def read_targets() -> bool:
        found.update(targets(max(timeout_s - (time.monotonic() - started), 1.0)))
        return True

    left = max(timeout_s - (time.monotonic() - started), 1.0)
    wait_until(f"the last offsets the group can read in {topic}", read_targets, left)
    left = max(timeout_s - (time.monotonic() - started), 1.0)
    wait_for_events(
        f"the group reached the last offsets it can read {found}", events, reached(topic, found), left
    )
    return time.monotonic() - started
