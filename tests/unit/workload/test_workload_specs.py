"""The composed workload plan, the transactional worker's spec, and child-process actors (real children)."""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from typing import Any

import pytest

from chaos.errors import ConfigError, WorkloadError
from chaos.history import ClientLog, Event
from chaos.workload import (
    IDEMPOTENT,
    THROUGHPUT_PRODUCER,
    TRANSACTIONAL,
    ChildProcess,
    Processing,
    RunContext,
    TransactionalWorker,
    TxnWorkerSpec,
    WorkloadPlan,
)
from chaos.workload.common import child_payload, read_child_payload


def context(**changes: Any) -> RunContext:
    fields: dict[str, Any] = {
        "run_id": "run1",
        "bootstrap_servers": "127.0.0.1:9",
        "topic": "out",
        "group": "g",
        "client": TRANSACTIONAL,
        "sink": lambda event: None,
    }
    return RunContext(**{**fields, **changes})


def test_workload_plan_round_trips_through_json() -> None:
    plan = WorkloadPlan(
        rate=None,
        duration_s=5.0,
        mode="thread",
        producer_overrides=THROUGHPUT_PRODUCER,
        consumer_overrides=(("fetch.min.bytes", 1024),),
        processing=Processing(per_batch_s=0.5),
    )
    _, data = read_child_payload(child_payload(context(), plan.to_data()), print)
    assert WorkloadPlan.from_data(data) == plan


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("producers", 0, "1..16 producers"),
        ("members", 17, "1..16 members"),
        ("duration_s", 0.0, "duration_s"),
        ("catch_up_s", -1.0, "catch_up_s"),
    ],
)
def test_workload_plan_refuses_bad_values(field: str, value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        WorkloadPlan(**{field: value})  # type: ignore[arg-type]


def spec(**options: Any) -> TxnWorkerSpec:
    return TxnWorkerSpec("transformer-0", "in", **options)


def test_txn_worker_spec_derives_a_stable_transactional_id_and_read_committed() -> None:
    built = spec(batch_size=10, crash_in_txn=2, consumer_overrides=(("session.timeout.ms", 6000),))
    consumer, producer = built.consumer_settings(context()), built.producer_settings(context())
    assert producer["transactional.id"] == "chaos-transformer-0"  # a restart under the same name fences
    assert consumer["isolation.level"] == "read_committed"
    assert consumer["enable.auto.commit"] is False
    assert consumer["group.id"] == "g"
    assert consumer["session.timeout.ms"] == 6000
    assert int(producer["message.timeout.ms"]) <= int(producer["transaction.timeout.ms"])
    assert TxnWorkerSpec.from_data(built.to_data()) == built
    slow = spec(processing=Processing(per_record_s=0.01, per_batch_s=0.5, on_assign_s=2.0))
    assert TxnWorkerSpec.from_data(json.loads(json.dumps(slow.to_data()))) == slow  # as the child reads it
    plain = spec(transactional=False).producer_settings(context(client=IDEMPOTENT))
    assert "transactional.id" not in plain


def test_txn_worker_spec_refuses_a_mismatched_profile_and_bad_values() -> None:
    with pytest.raises(ConfigError, match="not transactional"):
        TransactionalWorker(context(client=IDEMPOTENT), spec())
    with pytest.raises(ConfigError, match=r"is transactional; pass transactional=True"):
        spec(transactional=False).consumer_settings(context())
    with pytest.raises(ConfigError, match="crash_in_txn"):
        spec(crash_in_txn=0)
    with pytest.raises(ConfigError, match="batch_size"):
        spec(batch_size=0)
    with pytest.raises(ConfigError, match="set by the workload itself"):
        spec(consumer_overrides=(("on_commit", "x"),))
    with pytest.raises(ConfigError, match=r"TxnWorkerSpec\.processing: expected a Processing"):
        spec(processing={"per_record_s": 1.0})


class EchoChild(ChildProcess):
    """This file run as a child: records ``N`` ClientLog events, then idles until SIGTERM (exit 0)."""

    module = "tests.unit.workload.test_workload_specs"


class Collect:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        with self.lock:
            self.events.append(event)

    def wait_for(self, n: int, timeout_s: float = 20.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.events) >= n:
                    return
            time.sleep(0.02)
        raise AssertionError(f"only {len(self.events)} of {n} events from the child")


def test_child_process_events_survive_sigkill() -> None:
    sink = Collect()
    child = EchoChild("echo", "3", sink).start()
    try:
        sink.wait_for(3)
        child.crash()
    finally:
        if child.running:
            child.crash()
    assert child.returncode == -signal.SIGKILL
    assert [e.message for e in sink.events if isinstance(e, ClientLog)] == ["echo 0", "echo 1", "echo 2"]
    with pytest.raises(WorkloadError, match="not running"):
        child.crash()


def test_child_process_stops_gracefully_on_sigterm() -> None:
    sink = Collect()
    child = EchoChild("echo", "1", sink).start()
    try:
        sink.wait_for(1)
        child.stop(timeout_s=10.0)
    finally:
        if child.running:
            child.crash()
    assert child.returncode == 0
    assert child.wait(1.0) == 0


def _child_main() -> int:
    from chaos.workload.member_child import pipe_sink, stop_on_sigterm

    count = int(sys.stdin.readline())
    stop = stop_on_sigterm()
    sink = pipe_sink()
    for i in range(count):
        sink(ClientLog(run_id="run1", process="echo", level="info", message=f"echo {i}"))
    stop.wait(30.0)
    return 0


if __name__ == "__main__":
    sys.exit(_child_main())


@pytest.mark.parametrize(("hasty", "within_s"), [(True, 4.0), (False, None)])
def test_a_hasty_stop_cuts_the_producers_flush_short(hasty: bool, within_s: float | None) -> None:
    """An interrupted run stops its producer with ``hasty``: no broker answers, yet it ends in about
    HASTY_FLUSH_S (+ the purge's flush), not its flush_timeout_s; what was not acknowledged is unknown."""
    from chaos.history import SendOutcome
    from chaos.workload import ProducerSpec, ProducerWorker

    events: list[Event] = []
    spec = ProducerSpec(name="p", rate=200.0, duration_s=30.0, flush_timeout_s=6.0)
    worker = ProducerWorker(context(client=IDEMPOTENT, sink=events.append), spec).start()
    time.sleep(0.5)
    started = time.monotonic()
    worker.stop(hasty=hasty)
    took = time.monotonic() - started
    outcomes = [e for e in events if isinstance(e, SendOutcome)]
    assert outcomes
    assert all(e.outcome == "info" for e in outcomes)
    if within_s is not None:
        assert took < within_s
    else:
        assert took >= 6.0  # the whole flush_timeout_s: what a hasty stop saves
