"""max.poll.interval.ms mechanics in librdkafka (docs/catalog.md MPI1; MPI2 / D8), through Toxiproxy.

The interval is shortened to its floor: librdkafka requires ``max.poll.interval.ms >= session.timeout.ms``
and the broker's ``group.min.session.timeout.ms`` (6 s) bounds the session timeout, so both are 6 s.
docs/max-poll-interval.md records what they found.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from chaos.cluster.cluster import KafkaCluster
from chaos.history import (
    ClientLog,
    ClusterSample,
    Commit,
    Delivery,
    Event,
    Rebalance,
    Recorder,
    read_events,
)
from chaos.workload import (
    IDEMPOTENT,
    ClusterSampler,
    MemberSpec,
    Processing,
    ProducerSpec,
    ProducerWorker,
    RunContext,
    ThreadMember,
)

pytestmark = pytest.mark.integration

INTERVAL_MS = 6_000
SHORT = {
    "session.timeout.ms": INTERVAL_MS,
    "heartbeat.interval.ms": 1_000,
    "max.poll.interval.ms": INTERVAL_MS,
}


class Watch:
    """Records into the history and keeps the events in memory so the test can wait on them."""

    def __init__(self, history: Recorder) -> None:
        self.history = history
        self.events: list[Event] = []
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        self.history.record(event)
        with self._lock:
            self.events.append(event)

    def wait(self, what: str, condition: Callable[[list[Event]], bool], timeout_s: float) -> float:
        started = time.monotonic()
        while time.monotonic() - started < timeout_s:
            with self._lock:
                snapshot = list(self.events)
            if condition(snapshot):
                return time.monotonic() - started
            time.sleep(0.1)
        raise AssertionError(f"{what}: not within {timeout_s} s")


def context(kafka_cluster: KafkaCluster, run_id: str, sink: Watch) -> RunContext:
    """The run's topic ``t-<run id>`` and group ``g-<run id>``, the idempotent profile, ``sink``."""
    bootstrap = kafka_cluster.bootstrap_servers
    return RunContext(run_id, bootstrap, f"t-{run_id}", f"g-{run_id}", IDEMPOTENT, sink)


def member(name: str, processing: Processing) -> MemberSpec:
    return MemberSpec(
        name=name,
        strategy="commit_after",
        processing=processing,
        batch_size=50,
        duration_s=120.0,
        overrides=tuple(SHORT.items()),
    )


def produce(context: RunContext, count: int) -> None:
    spec = ProducerSpec(name="producer-0", rate=None, count=count, duration_s=30.0)
    stats = ProducerWorker(context, spec).start().join()
    assert stats.ok == count


def delivered(events: list[Event], process: str) -> list[Delivery]:
    return [e for e in events if isinstance(e, Delivery) and e.process == process]


