"""A producer client's fatal error is the client's behaviour under test, not a harness failure: the worker
records it, closes the instance and carries on with a new one (at most ``MAX_INSTANCES``), and every value
still gets exactly one outcome. The fatal error is planted into a real librdkafka producer talking to
librdkafka's in-process mock cluster (``test.mock.num.brokers``): no Docker, real delivery reports."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from chaos.errors import WorkloadError
from chaos.history import ClientLog, Event, SendInvoke, SendOutcome
from chaos.workload import IDEMPOTENT, ProducerSpec, ProducerWorker, RunContext
from chaos.workload import producer as producer_module
from chaos.workload.common import CLIENT_FATAL
from chaos.workload.effective import take_announced
from chaos.workload.producer import MAX_INSTANCES

MOCK = (("test.mock.num.brokers", 1),)
COUNT = 400


def planted(code: int, *, fatal: bool, instances: int) -> type:
    """A real Producer whose first ``poll`` raises ``code`` in each of its first ``instances`` instances
    (the pacer polls every 64 sends)."""
    built = Counter[str]()

    class Planted(Producer):
        def __init__(self, config: dict[str, Any]) -> None:
            super().__init__(config)
            built["instances"] += 1
            self._armed = built["instances"] <= instances

        def poll(self, timeout: float = -1) -> int:
            if self._armed:
                self._armed = False
                raise KafkaException(KafkaError(code, "planted by the test", fatal=fatal))
            return int(super().poll(timeout))

    return Planted


def run_worker(monkeypatch: pytest.MonkeyPatch, producer: type, run_id: str) -> tuple[list[Event], Any]:
    monkeypatch.setattr(producer_module, "Producer", producer)
    events: list[Event] = []
    context = RunContext(
        run_id=run_id, bootstrap_servers="127.0.0.1:1", topic="fatal", group="g", client=IDEMPOTENT,
        sink=events.append,
    )  # fmt: skip
    worker = ProducerWorker(
        context, ProducerSpec("producer-0", rate=None, count=COUNT, duration_s=30.0, overrides=MOCK)
    )
    take_announced(run_id)
    worker.start()
    try:
        return events, worker.join(60.0)
    except WorkloadError as exc:
        return events, exc


def outcomes(events: list[Event]) -> Counter[str]:
    invoked = [e.value_id for e in events if isinstance(e, SendInvoke)]
    resolved = Counter(e.value_id for e in events if isinstance(e, SendOutcome))
    assert len(invoked) == len(set(invoked))
    assert resolved == Counter(invoked), "every value sent has exactly one outcome"
    return Counter(e.outcome for e in events if isinstance(e, SendOutcome))


def fatal_lines(events: list[Event]) -> list[ClientLog]:
    return [e for e in events if isinstance(e, ClientLog) and e.facility == CLIENT_FATAL]


def test_a_fatal_error_replaces_the_client_and_the_stream_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    plant = planted(KafkaError._INCONSISTENT, fatal=True, instances=1)
    events, stats = run_worker(monkeypatch, plant, "r-f1")
    assert not isinstance(stats, BaseException), stats
    assert stats.sent == COUNT  # the second instance sent the rest of the sequence
    assert outcomes(events)["ok"] > 64  # both instances' values were acknowledged by the mock cluster
    (line,) = fatal_lines(events)
    assert (line.level, line.error, line.fatal) == ("critical", "_INCONSISTENT", True)
    assert line.process == "producer-0"
    assert "fatal error of instance 1: planted by the test" in line.message
    assert "a new instance continues at sequence 64" in line.message


def test_a_client_failing_fatally_every_time_ends_its_stream_without_a_harness_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events, stats = run_worker(monkeypatch, planted(KafkaError._FATAL, fatal=True, instances=99), "r-f2")
    assert not isinstance(stats, BaseException), stats
    assert stats.sent == 64 * MAX_INSTANCES < COUNT
    outcomes(events)
    lines = fatal_lines(events)
    assert len(lines) == MAX_INSTANCES
    assert f"{MAX_INSTANCES} instances failed: the stream ends at sequence {stats.sent}" in lines[-1].message


def test_an_error_that_is_not_fatal_still_fails_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    events, error = run_worker(monkeypatch, planted(KafkaError._STATE, fatal=False, instances=1), "r-f3")
    assert isinstance(error, WorkloadError)
    assert "planted by the test" in str(error)
    outcomes(events)  # its sends still resolved, the error is the harness's to report
    assert not fatal_lines(events)
