"""O6: consume-transform-produce in transactions; a SIGKILL mid-transaction and a restart with the same
transactional.id leave each input exactly once in the read_committed output."""

from __future__ import annotations

import signal
import threading
import time
import uuid
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from chaos.cluster.cluster import KafkaCluster
from chaos.history import ClientLog, DrainRead, Event, Recorder, SendOutcome, TxnMarker, read_events
from chaos.workload import IDEMPOTENT, TRANSACTIONAL, ProducerSpec, ProducerWorker, RunContext, drain
from chaos.workload.transactional import TransactionalWorker, TxnWorkerSpec

pytestmark = pytest.mark.integration

INPUTS = 300
BATCH = 50
CRASH_IN_TXN = 3  # two committed transactions, then a SIGKILL with the third one's records in the log


class Keep:
    def __init__(self, history: Recorder) -> None:
        self.history = history
        self.events: list[Event] = []
        self.lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        self.history.record(event)
        with self.lock:
            self.events.append(event)

    def committed_values(self) -> set[str]:
        with self.lock:
            return {
                v
                for e in self.events
                if isinstance(e, TxnMarker) and e.action == "commit"
                for v in e.value_ids
            }


def test_crash_mid_transaction_then_restart_outputs_each_input_once(
    kafka_cluster: KafkaCluster, run_dir: Path
) -> None:
    run_id = f"eos-{uuid.uuid4().hex[:8]}"
    source, sink_topic, group = f"in-{run_id}", f"out-{run_id}", f"g-{run_id}"
    bootstrap = kafka_cluster.bootstrap_servers
    kafka_cluster.create_topic(source, partitions=2, replication_factor=3)
    kafka_cluster.create_topic(sink_topic, partitions=2, replication_factor=3)
    short = {"session.timeout.ms": 6_000, "heartbeat.interval.ms": 1_000, "max.poll.interval.ms": 6_000}

    def spec(crash: int | None) -> TxnWorkerSpec:
        return TxnWorkerSpec(
            "transformer-0",
            source,
            consumer_overrides=tuple(short.items()),
            batch_size=BATCH,
            crash_in_txn=crash,
        )

    with Recorder(run_dir / run_id, run_id) as history:
        keep = Keep(history)
        context = RunContext(run_id, bootstrap, sink_topic, group, IDEMPOTENT, keep, run_dir=run_dir / run_id)
        transform = replace(context, client=TRANSACTIONAL)
        stats = (
            ProducerWorker(
                context,
                ProducerSpec(name="producer-0", topic=source, rate=None, count=INPUTS, duration_s=30.0),
            )
            .start()
            .join()
        )
        assert stats.ok == INPUTS
        first = TransactionalWorker(transform, spec(CRASH_IN_TXN)).start()
        try:
            code = first.wait(60.0)
        finally:
            if first.running:
                first.crash()
        assert code == -signal.SIGKILL, f"the worker did not crash in its transaction: {first.stderr_tail()}"
        crashed_at = time.monotonic()
        second = TransactionalWorker(transform, spec(None)).start()
        try:
            deadline = time.monotonic() + 60.0
            inputs = {e.value_id for e in keep.events if isinstance(e, SendOutcome) and e.outcome == "ok"}
            while not inputs <= keep.committed_values() and time.monotonic() < deadline and second.running:
                time.sleep(0.2)
            restart_s = time.monotonic() - crashed_at
        finally:
            second.stop()
        drain(context, timeout_s=30.0)
    events = read_events(run_dir / run_id)

    markers = [e for e in events if isinstance(e, TxnMarker)]
    crashed_pid_markers = markers[: 2 * (CRASH_IN_TXN - 1) + 1]
    assert [m.action for m in crashed_pid_markers] == ["begin", "commit"] * (CRASH_IN_TXN - 1) + ["begin"]
    committed = Counter(v for m in markers if m.action == "commit" and m.outcome == "ok" for v in m.value_ids)
    assert set(committed) == inputs, "some input was never committed"
    assert max(committed.values()) == 1, "an input committed in two transactions"
    inits = [e for e in events if isinstance(e, ClientLog) and e.facility == "TXN_INIT"]
    assert len(inits) == 2

    committed_reads = Counter(
        e.value_id for e in events if isinstance(e, DrainRead) and e.isolation == "read_committed"
    )
    uncommitted_reads = Counter(
        e.value_id for e in events if isinstance(e, DrainRead) and e.isolation == "read_uncommitted"
    )
    aborted_copies = sum(uncommitted_reads.values()) - len(uncommitted_reads)
    print(
        f"\n{INPUTS} inputs; first instance SIGKILLed inside transaction {CRASH_IN_TXN}; the restart "
        f"committed the rest {restart_s:.1f} s after the crash; transactions "
        f"{Counter(m.action for m in markers)}; read_committed output "
        f"{sum(committed_reads.values())} records "
        f"({len(committed_reads)} distinct); read_uncommitted {sum(uncommitted_reads.values())} "
        f"({aborted_copies} aborted copies)"
    )
    assert set(committed_reads) == inputs
    assert max(committed_reads.values()) == 1, "read_committed output holds an input twice"
    assert aborted_copies >= 1, "the crashed transaction's records should be in the log, aborted"
