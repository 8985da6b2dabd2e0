"""The workload on one real broker: producer, 2-member group, sampler and drain, recorded and read back."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos.cluster.images import ImageSet
from chaos.cluster.single import SingleBroker, single_broker
from chaos.history import (
    ClusterSample,
    Delivery,
    DrainEnd,
    DrainRead,
    Event,
    ProbeCall,
    Rebalance,
    Recorder,
    SendInvoke,
    SendOutcome,
    read_events,
)
from chaos.workload import (
    IDEMPOTENT,
    ClusterSampler,
    ConsumerGroup,
    MemberSpec,
    Processing,
    ProducerSpec,
    ProducerWorker,
    RestoreReader,
    RunContext,
    Sink,
    drain,
)

pytestmark = [pytest.mark.integration]

PARTITIONS = 3


@pytest.fixture(scope="module")
def broker(chaos_images: ImageSet) -> Iterator[SingleBroker]:
    with single_broker(chaos_images) as running:
        yield running


def create_topic(bootstrap: str, name: str) -> None:
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=PARTITIONS, replication_factor=1)],
        operation_timeout=30,
        request_timeout=30,
    )
    futures[name].result(timeout=60)


def context(broker: SingleBroker, run_id: str, sink: Sink) -> RunContext:
    """The run's topic ``t-<run id>`` and group ``g-<run id>``, the idempotent profile, ``sink``."""
    return RunContext(run_id, broker.bootstrap_servers, f"t-{run_id}", f"g-{run_id}", IDEMPOTENT, sink)


def members(n: int, **kwargs: object) -> list[MemberSpec]:
    return [MemberSpec(name=f"consumer-{i}", **kwargs) for i in range(n)]  # type: ignore[arg-type]


