"""Acceptance run: 2 producers and a 3-member group through Toxiproxy for 60 s, no fault, >= 5,000 msg/s."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.compute as pc  # type: ignore[import-untyped,unused-ignore]
import pytest

from chaos.cluster.cluster import KafkaCluster
from chaos.history import Recorder, filter_kinds, kind_counts, read_history
from chaos.workload import IDEMPOTENT, RunContext
from chaos.workload.composed import THROUGHPUT_CONSUMER, THROUGHPUT_PRODUCER, WorkloadPlan, run_workload

pytestmark = pytest.mark.integration

TARGET_RATE = 5_000.0  # acked messages/s in total (the acceptance rate)
DURATION_S = 60.0
PARTITIONS = 3


def distinct(column: pa.ChunkedArray) -> set[str]:
    return set(pc.unique(column).to_pylist())


def test_two_producers_three_members_sustain_5000_per_s(kafka_cluster: KafkaCluster, run_dir: Path) -> None:
    run_id = f"tp-{uuid.uuid4().hex[:8]}"
    topic, group = f"t-{run_id}", f"g-{run_id}"
    kafka_cluster.create_topic(topic, partitions=PARTITIONS, replication_factor=3)
    plan = WorkloadPlan(
        producers=2,
        members=3,
        rate=3_000.0,  # per producer: 6,000/s offered, 20 % above the target
        duration_s=DURATION_S,
        mode="thread",
        catch_up_s=15.0,
        producer_overrides=THROUGHPUT_PRODUCER,
        consumer_overrides=THROUGHPUT_CONSUMER,
    )
    history_dir = run_dir / run_id
    started = time.monotonic()
    with Recorder(history_dir, run_id) as history:
        context = RunContext(
            run_id,
            kafka_cluster.bootstrap_servers,
            topic,
            group,
            IDEMPOTENT,
            history.record,
            run_dir=history_dir,
        )
        result = run_workload(context, plan)
        closing = time.monotonic()
    stats = history.stats()
    close_s = time.monotonic() - closing
    parquet_bytes = history.run_dir.parquet_path.stat().st_size

    table = read_history(history_dir)
    counts = kind_counts(table)
    print(
        f"\nacked {result.acked} msgs in {result.produce_s:.1f} s = {result.acked_rate:.0f} msg/s "
        f"(target {TARGET_RATE:.0f}); group caught up {result.caught_up_s:.1f} s after the producers; "
        f"{stats.recorded} events ({counts}); history on disk: JSONL {stats.jsonl_bytes:,} B "
        f"({stats.jsonl_bytes / stats.recorded:.0f} B/event), Parquet {parquet_bytes:,} B "
        f"({parquet_bytes / stats.recorded:.1f} B/event); close {close_s:.1f} s; "
        f"run {time.monotonic() - started:.1f} s"
    )
    assert table.num_rows == stats.recorded

    invokes = filter_kinds(table, "send_invoke")["value_id"]
    outcomes = filter_kinds(table, "send_outcome")
    assert len(invokes) == sum(s.sent for s in result.producers) > 0
    assert pc.count_distinct(invokes).as_py() == len(invokes), "a value id was sent twice"
    assert len(outcomes) == len(invokes), "sends and terminal outcomes differ in number"
    assert pc.count_distinct(outcomes["value_id"]).as_py() == len(invokes), "a send with two outcomes"
    assert pc.all(pc.is_in(outcomes["value_id"], value_set=pc.unique(invokes))).as_py()
    by_outcome = {v["values"]: v["counts"] for v in pc.value_counts(outcomes["outcome"]).to_pylist()}
    assert by_outcome == {"ok": len(invokes)}, f"no fault, yet not every send was acked: {by_outcome}"

    deliveries = filter_kinds(table, "delivery")
    assert len(deliveries) >= len(invokes)
    assert deliveries["value_id"].null_count == 0
    assert pc.all(pc.is_in(deliveries["value_id"], value_set=pc.unique(invokes))).as_py(), (
        "a delivery that links to no send"
    )
    assert pc.count_distinct(deliveries["value_id"]).as_py() == len(invokes), "the group missed acked values"
    assert distinct(deliveries["process"]) == {"consumer-0", "consumer-1", "consumer-2"}

    rebalances = filter_kinds(table, "rebalance")
    assigns = rebalances.filter(pc.equal(rebalances["action"], "assign"))
    assert len(assigns) >= 3
    assert assigns["generation"].null_count == 0
    assert pc.min(assigns["generation"]).as_py() >= 1
    assert assigns["member"].null_count == 0
    assert distinct(assigns["process"]) == {"consumer-0", "consumer-1", "consumer-2"}
    assert counts.get("cluster_state", 0) >= DURATION_S * 0.8, "the sampler fell below one sample per second"

    assert result.acked_rate >= TARGET_RATE, (
        f"{result.acked_rate:.0f} acked msg/s < {TARGET_RATE:.0f}; see docs/workload.md (Throughput)"
    )
