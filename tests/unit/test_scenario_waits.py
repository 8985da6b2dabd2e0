"""``waits.caught_up``: the end offsets are read once the high watermarks cover every acknowledged record,
so a group is not stopped before the tail an ``acks=1`` leader acknowledged ahead of its followers."""

from __future__ import annotations

import itertools
import threading
import time

import pytest

from chaos.run.events import Delivery, Event, SendInvoke, SendOutcome
from chaos.scenario import waits

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


def delivered(seq: int, partition: int, offset: int) -> Delivery:
    return Delivery(
        run_id=RUN,
        process="consumer-0",
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


def test_acked_ends_are_one_past_the_highest_acknowledged_offset_of_the_topic() -> None:
    events = sent(0, 0, 0) + sent(1, 0, 1) + sent(2, 1, 0) + sent(3, 0, 7, topic="other")
    assert waits.acked_ends(TOPIC, events) == {0: 2, 1: 1}


def test_the_end_offsets_are_read_after_the_high_watermark_covers_the_acks() -> None:
    """The high watermark lags the acks by one record for 0.5 s; the group reads the last record 0.3 s
    after that. Reading the end offsets at once (the old wait) would have returned before it was read."""
    events: list[Event] = sent(0, 0, 0) + sent(1, 0, 1) + [delivered(0, 0, 0)]
    lock = threading.Lock()
    started = time.monotonic()

    def end_offsets() -> dict[int, int]:
        return {0: 2 if time.monotonic() - started > 0.5 else 1}

    def snapshot() -> list[Event]:
        with lock:
            return list(events)

    def consume_late() -> None:
        time.sleep(0.8)
        with lock:
            events.append(delivered(1, 0, 1))

    reader = threading.Thread(target=consume_late)
    reader.start()
    took = waits.caught_up(TOPIC, snapshot, end_offsets, timeout_s=10)
    reader.join()
    assert took >= 0.8
    assert any(isinstance(e, Delivery) and e.offset == 1 for e in snapshot())


def test_a_lost_acknowledged_tail_bounds_the_high_watermark_wait() -> None:
    """Offset 5 was acknowledged and lost with its leader: the high watermark never reaches 6. The wait
    gives the watermark a third of its budget, then waits for the group on the offsets there are."""
    events = sent(0, 0, 0) + sent(1, 0, 5) + [delivered(0, 0, 0)]
    took = waits.caught_up(TOPIC, lambda: events, lambda: {0: 1}, timeout_s=3)
    assert 0.9 <= took < 2.5


def test_a_group_that_never_reaches_the_end_fails_the_wait() -> None:
    events = sent(0, 0, 0) + sent(1, 0, 1) + [delivered(0, 0, 0)]
    with pytest.raises(AssertionError, match="the group reached the end offsets"):
        waits.caught_up(TOPIC, lambda: events, lambda: {0: 2}, timeout_s=1.5)