def test_processing_above_the_interval_leaves_the_group_and_redelivers(
    kafka_cluster: KafkaCluster, run_dir: Path
) -> None:
    run_id = f"mp-{uuid.uuid4().hex[:8]}"
    kafka_cluster.create_topic(f"t-{run_id}", partitions=2, replication_factor=3)
    with Recorder(run_dir / run_id, run_id) as history:
        watch = Watch(history)
        ctx = context(kafka_cluster, run_id, watch)
        produce(ctx, 200)
        slow = ThreadMember(
            ctx,
            member(
                "consumer-slow",
                Processing(per_batch_s=1.5 * INTERVAL_MS / 1000),
            ),
        )
        fast = ThreadMember(ctx, member("consumer-fast", Processing()))
        try:
            slow.start()
            # The slow member joins alone, takes both partitions and sits on its first batch for 9 s.
            watch.wait("first batch of the slow member", lambda ev: bool(delivered(ev, "consumer-slow")), 30)
            fast.start()
            first = {d.value_id for d in delivered(watch.events, "consumer-slow")}
            watch.wait(
                "redelivery of the slow member's batch to the fast one",
                lambda ev: first <= {d.value_id for d in delivered(ev, "consumer-fast")},
                40,
            )
            watch.wait(
                "_MAX_POLL_EXCEEDED at the slow member",
                lambda ev: any(
                    isinstance(e, ClientLog)
                    and e.error == "_MAX_POLL_EXCEEDED"
                    and e.process == "consumer-slow"
                    for e in ev
                ),
                30,
            )
        finally:
            fast.stop()
            slow.stop()
    events = read_events(run_dir / run_id)

    slow_batch = delivered(events, "consumer-slow")[: len(first)]
    batch_end = slow_batch[-1].mono
    maxpoll = [e for e in events if isinstance(e, ClientLog) and e.error == "_MAX_POLL_EXCEEDED"]
    assert {e.process for e in maxpoll} == {"consumer-slow"}
    assert maxpoll[0].facility == "CONSUME"
    slow_rebalances = [
        e for e in events if isinstance(e, Rebalance) and e.process == "consumer-slow" and e.mono > batch_end
    ]
    taken = [r for r in slow_rebalances if r.action in ("revoke", "lost") and r.partitions]
    assert taken, f"no revoke/lost of the slow member's partitions: {slow_rebalances}"
    fast_assigns = [
        e
        for e in events
        if isinstance(e, Rebalance) and e.process == "consumer-fast" and e.action == "assign"
    ]
    took_over = next(a for a in fast_assigns if {p.partition for p in a.partitions} == {0, 1})
    redelivered = [d for d in delivered(events, "consumer-fast") if d.value_id in first]
    assert {d.value_id for d in redelivered} == first, "the slow member's batch was not redelivered"
    assert min(d.mono for d in redelivered) > batch_end
    slow_commits = [e for e in events if isinstance(e, Commit) and e.process == "consumer-slow"]
    log_lines = [e for e in events if isinstance(e, ClientLog) and e.facility == "MAXPOLL"]

    takeover_s = took_over.mono - batch_end
    print(
        f"\nslow member: batch of {len(first)} delivered (generation {slow_batch[0].generation}), then "
        f"{1.5 * INTERVAL_MS / 1000:.0f} s of processing; fast member assigned both partitions "
        f"{takeover_s:.1f} s after the batch (generation {took_over.generation}); "
        f"_MAX_POLL_EXCEEDED returned to the slow member at +{maxpoll[0].mono - batch_end:.1f} s "
        f"({maxpoll[0].message!r}); slow member's {[r.action for r in slow_rebalances]} at "
        f"{[round(r.mono - batch_end, 1) for r in slow_rebalances]} s; its commits "
        f"{[(c.outcome, c.error, round(c.mono - batch_end, 1)) for c in slow_commits]}; MAXPOLL log lines "
        f"{[(round(e.mono - batch_end, 1), e.message[:90]) for e in log_lines]}"
    )
    # The client leaves on its own when the interval expires, not when the processing ends.
    assert INTERVAL_MS / 1000 - 1.0 <= takeover_s < 1.5 * INTERVAL_MS / 1000
    assert took_over.generation is not None
    assert slow_batch[0].generation is not None
    assert took_over.generation > slow_batch[0].generation
    assert not any(
        c.outcome == "ok" and c.mono > batch_end and c.generation == slow_batch[0].generation
        for c in slow_commits
    ), "the expelled member committed its batch in the old generation"


def test_slow_on_assign_alone_does_not_trip_max_poll(kafka_cluster: KafkaCluster, run_dir: Path) -> None:
    """MPI1's "verify": a member whose on_assign sleeps for twice max.poll.interval.ms, nothing else."""
    run_id = f"oa-{uuid.uuid4().hex[:8]}"
    kafka_cluster.create_topic(f"t-{run_id}", partitions=2, replication_factor=3)
    on_assign_s = 2 * INTERVAL_MS / 1000
    with Recorder(run_dir / run_id, run_id) as history:
        watch = Watch(history)
        ctx = context(kafka_cluster, run_id, watch)
        produce(ctx, 100)
        sampler = ClusterSampler(ctx, group=True, interval_s=0.5).start()
        slow = ThreadMember(ctx, member("consumer-0", Processing(on_assign_s=on_assign_s)))
        try:
            slow.start()
            watch.wait("all 100 values delivered", lambda ev: len(delivered(ev, "consumer-0")) >= 100, 60)
            time.sleep(3.0)  # more polls: a pending _MAX_POLL_EXCEEDED would surface now
        finally:
            slow.stop()
            sampler.stop()
    events = read_events(run_dir / run_id)

    rebalances = [e for e in events if isinstance(e, Rebalance)]
    assign = rebalances[0]
    deliveries = delivered(events, "consumer-0")
    first_delivery = deliveries[0].mono - assign.mono
    maxpoll = [
        e
        for e in events
        if isinstance(e, ClientLog) and (e.error == "_MAX_POLL_EXCEEDED" or e.facility == "MAXPOLL")
    ]
    # A sample's mono is stamped when its answer is in, so a request sent just before the member's SyncGroup
    # can still show COMPLETING_REBALANCE: keep only samples asked after on_assign was entered.
    in_callback = [
        e
        for e in events
        if isinstance(e, ClusterSample)
        and assign.mono < e.mono - (e.duration_ms or 0.0) / 1000
        and e.mono < assign.mono + on_assign_s
    ]
    states = [(round(s.mono - assign.mono, 1), s.group_state, len(s.group_members)) for s in in_callback]
    print(
        f"\non_assign entered (generation {assign.generation}) and slept {on_assign_s:.0f} s with "
        f"max.poll.interval.ms={INTERVAL_MS}; first delivery {first_delivery:.1f} s after entry, generation "
        f"{deliveries[0].generation}; rebalances "
        f"{[(r.action, r.generation, round(r.mono - assign.mono, 1)) for r in rebalances]}; "
        f"MAXPOLL/_MAX_POLL_EXCEEDED: {[(e.error, e.message) for e in maxpoll]}; group during the callback "
        f"(s, state, members): {states}"
    )
    assert assign.action == "assign"
    assert first_delivery >= on_assign_s - 0.5
    # Observed (librdkafka 2.x): consume() marks the application "blocked in librdkafka" for the whole call
    # (rd_kafka_app_poll_start with a non-zero timeout), and the rebalance callback runs inside that call,
    # so the interval is not enforced while on_assign runs: no leave, no new generation.
    assert maxpoll == []
    assert [r.action for r in rebalances] == ["assign", "revoke"]  # the revoke is the final close()
    assert {d.generation for d in deliveries} == {assign.generation}
    stable = [s for s in in_callback if s.error is None]
    assert stable
    assert all((s.group_state or "").upper() == "STABLE" and len(s.group_members) == 1 for s in stable)


