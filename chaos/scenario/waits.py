"""The bounded waits a scenario composes its timeline with: on the run's recorded events (a condition over
the history so far) or on the cluster (an introspection question). Every wait has a timeout of at most
:data:`MAX_WAIT_S` and fails with an AssertionError that names what did not happen."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
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


Bounds = Callable[[], Mapping[int, tuple[int, int]]]
"""``bounds()``: per partition, ``(log start offset, high watermark)`` read now."""


@dataclass(frozen=True)
class Expired:
    """A partition whose records the group had not read were removed (retention, ``DeleteRecords``), as a
    caught-up wait saw it: the log start offset ``log_start`` above the group's next offset
    ``next_offset`` (one past its last delivery there; 0 for none). ``target``: the offset the wait was
    waiting for when the log start moved past it (the wait then read its targets again), else None."""

    partition: int
    log_start: int
    next_offset: int
    target: int | None = None

    def describe(self) -> str:
        passed = f", past the target {self.target}" if self.target is not None else ""
        return (
            f"p{self.partition}: log start {self.log_start} above the group's next offset "
            f"{self.next_offset}{passed}"
        )


class CaughtUp(float):
    """The seconds a caught-up wait took (a float), with the partitions whose unread records it saw
    removed (``expired``, by partition)."""

    expired: tuple[Expired, ...]

    def __new__(cls, seconds: float, expired: Iterable[Expired] = ()) -> CaughtUp:
        made = super().__new__(cls, seconds)
        made.expired = tuple(sorted(expired, key=lambda e: e.partition))
        return made


def next_offsets(topic: str, events: Iterable[Event]) -> dict[int, int]:
    """Per partition of ``topic``, one past the highest offset any member delivered."""
    nexts: dict[int, int] = {}
    for e in events:
        if isinstance(e, Delivery) and e.topic == topic:
            nexts[e.partition] = max(nexts.get(e.partition, 0), e.offset + 1)
    return nexts


class _Expiries:
    """What a caught-up wait saw removed before the group read it (:class:`Expired`, by partition)."""

    def __init__(self, topic: str, events: Callable[[], list[Event]], bounds: Bounds) -> None:
        self.topic = topic
        self.events = events
        self.bounds = bounds
        self.seen: dict[int, Expired] = {}

    def check(self, found: Mapping[int, int]) -> bool:
        """Read the log start offsets and record what expired; whether one moved past a target of
        ``found`` the group had not reached (it can then never deliver it). A failed read: False."""
        try:
            now = self.bounds()
        except Exception:  # a broker that does not answer: the next poll asks again
            return False
        nexts = next_offsets(self.topic, self.events())
        gone = False
        for p, (low, _end) in sorted(now.items()):
            next_offset = nexts.get(p, 0)
            if low <= next_offset:
                continue
            target = found.get(p)
            if target is not None and next_offset <= target < low:
                gone = True
            else:
                earlier = self.seen.get(p)
                target = earlier.target if earlier is not None else None
            self.seen[p] = Expired(p, low, next_offset, target)
        return gone


def _reach(
    topic: str,
    events: Callable[[], list[Event]],
    found: Mapping[int, int],
    expiries: _Expiries,
    timeout_s: float,
    poll_s: float,
) -> bool:
    """Wait until the group delivered ``found`` (True), or a target of it expired (False: read again)."""
    polled = time.monotonic()
    expired = False

    def done(evs: list[Event]) -> bool:
        nonlocal polled, expired
        if reached(topic, found)(evs):
            return True
        if time.monotonic() - polled >= poll_s:
            polled = time.monotonic()
            expired = expiries.check(found)
        return expired

    wait_for_events(f"the group reached the last offsets it can read {dict(found)}", events, done, timeout_s)
    return not expired


def caught_up(
    topic: str,
    events: Callable[[], list[Event]],
    bounds: Bounds,
    timeout_s: float,
    targets: Targets,
    *,
    settled: Callable[[], bool] | None = None,
    poll_s: float = 1.0,
) -> CaughtUp:
    """Wait until the group has delivered, in every partition of ``topic``, the last record it can read;
    returns the seconds it took, with what expired meanwhile (AssertionError on timeout).

    ``bounds()``: the log start offsets and high watermarks. ``targets(timeout_s)``: per partition, the
    greatest offset below the end at the group's isolation level that holds a record the group can read
    (partitions with none left out: nothing to wait for) — :func:`chaos.workload.tail.last_data_offsets`;
    on a transactional topic the end − 1 is a commit or abort marker, never delivered. Its errors count as
    "not yet" until the budget is spent. ``settled()``: whether the cluster answers for the topic with one
    voice (the runner's: every broker names the same leaders).

    - The targets are read once the high watermarks cover every acknowledged record (an ``acks=1`` leader
      acknowledges before its followers fetch: make chaos run c1 read L2's end offsets one record short and
      stopped the group before the last two) — or after at most a third of ``timeout_s``, since a tail the
      leader acknowledged and then lost never gets there. ``acks=0`` acknowledges no offset: this says
      nothing there.
    - Every read of the targets first waits, within that same third, for ``settled()``: a broker back from
      a cut answers for a while as the leader it no longer is, with its old high watermark. An L1 run read
      p1's target (28) right after the heal of the cut leader, which had appended offset 29 just before
      the cut and never learnt that its followers had it; the new leader had 29 committed, the group
      had reached 28, the wait returned, and the drain found 29 unread.
    - Once the group reached the targets they are read again: the wait returns when the group has reached
      a read taken after it reached the one before (a high watermark can still move after a read: a new
      leader's waits for its followers' next fetch).
    - While the group has not reached them, the log start offsets are read every ``poll_s``: a partition
      whose log start passed the group's next offset lost records the group had not read (retention,
      DeleteRecords: :class:`Expired`, in the result); one whose log start passed the target, which the
      group then never delivers, makes the wait read its targets again (a partition left with no record
      drops out) instead of timing out."""
    _check_timeout("wait_caught_up", topic, timeout_s)
    started = time.monotonic()
    deadline = started + timeout_s
    settle_by = started + timeout_s / 3
    acked = acked_ends(topic, events())

    def left() -> float:
        return max(deadline - time.monotonic(), 1.0)

    def covered() -> bool:
        ends = bounds()
        return all(ends.get(p, (0, 0))[1] >= end for p, end in acked.items())

    with contextlib.suppress(AssertionError):
        wait_until("the high watermarks cover every acknowledged record", covered, timeout_s / 3)

    def read() -> dict[int, int]:
        if settled is not None and time.monotonic() < settle_by:
            with contextlib.suppress(AssertionError):
                wait_until(f"the brokers agree on {topic}'s leaders", settled, settle_by - time.monotonic())
        found: dict[int, int] = {}

        def read_targets() -> bool:
            found.clear()
            found.update(targets(left()))
            return True

        wait_until(f"the last offsets the group can read in {topic}", read_targets, left())
        return found

    expiries = _Expiries(topic, events, bounds)
    found = read()
    while True:
        if time.monotonic() > deadline:  # targets that keep moving: a producer still running
            raise AssertionError(
                f"the group reached the last offsets it can read in {topic}: they still moved after "
                f"{timeout_s:.0f} s (last read {found}; stop the producers before waiting)"
            )
        if not _reach(topic, events, found, expiries, left(), poll_s):
            found = read()
            continue
        again = read()
        if reached(topic, again)(events()):
            expiries.check(again)
            return CaughtUp(time.monotonic() - started, expiries.seen.values())
        found = again
