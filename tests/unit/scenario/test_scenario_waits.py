"""The "caught up" wait: ``waits.caught_up`` reads its targets once the high watermarks cover every
acknowledged record (so a group is not stopped before the tail an ``acks=1`` leader acknowledged ahead of its
followers), and the targets are the last records the group can read — on a transactional topic not end − 1,
which is a commit or abort marker (``chaos.workload.tail``), checked here on synthetic logs of markers and
aborts. It reads them only while the brokers agree on the leaders, reads them again once the group
reached them, and ends — saying what expired — when retention or DeleteRecords removed a target."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import pytest

from chaos.errors import ConfigError
from chaos.run.events import Delivery, Event, Isolation, SendInvoke, SendOutcome, TxnMarker
from chaos.scenario import waits
from chaos.workload import tail

RUN = "r1"
TOPIC = "t-r1"
_clock = itertools.count(1)


def _now() -> float:
    return float(next(_clock))


def sent(seq: int, partition: int, offset: int, topic: str = TOPIC) -> list[Event]:
    vid = f"{RUN}:producer-0:{seq}"
    return [
        SendInvoke(
            run_id=RUN,
            process="producer-0",
            value_id=vid,
            producer="producer-0",
            seq=seq,
            topic=topic,
            ts=1.8e9 + (n := _now()),
            mono=n,
        ),
        SendOutcome(
            run_id=RUN,
            process="producer-0",
            value_id=vid,
            outcome="ok",
            partition=partition,
            offset=offset,
            ts=1.8e9 + (n := _now()),
            mono=n,
        ),
    ]


def delivered(seq: int, partition: int, offset: int, process: str = "consumer-0") -> Delivery:
    return Delivery(
        run_id=RUN,
        process=process,
        group="g",
        topic=TOPIC,
        partition=partition,
        offset=offset,
        value_id=f"{RUN}:producer-0:{seq}",
        member="m1",
        generation=1,
        ts=1.8e9 + (n := _now()),
        mono=n,
    )


Kind = Literal["data", "aborted", "open", "marker"]


@dataclass
class Log:
    """One partition's log as a broker holds it: per offset a committed (or non-transactional) record, a
    record of an aborted or of a still open transaction, or a commit/abort marker (a control record)."""

    kinds: list[Kind]
    low: int = 0

    def end(self, isolation: Isolation) -> int:
        """The high watermark; under read_committed the LSO: the first offset of an open transaction."""
        lso = next((o for o, k in enumerate(self.kinds) if k == "open"), len(self.kinds))
        return lso if isolation == "read_committed" else len(self.kinds)

    def visible(self, offset: int, isolation: Isolation) -> bool:
        kind = self.kinds[offset]
        return kind == "data" or (isolation == "read_uncommitted" and kind in ("aborted", "open"))


def log(*runs: tuple[Kind, int]) -> Log:
    return Log([kind for kind, n in runs for _ in range(n)])


@dataclass
class Consumer:
    """A consumer at ``isolation`` on synthetic logs: the records it gets reading each window to its end."""

    logs: Mapping[int, Log]
    isolation: Isolation
    rounds: list[dict[int, tuple[int, int]]] = field(default_factory=list)

    def __call__(self, round_: dict[int, tuple[int, int]]) -> dict[int, list[int]]:
        self.rounds.append(dict(round_))
        return {
            p: [
                o
                for o in range(max(start, self.logs[p].low), self.logs[p].end(self.isolation))
                if self.logs[p].visible(o, self.isolation)
            ]
            for p, (start, _) in round_.items()
        }


def targets(logs: Mapping[int, Log], isolation: Isolation) -> tuple[dict[int, int], Consumer]:
    consumer = Consumer(logs, isolation)
    bounds = {p: (lg.low, lg.end(isolation)) for p, lg in logs.items()}
    return tail.last_visible(bounds, consumer), consumer


# ---- the targets: the last record the group can read --------------------------------------------------


def test_windows_grow_from_the_end_down_to_the_low_watermark() -> None:
    assert tail.windows(0, 1000) == [(936, 1000), (424, 936), (0, 424)]
    assert tail.windows(10, 50) == [(10, 50)]
    assert tail.windows(5, 5) == []
    assert tail.windows(3, 1000, first=100, growth=2) == [(900, 1000), (700, 900), (300, 700), (3, 300)]
    with pytest.raises(ConfigError):
        tail.windows(0, 10, first=0)


def test_committed_transactions_end_with_a_marker_the_target_is_the_record_before() -> None:
    """Three committed transactions of 5 records: offsets 5, 11, 17 are commit markers; the high watermark
    18 and its end − 1 = 17 is a marker, which no consumer is ever given."""
    part = log(("data", 5), ("marker", 1), ("data", 5), ("marker", 1), ("data", 5), ("marker", 1))
    for isolation in ("read_committed", "read_uncommitted"):
        found, _ = targets({0: part}, isolation)
        assert found == {0: 16}
        assert part.end(isolation) - 1 == 17


def test_an_aborted_tail_is_read_only_under_read_uncommitted() -> None:
    part = log(("data", 10), ("marker", 1), ("aborted", 6), ("marker", 1))
    assert targets({0: part}, "read_committed")[0] == {0: 9}
    assert targets({0: part}, "read_uncommitted")[0] == {0: 16}


def test_an_open_transaction_ends_read_committed_at_the_last_stable_offset() -> None:
    """Committed data, then an open transaction of 4 records: the LSO is its first offset (11); a
    read_committed group reads up to offset 9 (10 is the commit marker), read_uncommitted to 14."""
    part = log(("data", 10), ("marker", 1), ("open", 4))
    assert part.end("read_committed") == 11
    assert targets({0: part}, "read_committed")[0] == {0: 9}
    assert targets({0: part}, "read_uncommitted")[0] == {0: 14}


def test_a_long_aborted_tail_widens_the_window_until_a_visible_record() -> None:
    """600 aborted records after the last committed one: the first window (64) and the next (512) hold
    none under read_committed; the third finds offset 99. Partition 1 is found in the first round and
    not read again."""
    logs = {
        0: log(("data", 100), ("marker", 1), ("aborted", 600), ("marker", 1)),
        1: log(("data", 30), ("marker", 1)),
    }
    found, consumer = targets(logs, "read_committed")
    assert found == {0: 99, 1: 29}
    assert consumer.rounds == [{0: (638, 702), 1: (0, 31)}, {0: (126, 638)}, {0: (0, 126)}]


def test_a_partition_with_no_visible_record_has_no_target() -> None:
    logs = {
        0: log(("aborted", 200), ("marker", 1)),
        1: Log([]),
        2: log(("marker", 1), ("open", 3)),
        3: Log(["data", "data", "data", "marker"], low=3),  # the records below the low watermark are gone
    }
    found, consumer = targets(logs, "read_committed")
    assert found == {}
    assert all(2 not in r for r in consumer.rounds[1:])
    assert {p for r in consumer.rounds for p in r} == {0, 2, 3}, "an empty partition is not read at all"
    assert targets(logs, "read_uncommitted")[0] == {0: 199, 2: 3}


def test_records_the_reader_returns_outside_its_window_do_not_count() -> None:
    """A reader reads on past a window's stop (into newer windows, or records appended since the end was
    read): only offsets inside the window are its answer."""

    def read(round_: dict[int, tuple[int, int]]) -> dict[int, list[int]]:
        return {
            p: [start - 1, stop, stop + 5] + ([10] if start == 0 else [])
            for p, (start, stop) in round_.items()
        }

    assert tail.last_visible({0: (0, 100)}, read) == {0: 10}


# ---- which end: the group's isolation level --------------------------------------------------------------


def marker(process: str) -> TxnMarker:
    return TxnMarker(
        run_id=RUN, process=process, action="begin", transactional_id=f"chaos-{process}", outcome="ok"
    )


def test_the_group_reads_read_uncommitted_only_when_every_member_does() -> None:
    events: list[Event] = [delivered(0, 0, 0)]
    assert waits.group_isolation(TOPIC, events, ["read_uncommitted"]) == "read_uncommitted"
    assert waits.group_isolation(TOPIC, events, ["read_committed"]) == "read_committed"
    assert waits.group_isolation(TOPIC, events, ["read_uncommitted", "read_committed"]) == "read_committed"
    assert waits.group_isolation(TOPIC, events, []) == "read_committed", "unknown: the level that ends"


def test_a_transactional_worker_consuming_the_topic_makes_the_group_read_committed() -> None:
    worker = [marker("transformer-0"), delivered(0, 0, 0, process="transformer-0")]
    assert waits.group_isolation(TOPIC, worker, ["read_uncommitted"]) == "read_committed"
    # a worker that writes the topic (its deliveries are of its input) does not read it
    elsewhere = [marker("transformer-0"), delivered(0, 0, 0)]
    assert waits.group_isolation(TOPIC, elsewhere, ["read_uncommitted"]) == "read_uncommitted"


# ---- the reached condition -------------------------------------------------------------------------------


def test_a_read_committed_group_reaches_its_target_past_markers_and_aborted_records() -> None:
    """Partition 0: data 0-4, commit marker 5, aborted 6-8, abort marker 9 (high watermark 10); partition
    1: data 0-2, commit marker 3. The group was given 0-4 and 0-2: caught up, though end − 1 (9 and 3)
    never comes."""
    logs = {
        0: log(("data", 5), ("marker", 1), ("aborted", 3), ("marker", 1)),
        1: log(("data", 3), ("marker", 1)),
    }
    found, _ = targets(logs, "read_committed")
    events: list[Event] = [
        *(delivered(s, 0, s) for s in range(5)),
        *(delivered(10 + s, 1, s) for s in range(3)),
    ]
    assert waits.reached(TOPIC, found)(events)
    assert not waits.reached(TOPIC, found)(events[:4] + events[5:]), "offset 4 not delivered yet"
    assert not waits.reached(TOPIC, {0: 9, 1: 3})(events), "the old target, end - 1: never reached"


def test_a_partition_without_target_is_not_waited_for_and_other_topics_do_not_count() -> None:
    other = Delivery(
        run_id=RUN, process="consumer-0", group="g", topic="other", partition=1, offset=50, ts=1.8e9, mono=1.0
    )
    assert waits.reached(TOPIC, {})([])
    assert waits.reached(TOPIC, {0: 0})([delivered(0, 0, 0)])
    assert not waits.reached(TOPIC, {0: 0, 1: 5})([delivered(0, 0, 0), other])


# ---- the wait ---------------------------------------------------------------------------------------------


def test_acked_ends_are_one_past_the_highest_acknowledged_offset_of_the_topic() -> None:
    events = sent(0, 0, 0) + sent(1, 0, 1) + sent(2, 1, 0) + sent(3, 0, 7, topic="other")
    assert waits.acked_ends(TOPIC, events) == {0: 2, 1: 1}


def fixed(found: dict[int, int]) -> waits.Targets:
    return lambda _timeout: found


def test_the_targets_are_read_after_the_high_watermark_covers_the_acks() -> None:
    """The high watermark lags the acks by one record for 0.5 s; the group reads the last record 0.3 s
    after that. Reading the targets at once (the old wait) would have returned before it was read."""
    events: list[Event] = sent(0, 0, 0) + sent(1, 0, 1) + [delivered(0, 0, 0)]
    lock = threading.Lock()
    started = time.monotonic()

    def bounds() -> dict[int, tuple[int, int]]:
        return {0: (0, 2 if time.monotonic() - started > 0.5 else 1)}

    def last_offsets(_timeout: float) -> dict[int, int]:
        return {p: end - 1 for p, (_, end) in bounds().items()}

    def snapshot() -> list[Event]:
        with lock:
            return list(events)

    def consume_late() -> None:
        time.sleep(0.8)
        with lock:
            events.append(delivered(1, 0, 1))

    reader = threading.Thread(target=consume_late)
    reader.start()
    took = waits.caught_up(TOPIC, snapshot, bounds, timeout_s=10, targets=last_offsets)
    reader.join()
    assert took >= 0.8
    assert any(isinstance(e, Delivery) and e.offset == 1 for e in snapshot())


def test_a_lost_acknowledged_tail_bounds_the_high_watermark_wait() -> None:
    """Offset 5 was acknowledged and lost with its leader: the high watermark never reaches 6. The wait
    gives the watermark a third of its budget, then waits for the group on the offsets there are."""
    events = sent(0, 0, 0) + sent(1, 0, 5) + [delivered(0, 0, 0)]
    took = waits.caught_up(TOPIC, lambda: events, lambda: {0: (0, 1)}, timeout_s=3, targets=fixed({0: 0}))
    assert 0.9 <= took < 2.5


def test_a_group_that_never_reaches_its_target_fails_the_wait() -> None:
    events = sent(0, 0, 0) + sent(1, 0, 1) + [delivered(0, 0, 0)]
    with pytest.raises(AssertionError, match=r"the group reached the last offsets it can read \{0: 1\}"):
        waits.caught_up(TOPIC, lambda: events, lambda: {0: (0, 2)}, timeout_s=1.5, targets=fixed({0: 1}))


def test_on_a_transactional_topic_the_wait_returns_once_the_last_committed_record_is_delivered() -> None:
    """A read_committed group on a topic whose tail is an aborted transaction and its marker
    delivered every committed record; the wait returns at once (the old one, on end − 1, never did)."""
    part = log(("data", 8), ("marker", 1), ("aborted", 4), ("marker", 1))
    events: list[Event] = [delivered(s, 0, s) for s in range(8)]
    calls: list[float] = []

    def last_offsets(timeout: float) -> dict[int, int]:
        calls.append(timeout)
        return targets({0: part}, "read_committed")[0]

    took = waits.caught_up(
        TOPIC,
        lambda: events,
        lambda: {0: (0, part.end("read_uncommitted"))},
        timeout_s=10,
        targets=last_offsets,
    )
    assert took < 5.0  # at once, not after the 10-s budget
    assert len(calls) == 2, "read, then read again once the group reached them"
    assert 8 < calls[0] <= 10, "the targets get what is left of the budget"


def test_errors_reading_the_targets_are_retried_within_the_budget() -> None:
    events: list[Event] = [delivered(0, 0, 3)]
    attempts: list[int] = []

    def flaky(_timeout: float) -> dict[int, int]:
        attempts.append(1)
        if len(attempts) < 3:
            raise RuntimeError("NOT_LEADER_OR_FOLLOWER")
        return {0: 3}

    took = waits.caught_up(TOPIC, lambda: events, lambda: {0: (0, 4)}, timeout_s=5, targets=flaky)
    assert len(attempts) == 4, "two failures, a read, the read that confirms it"
    assert took < 2.0

    def broken(_timeout: float) -> dict[int, int]:
        raise RuntimeError("the broker is cut")

    with pytest.raises(
        AssertionError, match=r"the last offsets the group can read in t-r1.*the broker is cut"
    ):
        waits.caught_up(TOPIC, lambda: events, lambda: {0: (0, 4)}, timeout_s=1.5, targets=broken)


def test_the_targets_are_read_once_the_brokers_agree_on_the_leaders() -> None:
    """L1 fire-and-forget (acks=0: no acknowledged offset to wait for): right after the heal the cut
    leader still answers as leader, with its old high watermark — p0's target 28 — while the new leader
    holds offset 29, which the group delivers 0.6 s later. The wait reads its targets only once the brokers
    agree, so it waits for 29 (read at once, it returned with 29 unread)."""
    events: list[Event] = [delivered(s, 0, s) for s in range(29)]
    lock = threading.Lock()
    started = time.monotonic()

    def settled() -> bool:
        return time.monotonic() - started > 0.4

    def last_offsets(_timeout: float) -> dict[int, int]:
        return {0: 29 if settled() else 28}

    def snapshot() -> list[Event]:
        with lock:
            return list(events)

    def consume_late() -> None:
        time.sleep(0.6)
        with lock:
            events.append(delivered(29, 0, 29))

    reader = threading.Thread(target=consume_late)
    reader.start()
    took = waits.caught_up(TOPIC, snapshot, lambda: {0: (0, 30)}, 10, last_offsets, settled=settled)
    reader.join()
    assert took >= 0.6
    assert not took.expired


def test_a_target_that_moves_after_the_group_reached_it_is_waited_for() -> None:
    """The first read finds 28 (the high watermark not yet past 29), the read that confirms it 29: the wait
    returns only once the group delivered 29."""
    events: list[Event] = [delivered(s, 0, s) for s in range(29)]
    lock = threading.Lock()
    reads: list[int] = []

    def last_offsets(_timeout: float) -> dict[int, int]:
        reads.append(28 if not reads else 29)
        return {0: reads[-1]}

    def snapshot() -> list[Event]:
        with lock:
            return list(events)

    def consume_late() -> None:
        time.sleep(0.5)
        with lock:
            events.append(delivered(29, 0, 29))

    reader = threading.Thread(target=consume_late)
    reader.start()
    took = waits.caught_up(TOPIC, snapshot, lambda: {0: (0, 30)}, 10, last_offsets)
    reader.join()
    assert took >= 0.5
    assert reads == [28, 29, 29]


def test_a_target_removed_by_retention_ends_the_wait_with_what_expired() -> None:
    """The group read p0 up to 79 and stopped; retention removes every record of p0 (log start 151, the
    end). Its target 150 can never be delivered: the wait reads its targets again (none left in p0),
    returns, and says what expired instead of timing out."""
    events: list[Event] = [*(delivered(s, 0, s) for s in range(80)), delivered(900, 1, 0)]
    started = time.monotonic()

    def removed() -> bool:
        return time.monotonic() - started > 0.3

    def bounds() -> dict[int, tuple[int, int]]:
        return {0: (151, 151) if removed() else (0, 151), 1: (0, 1)}

    def last_offsets(_timeout: float) -> dict[int, int]:
        return {1: 0} if removed() else {0: 150, 1: 0}

    took = waits.caught_up(TOPIC, lambda: events, bounds, 10, last_offsets, poll_s=0.1)
    assert 0.3 <= took < 2.0
    assert took.expired == (waits.Expired(0, log_start=151, next_offset=80, target=150),)
    assert "p0: log start 151 above the group's next offset 80, past the target 150" in (
        took.expired[0].describe()
    )


def test_records_removed_below_the_target_are_reported_and_the_group_waited_for() -> None:
    """DeleteRecords moved p0's log start to 100, above the group's next offset 80 but below the target:
    the group (auto.offset.reset=earliest) jumps to 100 and reads on to the target; the wait returns then,
    with p0 named as expired (no target passed)."""
    events: list[Event] = [delivered(s, 0, s) for s in range(80)]
    lock = threading.Lock()

    def snapshot() -> list[Event]:
        with lock:
            return list(events)

    def reset_and_read() -> None:
        time.sleep(0.4)
        with lock:
            events.extend(delivered(s, 0, s) for s in range(100, 120))

    reader = threading.Thread(target=reset_and_read)
    reader.start()
    took = waits.caught_up(TOPIC, snapshot, lambda: {0: (100, 120)}, 10, fixed({0: 119}), poll_s=0.1)
    reader.join()
    assert took >= 0.4
    assert took.expired == (waits.Expired(0, log_start=100, next_offset=80, target=None),)


def test_the_result_is_the_seconds_as_a_float() -> None:
    result = waits.CaughtUp(1.5, [waits.Expired(2, 10, 0), waits.Expired(1, 5, 0)])
    assert result == 1.5
    assert result + 1 == 2.5
    assert [e.partition for e in result.expired] == [1, 2]


def test_targets_that_keep_moving_end_the_wait_at_its_budget() -> None:
    """A producer still running: every read finds a new last offset, which the group delivers 0.1 s later.
    The wait gives up at its budget instead of chasing the topic for ever."""
    last: list[tuple[int, float]] = [(0, 0.0)]

    def moving(_timeout: float) -> dict[int, int]:
        last.append((last[-1][0] + 1, time.monotonic()))
        return {0: last[-1][0]}

    def snapshot() -> list[Event]:
        target, at = last[-1]
        return [delivered(0, 0, target if time.monotonic() - at > 0.1 else target - 1)]

    started = time.monotonic()
    with pytest.raises(AssertionError, match=r"they still moved after 1 s"):
        waits.caught_up(TOPIC, snapshot, lambda: {0: (0, 1)}, 1.0, moving)
    assert time.monotonic() - started < 3.0
    assert len(last) > 5
