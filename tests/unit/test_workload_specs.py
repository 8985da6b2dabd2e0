"""The composed workload plan, the transactional worker's spec, and child-process actors (real children)."""

from __future__ import annotations

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
    ChildProcess,
    Processing,
    TxnWorkerSpec,
    WorkloadPlan,
)


def test_workload_plan_round_trips_through_json() -> None:
    plan = WorkloadPlan(
        topic="t",
        group="g",
        rate=None,
        duration_s=5.0,
        mode="thread",
        producer_overrides=THROUGHPUT_PRODUCER,
        consumer_overrides=(("fetch.min.bytes", 1024),),
        processing=Processing(per_batch_s=0.5),
    )
    assert WorkloadPlan.from_json(plan.to_json()) == plan


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("profile", "nope", "WorkloadPlan.profile"),
        ("producers", 0, "1..16 producers"),
        ("members", 17, "1..16 members"),
        ("duration_s", 0.0, "duration_s"),
        ("catch_up_s", -1.0, "catch_up_s"),
    ],
)
def test_workload_plan_refuses_bad_values(field: str, value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        WorkloadPlan(topic="t", group="g", **{field: value})  # type: ignore[arg-type]


def spec(**options: Any) -> TxnWorkerSpec:
    return TxnWorkerSpec.build("transformer-0", "run1", "127.0.0.1:9", "g", "in", "out", **options)


def test_txn_worker_spec_derives_a_stable_transactional_id_and_read_committed() -> None:
    built = spec(batch_size=10, crash_in_txn=2)
    assert built.transactional_id == "chaos-transformer-0"  # a restart under the same name fences the old one
    assert built.consumer["isolation.level"] == "read_committed"
    assert built.consumer["enable.auto.commit"] is False
    assert built.consumer["group.id"] == "g"
    assert int(built.producer["message.timeout.ms"]) <= int(built.producer["transaction.timeout.ms"])
    assert TxnWorkerSpec.from_json(built.to_json()) == built


def test_txn_worker_spec_refuses_a_non_transactional_profile_and_bad_values() -> None:
    with pytest.raises(ConfigError, match="not transactional"):
        spec(client=IDEMPOTENT)
    with pytest.raises(ConfigError, match="crash_in_txn"):
        spec(crash_in_txn=0)
    with pytest.raises(ConfigError, match="batch_size"):
        spec(batch_size=0)
    built = spec()
    with pytest.raises(ConfigError, match=r"transactional\.id"):
        TxnWorkerSpec(
            name="x", run_id="r", group="g", input_topic="i", output_topic="o", consumer={}, producer={}
        )
    with pytest.raises(ConfigError, match="callbacks"):
        TxnWorkerSpec(
            name="x",
            run_id="r",
            group="g",
            input_topic="i",
            output_topic="o",
            consumer={"on_commit": "x"},
            producer=built.producer,
        )


class EchoChild(ChildProcess):
    """This file run as a child: records ``N`` ClientLog events, then idles until SIGTERM (exit 0)."""

    module = "tests.unit.test_workload_specs"


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
