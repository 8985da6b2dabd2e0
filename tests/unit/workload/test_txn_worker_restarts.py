"""The transactional worker's supervision without a cluster: an error that ends an instance starts a new one
at most ``restarts`` times, each restart recorded; and a commit never goes out without the offsets whose
sending failed before it."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from chaos.errors import ConfigError, WorkloadError
from chaos.history import ClientLog, Event, TxnMarker
from chaos.workload import transactional
from chaos.workload.common import CLIENT_FATAL, CLIENT_RESTART
from chaos.workload.transactional import TxnMarkers, TxnWorkerSpec, bounded, end_transaction, run_txn_worker
from tests.unit.workload.test_workload_specs import context


def failing_instances(monkeypatch: pytest.MonkeyPatch, errors: list[BaseException]) -> list[int]:
    """``_run_instance`` replaced: each call commits 2 transactions, then raises the next of ``errors``
    (none left: returns). Returns the list the calls append to."""
    calls: list[int] = []

    def instance(context: Any, spec: Any, stop: Any, deadline: float, committed: list[int]) -> None:
        calls.append(len(calls) + 1)
        committed[0] += 2
        if errors:
            raise errors.pop(0)

    monkeypatch.setattr(transactional, "_run_instance", instance)
    return calls


def restarts(events: list[Event]) -> list[ClientLog]:
    return [e for e in events if isinstance(e, ClientLog) and e.facility in (CLIENT_FATAL, CLIENT_RESTART)]


def test_an_instance_ended_by_an_error_is_replaced_and_each_restart_recorded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    timed_out = KafkaException(KafkaError(KafkaError._TIMED_OUT, "init_transactions timed out"))
    fenced = KafkaException(KafkaError(KafkaError._FENCED, "fenced", fatal=True))
    calls = failing_instances(monkeypatch, [timed_out, fenced])
    events: list[Event] = []
    spec = TxnWorkerSpec("t-0", input_topic="in", restarts=3)
    assert run_txn_worker(context(sink=events.append), spec, threading.Event()) == 6
    assert calls == [1, 2, 3]
    first, second = restarts(events)
    assert (first.facility, first.level, first.error, first.fatal) == (
        CLIENT_RESTART,
        "warning",
        "_TIMED_OUT",
        False,
    )
    assert (second.facility, second.level, second.error, second.fatal) == (
        CLIENT_FATAL,
        "critical",
        "_FENCED",
        True,
    )
    assert "instance 1 ended by init_transactions timed out" in first.message
    assert "restart 2 of at most 3" in second.message


def test_past_its_restarts_or_with_none_the_error_ends_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    error = WorkloadError("commit_transaction failed: broken")
    failing_instances(monkeypatch, [error, error])
    events: list[Event] = []
    with pytest.raises(WorkloadError, match="broken"):
        run_txn_worker(context(sink=events.append), TxnWorkerSpec("t-0", "in", restarts=1), threading.Event())
    assert len(restarts(events)) == 1
    calls = failing_instances(monkeypatch, [error])
    with pytest.raises(WorkloadError):
        run_txn_worker(context(), TxnWorkerSpec("t-0", "in"), threading.Event())
    assert calls == [1]
    with pytest.raises(ConfigError, match=r"restarts: expected 0\.\.100"):
        TxnWorkerSpec("t-0", "in", restarts=-1)


class _Producer:
    """commit_transaction succeeds; what end_transaction calls is logged."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def commit_transaction(self, timeout: float) -> None:
        self.calls.append("commit")

    def abort_transaction(self, timeout: float) -> None:
        self.calls.append("abort")


def test_offsets_whose_sending_failed_are_sent_again_before_the_commit() -> None:
    producer = _Producer()
    failures = [KafkaException(KafkaError(KafkaError._TIMED_OUT, "offsets timed out", retriable=True))]

    def send_offsets() -> None:
        producer.calls.append("offsets")
        if failures:
            raise failures.pop()

    events: list[Event] = []
    marker = TxnMarkers(events.append, "r", "t-0", "chaos-t-0")
    assert end_transaction(producer, 1.0, marker, ["r:p:0"], (), send_offsets) is True  # type: ignore[arg-type]
    assert producer.calls == ["offsets", "offsets", "commit"]
    assert [(e.action, e.outcome) for e in events if isinstance(e, TxnMarker)] == [("commit", "ok")]


def test_a_call_that_ignores_its_timeout_is_given_up_and_the_commit_recorded_unknown() -> None:
    """librdkafka's send_offsets_to_transaction() blocks for good while the group's coordinator is down
    (librdkafka 5456): the worker gives the call up and records the commit as unknown, so the instance can
    be replaced instead of hanging the run."""
    release = threading.Event()
    producer = _Producer()
    events: list[Event] = []
    marker = TxnMarkers(events.append, "r", "t-0", "chaos-t-0")
    started = time.monotonic()
    with pytest.raises(WorkloadError, match="send_offsets blocked past its own timeout"):
        end_transaction(
            producer,  # type: ignore[arg-type]
            0.1,
            marker,
            ["r:p:0"],
            (),
            lambda: bounded(lambda: release.wait(30), 0.5, "send_offsets"),
        )
    assert time.monotonic() - started < 5
    assert producer.calls == []  # never committed without the offsets
    assert [(e.action, e.outcome) for e in events if isinstance(e, TxnMarker)] == [("commit", "info")]
    release.set()
    assert bounded(lambda: 7, 1.0, "quick") == 7
    with pytest.raises(ZeroDivisionError):
        bounded(lambda: 1 / 0, 1.0, "raises")
