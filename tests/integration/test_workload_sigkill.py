"""kill -9 of a process running a workload mid-run leaves a readable history up to about a second before."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import pyarrow.compute as pc  # type: ignore[import-untyped,unused-ignore]
import pytest

from chaos.cluster.cluster import KafkaCluster
from chaos.history import (
    Delivery,
    Rebalance,
    SendInvoke,
    SendOutcome,
    compact_history,
    load_history,
    read_events,
)
from chaos.workload import IDEMPOTENT, RunContext
from chaos.workload.common import child_payload
from chaos.workload.composed import WorkloadPlan

pytestmark = pytest.mark.integration

KILL_AFTER_S = 8.0  # of producing: the group has joined and delivered by then


def test_sigkill_mid_run_keeps_a_readable_history(kafka_cluster: KafkaCluster, run_dir: Path) -> None:
    run_id = f"k9-{uuid.uuid4().hex[:8]}"
    topic, group = f"t-{run_id}", f"g-{run_id}"
    kafka_cluster.create_topic(topic, partitions=2, replication_factor=3)
    plan = WorkloadPlan(producers=1, members=2, rate=1_000.0, duration_s=60.0, mode="thread")
    history_dir = run_dir / run_id
    bootstrap = kafka_cluster.bootstrap_servers

    def nowhere(event: object) -> None:
        raise AssertionError("the child records its own history")

    context = RunContext(run_id, bootstrap, topic, group, IDEMPOTENT, nowhere, run_dir=history_dir)
    child = subprocess.Popen(
        [sys.executable, "-m", "chaos.scenario.record_workload"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    progress: list[tuple[float, int, int]] = []  # (wall ts, events recorded, events written) per line
    stderr: list[bytes] = []

    def read() -> None:
        assert child.stdout is not None
        for line in child.stdout:
            parts = line.split()
            if parts[:1] == [b"progress"]:
                progress.append((float(parts[1]), int(parts[2]), int(parts[3])))

    readers = [
        threading.Thread(target=read, daemon=True),
        threading.Thread(target=lambda: stderr.extend(child.stderr or ()), daemon=True),
    ]
    try:
        assert child.stdin is not None
        child.stdin.write(child_payload(context, plan.to_data()).encode() + b"\n")
        child.stdin.close()
        for reader in readers:
            reader.start()
        deadline = time.monotonic() + 60.0
        # Wait until the child has recorded for KILL_AFTER_S with events flowing, then kill it.
        while time.monotonic() < deadline and child.poll() is None:
            if len(progress) >= 2 and progress[-1][0] - progress[0][0] >= KILL_AFTER_S:
                break
            time.sleep(0.05)
        assert child.poll() is None, b"".join(stderr).decode(errors="replace")[-3000:]
        assert progress, "the child printed no progress"
        child.send_signal(signal.SIGKILL)
        killed_at = time.time()
        assert child.wait(10) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
        for reader in readers:
            reader.join(5)

    # What the child had recorded a second before the kill must all be on disk.
    before = [p for p in progress if p[0] <= killed_at - 1.0]
    assert before, f"no progress line a second before the kill: {progress[-3:]}"
    _, recorded_1s_before, _ = before[-1]

    loaded = load_history(history_dir)  # JSONL segments: the Parquet file is written only by close()
    assert loaded.source == "jsonl"
    assert loaded.run_id == run_id
    assert loaded.torn_lines <= 1
    table = loaded.table
    indexes = table["index"]
    assert pc.min(indexes).as_py() == 0
    assert pc.max(indexes).as_py() == table.num_rows - 1, "a gap in the event indexes"
    last_ts = pc.max(table["ts"]).as_py()
    print(
        f"\nkilled at {killed_at:.3f}; {table.num_rows} events on disk, {recorded_1s_before} recorded "
        f"1 s before the kill; last event {killed_at - last_ts:.2f} s before the kill; "
        f"torn lines {loaded.torn_lines}"
    )
    assert table.num_rows >= recorded_1s_before, "events recorded a second before the kill are missing"
    assert killed_at - last_ts < 1.0

    events = read_events(history_dir)
    kinds = Counter(type(e) for e in events)
    assert kinds[SendInvoke] > 1_000
    assert kinds[SendOutcome] > 1_000
    assert kinds[Delivery] > 0
    assert kinds[Rebalance] > 0
    outcomes = Counter(e.value_id for e in events if isinstance(e, SendOutcome))
    assert max(outcomes.values()) == 1

    # A crashed run is compacted afterwards into the same Parquet history.
    compact_history(history_dir)
    assert load_history(history_dir).table.num_rows == table.num_rows
