"""A shaped producer on one real broker: sized values, 8 keys, headers and tombstones on a compacted topic,
read back by the final drain (every value id, a tombstone's from its header) and by a plain consumer (the
sizes and headers the shape drew)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from chaos.cluster.images import ImageSet
from chaos.cluster.single import SingleBroker, single_broker
from chaos.history import DrainRead, Recorder, SendInvoke, SendOutcome, read_events
from chaos.run.events import VALUE_ID_HEADER
from chaos.workload import IDEMPOTENT, ProducerSpec, ProducerWorker, RunContext, Traffic, drain

pytestmark = [pytest.mark.integration]

PARTITIONS = 2
COUNT = 400
TRAFFIC = Traffic(sizes=(50, 2000), keys=8, headers={"source": "billing"}, tombstones=0.1)


@pytest.fixture(scope="module")
def broker(chaos_images: ImageSet) -> Iterator[SingleBroker]:
    with single_broker(chaos_images) as running:
        yield running


def create_compacted_topic(bootstrap: str, name: str) -> None:
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(
        name, num_partitions=PARTITIONS, replication_factor=1, config={"cleanup.policy": "compact"}
    )
    admin.create_topics([topic], operation_timeout=30, request_timeout=30)[name].result(timeout=60)


def read_all(
    bootstrap: str, topic: str, timeout_s: float = 30.0
) -> list[tuple[bytes | None, dict[str, bytes]]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{uuid.uuid4().hex[:8]}",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    records: list[tuple[bytes | None, dict[str, bytes]]] = []
    ended: set[int] = set()
    deadline = time.monotonic() + timeout_s
    try:
        while len(ended) < PARTITIONS and time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.5):
                if msg.error() is not None:
                    ended.add(msg.partition() or 0)
                    continue
                pairs = msg.headers() or []
                headers = {p[0]: p[1] for p in pairs if isinstance(p, tuple) and isinstance(p[1], bytes)}
                records.append((msg.value(), headers))
    finally:
        consumer.close()
    return records


def test_a_shaped_producer_leaves_sized_records_and_tombstones_the_drain_reads_back(
    broker: SingleBroker, tmp_path: Path
) -> None:
    run_id = f"tr-{uuid.uuid4().hex[:8]}"
    topic = f"t-{run_id}"
    create_compacted_topic(broker.bootstrap_servers, topic)
    with Recorder(tmp_path, run_id) as history:
        ctx = RunContext(
            run_id, broker.bootstrap_servers, topic, f"g-{run_id}", IDEMPOTENT, history.record, seed=5
        )
        spec = ProducerSpec(name="producer-0", rate=None, count=COUNT, duration_s=30.0, traffic=TRAFFIC)
        stats = ProducerWorker(ctx, spec).start().join()
        drain(ctx, isolations=("read_uncommitted",), timeout_s=30.0)
    assert stats.ok == COUNT
    events = read_events(tmp_path)
    invokes = {e.value_id: e for e in events if isinstance(e, SendInvoke)}
    tombstones = {vid for vid, e in invokes.items() if e.tombstone}
    assert 15 < len(tombstones) < 70
    assert {e.key for e in invokes.values()} == {f"k{i}" for i in range(8)}
    assert all(e.outcome == "ok" for e in events if isinstance(e, SendOutcome))
    drained = [e for e in events if isinstance(e, DrainRead)]
    assert sorted(e.value_id or "" for e in drained) == sorted(invokes)  # tombstones' ids included
    assert {e.key for e in drained} == {f"k{i}" for i in range(8)}

    shape = TRAFFIC.shape("producer-0", 5)
    records = read_all(broker.bootstrap_servers, topic)
    assert len(records) == COUNT
    seen_tombstones = set()
    for value, headers in records:
        vid = headers[VALUE_ID_HEADER].decode()
        seq = int(vid.rpartition(":")[2])
        assert headers["source"] == b"billing"
        if value is None:
            seen_tombstones.add(vid)
            continue
        assert value.startswith(vid.encode() + b"|")
        assert len(value) == max(shape.size(seq) or 0, len(vid) + 1)
    assert seen_tombstones == tombstones