class Tracker:
    """Records into the history and remembers acked and delivered values, to wait for the group."""

    def __init__(self, history: Recorder) -> None:
        self.history = history
        self.acked: set[str] = set()
        self.delivered: set[str] = set()
        self.assigned: dict[str, int] = {}  # process -> partitions of its latest assign (0 after revoke)

    def record(self, event: Event) -> None:
        self.history.record(event)
        if isinstance(event, SendOutcome) and event.outcome == "ok":
            self.acked.add(event.value_id)
        elif isinstance(event, Delivery) and event.value_id is not None:
            self.delivered.add(event.value_id)
        elif isinstance(event, Rebalance):
            self.assigned[event.process] = len(event.partitions) if event.action == "assign" else 0

    def wait_assigned(self, processes: set[str], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not all(self.assigned.get(p, 0) for p in processes):
            assert time.monotonic() < deadline, f"not all of {processes} assigned: {self.assigned}"
            time.sleep(0.1)

    def wait_caught_up(self, timeout_s: float) -> float:
        started = time.monotonic()
        while not self.acked <= self.delivered and time.monotonic() - started < timeout_s:
            time.sleep(0.1)
        return time.monotonic() - started


def test_producer_group_drain_history(broker: SingleBroker, tmp_path: Path) -> None:
    run_id = f"wl-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap_servers, f"t-{run_id}")
    started = time.monotonic()
    with Recorder(tmp_path, run_id) as history:
        track = Tracker(history)
        ctx = context(broker, run_id, track.record)
        sampler = ClusterSampler(ctx, group=True).start()
        group_ = ConsumerGroup(
            ctx, members(2, strategy="commit_after", processing=Processing(on_assign_s=0.1))
        ).start()
        producer = ProducerWorker(ctx, ProducerSpec(name="producer-0", rate=2000, duration_s=8.0)).start()
        stats = producer.join()
        # Let the group catch up on the tail before closing it.
        caught_up = track.wait_caught_up(20.0)
        group_.stop()
        sampler.stop()
        summaries = drain(ctx, timeout_s=30)
        elapsed = time.monotonic() - started
    events = list(read_events(tmp_path))
    print(
        f"\nproducer: {stats}; {stats.ok / stats.elapsed_s:.0f} acked msg/s; run {elapsed:.1f} s; "
        f"{len(events)} events; samples={sampler.samples}; "
        f"group caught up {caught_up:.1f} s after the producer"
    )

    invokes = {e.value_id: e for e in events if isinstance(e, SendInvoke)}
    outcomes = Counter(e.value_id for e in events if isinstance(e, SendOutcome))
    assert len(invokes) == stats.sent > 0
    assert set(outcomes) == set(invokes)
    assert max(outcomes.values()) == 1, "a send with more than one outcome"
    ok = {e.value_id for e in events if isinstance(e, SendOutcome) and e.outcome == "ok"}
    assert ok == set(invokes), "every send on a healthy broker is acked"

    deliveries = [e for e in events if isinstance(e, Delivery)]
    assert deliveries
    assert all(d.value_id in invokes for d in deliveries), "every delivery links to a send"
    assert {d.value_id for d in deliveries} == ok, "the group saw every acked value"
    assert {d.process for d in deliveries} == {"consumer-0", "consumer-1"}

    rebalances = [e for e in events if isinstance(e, Rebalance)]
    assigns = [r for r in rebalances if r.action == "assign"]
    assert assigns
    assert all(r.generation is not None and r.generation >= 1 for r in assigns)
    assert all(r.member for r in assigns)

    samples = [e for e in events if isinstance(e, ClusterSample)]
    assert len(samples) >= 5
    good = [s for s in samples if s.error is None]
    assert good
    assert good[-1].controller == 1
    assert len(good[-1].partition_states) == PARTITIONS

    for isolation in ("read_uncommitted", "read_committed"):
        reads = Counter(e.value_id for e in events if isinstance(e, DrainRead) and e.isolation == isolation)
        assert set(reads) == ok, f"drain {isolation}: every acked value"
        assert max(reads.values()) == 1, f"drain {isolation}: each value once"
        ends = [e for e in events if isinstance(e, DrainEnd) and e.isolation == isolation]
        assert sorted(e.partition for e in ends) == list(range(PARTITIONS))
        assert all(e.outcome == "ok" for e in ends)
    assert all(not s.incomplete for s in summaries)


def test_restore_reader_records_each_call(broker: SingleBroker, tmp_path: Path) -> None:
    run_id = f"rr-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap_servers, f"t-{run_id}")
    with Recorder(tmp_path, run_id) as history:
        ctx = context(broker, run_id, history.record)
        ProducerWorker(ctx, ProducerSpec(name="producer-0", rate=None, count=300)).start().join()
        results = RestoreReader(ctx, k=2, poll_timeout_s=5.0).restore(range(PARTITIONS))
    assert all(r.ok for r in results), results
    assert all(r.target == r.high - 2 and r.polled_offset == r.target for r in results if r.high)
    probes = [e for e in read_events(tmp_path) if isinstance(e, ProbeCall)]
    ops = Counter(p.operation for p in probes)
    assert ops == {"list_offsets": PARTITIONS, "assign": PARTITIONS, "seek": PARTITIONS, "poll": PARTITIONS}
    assert all(p.error is None and p.duration_ms >= 0 for p in probes)


def test_process_member_crash_then_redelivery(broker: SingleBroker, tmp_path: Path) -> None:
    """A SIGKILLed member sends no LeaveGroup: its partitions move only after session.timeout.ms."""
    run_id = f"cr-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap_servers, f"t-{run_id}")
    with Recorder(tmp_path, run_id) as history:
        track = Tracker(history)
        ctx = context(broker, run_id, track.record)
        specs = members(2, strategy="commit_after", processing=Processing(per_batch_s=0.05))
        grp = ConsumerGroup(ctx, specs, mode="process").start()
        ProducerWorker(ctx, ProducerSpec(name="producer-0", rate=500, duration_s=4.0)).start().join()
        # Both members must hold partitions before the kill: on a loaded machine a member process can
        # join late, and its first assignment would then look like a takeover.
        track.wait_assigned({"consumer-0", "consumer-1"}, 60.0)
        victim = grp.members[0]
        killed_at = time.monotonic()
        victim.crash()
        ProducerWorker(ctx, ProducerSpec(name="producer-1", rate=500, duration_s=12.0)).start().join()
        caught_up = track.wait_caught_up(20.0)
        grp.members[1].stop()
    events = list(read_events(tmp_path))
    survivor = [
        e
        for e in events
        if isinstance(e, Rebalance)
        and e.process == "consumer-1"
        and e.action == "assign"
        and e.mono > killed_at
    ]
    assert survivor, "the survivor was never reassigned after the crash"
    takeover = survivor[0].mono - killed_at
    print(
        f"\ntakeover after SIGKILL: {takeover:.1f} s (ci session.timeout.ms = 9 s); "
        f"caught up {caught_up:.1f} s after the producer"
    )
    assert takeover > 4.0, "partitions moved too fast for a crash without LeaveGroup"
    acked = {e.value_id for e in events if isinstance(e, SendOutcome) and e.outcome == "ok"}
    seen = {e.value_id for e in events if isinstance(e, Delivery)}
    assert acked <= seen, f"{len(acked - seen)} acked values never delivered"