def test_rebalance_during_slow_on_assign_expels_the_member_after_the_interval(
    kafka_cluster: KafkaCluster, run_dir: Path
) -> None:
    """Not alone: a second member joins while on_assign sleeps. The coordinator waits for the sleeping
    member's rejoin for its rebalance timeout (= max.poll.interval.ms), then completes without it."""
    run_id = f"ob-{uuid.uuid4().hex[:8]}"
    kafka_cluster.create_topic(f"t-{run_id}", partitions=2, replication_factor=3)
    on_assign_s = 2 * INTERVAL_MS / 1000
    with Recorder(run_dir / run_id, run_id) as history:
        watch = Watch(history)
        ctx = context(kafka_cluster, run_id, watch)
        produce(ctx, 100)
        slow = ThreadMember(ctx, member("consumer-slow", Processing(on_assign_s=on_assign_s)))
        other = ThreadMember(ctx, member("consumer-other", Processing()))
        try:
            slow.start()
            watch.wait(
                "on_assign of the slow member",
                lambda ev: any(isinstance(e, Rebalance) and e.process == "consumer-slow" for e in ev),
                30,
            )
            time.sleep(1.0)
            joined = time.monotonic()
            other.start()
            watch.wait(
                "the other member owns both partitions",
                lambda ev: any(
                    isinstance(e, Rebalance)
                    and e.process == "consumer-other"
                    and e.action == "assign"
                    and len(e.partitions) == 2
                    for e in ev
                ),
                30,
            )
            watch.wait(
                "the slow member is back in the group",
                lambda ev: any(
                    isinstance(e, Rebalance)
                    and e.process == "consumer-slow"
                    and e.action == "assign"
                    and e.mono > joined + on_assign_s - 1
                    for e in ev
                ),
                30,
            )
        finally:
            other.stop()
            slow.stop()
    events = read_events(run_dir / run_id)
    rebalances = [e for e in events if isinstance(e, Rebalance)]
    first = rebalances[0]
    took = next(
        r
        for r in rebalances
        if r.process == "consumer-other" and r.action == "assign" and len(r.partitions) == 2
    )
    maxpoll = [
        e
        for e in events
        if isinstance(e, ClientLog) and (e.error == "_MAX_POLL_EXCEEDED" or e.facility == "MAXPOLL")
    ]
    logs = [e for e in events if isinstance(e, ClientLog) and e.process == "consumer-slow"]
    timeline = [
        (r.process, r.action, r.generation, len(r.partitions), round(r.mono - first.mono, 1))
        for r in rebalances
    ]
    print(
        f"\nslow on_assign entered at 0 (generation {first.generation}); other member started at "
        f"+{joined - first.mono:.1f} s and got both partitions at +{took.mono - first.mono:.1f} s "
        f"({took.mono - joined:.1f} s after it started; generation {took.generation}); rebalances "
        f"{timeline}; "
        f"MAXPOLL: {[(e.error, e.message) for e in maxpoll]}; slow member's client logs "
        f"{[(round(e.mono - first.mono, 1), e.facility, e.error, (e.message or '')[:100]) for e in logs]}"
    )
    expelled_after_s = took.mono - joined
    assert INTERVAL_MS / 1000 - 1.0 <= expelled_after_s < INTERVAL_MS / 1000 + 4.0
    assert took.generation is not None
    assert first.generation is not None
    assert took.generation > first.generation
    # The sleeping member learns it was expelled only after on_assign returns: its partitions are *lost*.
    lost = [r for r in rebalances if r.process == "consumer-slow" and r.action == "lost"]
    assert lost
    assert lost[0].mono >= first.mono + on_assign_s - 0.5
    assert maxpoll == [], "the client itself never enforced max.poll.interval.ms during the callback"
