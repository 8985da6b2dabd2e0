"""The transactional producer (chaos.workload.txn_producer) without a broker: its spec's validation, and what
it records around a fake librdkafka producer — markers and sends in the order the audit pairs them."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from chaos.errors import ConfigError, WorkloadError
from chaos.history import ClientLog, Event, SendInvoke, SendOutcome, TxnMarker
from chaos.workload import (
    IDEMPOTENT,
    RunContext,
    TransactionalProducer,
    TxnProducerSpec,
    TxnProducerStats,
    run_txn_producer,
)
from chaos.workload import txn_producer as module
from tests.unit.workload.test_workload_specs import Collect, EchoChild
from tests.unit.workload.test_workload_specs import context as base_context

NAME = "txn-producer-0"


def context(events: list[Event], **changes: Any) -> RunContext:
    """The unit tests' context (transactional client profile) with ``events`` as its sink."""
    return base_context(sink=events.append, **changes)


def spec(**options: Any) -> TxnProducerSpec:
    return TxnProducerSpec(**{"name": NAME, "rate": None, "count": 6, "txn_size": 3, **options})


# ---- the spec ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"txn_size": 0}, r"TxnProducerSpec\.txn_size: expected 1\.\.10000"),
        ({"txn_size": 2.5}, r"txn_size"),
        ({"api_timeout_s": 0}, r"TxnProducerSpec\.api_timeout_s"),
        ({"crash_in_txn": 0}, r"crash_in_txn: expected a transaction number >= 1"),
        ({"freeze_in_txn": -1}, r"freeze_in_txn: expected a transaction number >= 1"),
        ({"crash_in_txn": 3}, r"crash_in_txn=3: count=6 in transactions of txn_size=3 makes only 2"),
        ({"crash_in_txn": 2, "freeze_in_txn": 2}, r"both name transaction 2"),
        ({"rate": 0}, r"TxnProducerSpec\.rate"),
        ({"count": None, "duration_s": None}, r"TxnProducerSpec: set count or duration_s"),
        ({"name": "bad name"}, r"TxnProducerSpec\.name"),
        ({"overrides": (("on_delivery", "x"),)}, r"set by the workload itself"),
        ({"abort_rate": 1.0}, r"abort_rate: expected the share of transactions to abort on purpose"),
        ({"abort_rate": -0.1}, r"abort_rate"),
        ({"abort_txns": (0,)}, r"abort_txns: expected transaction numbers >= 1"),
        ({"abort_txns": 3}, r"abort_txns"),
    ],
)
def test_spec_refuses_bad_values_naming_the_field(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        spec(**options)


def test_spec_round_trips_and_derives_a_transactional_id_per_name() -> None:
    built = spec(crash_in_txn=2, freeze_in_txn=1, overrides={"linger.ms": 50})
    assert TxnProducerSpec.from_data(built.to_data()) == built
    settings = built.client_config(context([])).settings
    assert settings["transactional.id"] == f"chaos-{NAME}"
    assert settings["linger.ms"] == 50
    assert int(settings["message.timeout.ms"]) <= int(settings["transaction.timeout.ms"])
    # a new instance under another name takes over the id: it fences the old one
    other = spec(name="txn-producer-1", overrides={"transactional.id": f"chaos-{NAME}"})
    assert other.client_config(context([])).settings["transactional.id"] == f"chaos-{NAME}"


def test_a_profile_that_is_not_transactional_is_refused_before_any_process_starts() -> None:
    with pytest.raises(ConfigError, match="'idempotent' is not transactional"):
        TransactionalProducer(context([], client=IDEMPOTENT), spec())


# ---- recording, around a fake producer ----------------------------------------------------------------


@dataclass
class FakeMessage:
    raw: bytes
    where: int
    at: int

    def value(self) -> bytes:
        return self.raw

    def partition(self) -> int:
        return self.where

    def offset(self) -> int:
        return self.at


@dataclass
class FakeProducer:
    """librdkafka's transactional API as the producer uses it: produce() queues, poll()/flush() deliver
    (every record acknowledged, one partition), commit_transaction() answers from ``commits`` (an exception
    to raise, or None), the calls are kept."""

    config: dict[str, Any]
    commits: list[BaseException | None] = field(default_factory=list)
    begins: list[BaseException | None] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    queue: list[tuple[bytes, Any]] = field(default_factory=list)
    offset: int = 0

    def init_transactions(self, timeout: float) -> None:
        self.calls.append("init")

    def begin_transaction(self) -> None:
        self.calls.append("begin")
        if self.begins and (error := self.begins.pop(0)) is not None:
            raise error

    def produce(self, topic: str, value: bytes, key: bytes, on_delivery: Any, headers: Any = None) -> None:
        self.calls.append("produce")
        self.queue.append((value, on_delivery))

    def _deliver(self) -> None:
        queued, self.queue = self.queue, []
        for raw, callback in queued:
            callback(None, FakeMessage(raw, 0, self.offset))
            self.offset += 1

    def poll(self, timeout: float) -> int:
        self._deliver()
        return 0

    def flush(self, timeout: float) -> int:
        self.calls.append("flush")
        self._deliver()
        return 0

    def commit_transaction(self, timeout: float) -> None:
        self.calls.append("commit")
        self._deliver()
        if self.commits and (error := self.commits.pop(0)) is not None:
            raise error

    def abort_transaction(self, timeout: float) -> None:
        self.calls.append("abort")

    def purge(self, **_: bool) -> None:
        self.calls.append("purge")


def failure(code: int, **flags: bool) -> KafkaException:
    return KafkaException(KafkaError(code, "planted", **flags))


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeProducer:
    """The fake every run_txn_producer() of the test builds (configure its answers before the run)."""
    made = FakeProducer({})

    def build(config: dict[str, Any]) -> FakeProducer:
        made.config = config
        return made

    monkeypatch.setattr(module, "Producer", build)
    return made


def run(events: list[Event], built: TxnProducerSpec, stop: threading.Event | None = None) -> TxnProducerStats:
    return run_txn_producer(context(events), built, stop or threading.Event())


def sequence(events: list[Event]) -> list[str]:
    """The history's shape: txn:<action>:<outcome>, invoke:<seq>, ok:<seq>, log:<facility>."""
    shape = []
    for e in events:
        if isinstance(e, TxnMarker):
            shape.append(f"txn:{e.action}:{e.outcome}")
        elif isinstance(e, SendInvoke):
            shape.append(f"invoke:{e.seq}")
        elif isinstance(e, SendOutcome):
            shape.append(f"{e.outcome}:{e.value_id.rsplit(':', 1)[1]}")
        elif isinstance(e, ClientLog) and e.facility:
            shape.append(f"log:{e.facility}")
    return shape


def markers(events: list[Event]) -> list[TxnMarker]:
    return [e for e in events if isinstance(e, TxnMarker)]


def ids(*seqs: int) -> tuple[str, ...]:
    return tuple(f"run1:{NAME}:{s}" for s in seqs)


def test_each_transaction_is_begin_sends_reports_then_a_commit_listing_its_values(fake: FakeProducer) -> None:
    events: list[Event] = []
    stats = run(events, spec())
    assert stats == TxnProducerStats(transactions=2, committed=2, aborted=0)
    assert sequence(events) == [
        "log:TXN_INIT",
        *("txn:begin:ok", "invoke:0", "invoke:1", "invoke:2", "ok:0", "ok:1", "ok:2", "txn:commit:ok"),
        *("txn:begin:ok", "invoke:3", "invoke:4", "invoke:5", "ok:3", "ok:4", "ok:5", "txn:commit:ok"),
    ]
    assert [m.value_ids for m in markers(events)] == [(), ids(0, 1, 2), (), ids(3, 4, 5)]
    # the audit pairs a send with a transaction by process: the markers name the sends' process and producer
    invokes = [e for e in events if isinstance(e, SendInvoke)]
    assert {m.process for m in markers(events)} == {e.process for e in invokes} == {NAME}
    assert {e.producer for e in invokes} == {NAME}
    assert {m.transactional_id for m in markers(events)} == {f"chaos-{NAME}"}
    assert fake.calls[:2] == ["init", "begin"]
    assert fake.calls.count("flush") == 3  # one per transaction before its commit, one at close
    assert fake.config["transactional.id"] == f"chaos-{NAME}"


def test_an_abortable_commit_is_aborted_and_the_next_transaction_sends_new_values(fake: FakeProducer) -> None:
    fake.commits = [failure(KafkaError._STATE, txn_requires_abort=True)]
    events: list[Event] = []
    stats = run(events, spec())
    assert stats == TxnProducerStats(transactions=2, committed=1, aborted=1)
    _, end, _, commit = markers(events)
    assert (end.action, end.outcome, end.error, end.value_ids) == ("abort", "ok", "_STATE", ids(0, 1, 2))
    assert (commit.action, commit.outcome, commit.value_ids) == ("commit", "ok", ids(3, 4, 5))
    assert fake.calls.count("abort") == 1


def test_a_transaction_aborted_on_purpose_is_announced_then_aborted_after_its_flush(
    fake: FakeProducer,
) -> None:
    events: list[Event] = []
    stats = run(events, spec(abort_txns=(1,)))
    assert stats == TxnProducerStats(transactions=2, committed=1, aborted=1)
    _, end, _, commit = markers(events)
    assert (end.action, end.outcome, end.error, end.value_ids) == ("abort", "ok", None, ids(0, 1, 2))
    assert (commit.action, commit.value_ids) == ("commit", ids(3, 4, 5))
    assert fake.calls.count("abort") == 1
    assert fake.calls.index("flush") < fake.calls.index("abort")
    order = sequence(events)
    assert order.index("log:TXN_ABORT") == order.index("ok:2") + 1


def test_the_deliberate_aborts_drawn_from_a_seed_are_the_same_every_time() -> None:
    drawn = [n for n in range(1, 1001) if spec(abort_rate=0.1, abort_seed=5).aborts(n)]
    assert drawn == [n for n in range(1, 1001) if spec(abort_rate=0.1, abort_seed=5).aborts(n)]
    assert 60 <= len(drawn) <= 140  # about 10 % of 1000
    assert drawn != [n for n in range(1, 1001) if spec(abort_rate=0.1, abort_seed=6).aborts(n)]
    assert not any(spec().aborts(n) for n in range(1, 1001))


def test_a_retriable_commit_error_is_retried(fake: FakeProducer) -> None:
    fake.commits = [failure(KafkaError._TIMED_OUT, retriable=True), None]
    events: list[Event] = []
    assert run(events, spec(count=3)) == TxnProducerStats(transactions=1, committed=1, aborted=0)
    assert fake.calls.count("commit") == 2
    assert [m.action for m in markers(events)] == ["begin", "commit"]


def test_a_fatal_commit_error_is_recorded_with_its_name_and_ends_the_producer(fake: FakeProducer) -> None:
    fake.commits = [failure(KafkaError._FENCED, fatal=True)]
    events: list[Event] = []
    stats = run(events, spec())
    assert stats == TxnProducerStats(transactions=1, committed=0, aborted=0, error="_FENCED")
    end = markers(events)[-1]
    assert (end.action, end.outcome, end.error, end.value_ids) == ("commit", "info", "_FENCED", ids(0, 1, 2))
    assert fake.calls.count("begin") == 1  # no transaction after the fence
    assert len([e for e in events if isinstance(e, SendInvoke)]) == 3


def test_a_failed_begin_is_recorded_and_ends_the_producer(fake: FakeProducer) -> None:
    fake.begins = [failure(KafkaError._FENCED, fatal=True)]
    events: list[Event] = []
    assert run(events, spec()) == TxnProducerStats(transactions=0, committed=0, aborted=0, error="_FENCED")
    assert [(m.action, m.outcome, m.error) for m in markers(events)] == [("begin", "fail", "_FENCED")]
    assert not [e for e in events if isinstance(e, SendInvoke)]


class Killed(BaseException):
    """Stands for the SIGKILL: nothing of the producer runs after it but its `finally`."""


def test_crash_in_txn_kills_after_the_flush_before_the_commit(
    fake: FakeProducer, monkeypatch: pytest.MonkeyPatch
) -> None:
    signals: list[int] = []

    def kill(signum: int) -> None:
        signals.append(signum)
        if signum == signal.SIGKILL:
            raise Killed

    monkeypatch.setattr(module, "_signal_self", kill)
    events: list[Event] = []
    with pytest.raises(Killed):
        run(events, spec(crash_in_txn=2))
    assert signals == [signal.SIGKILL]
    assert sequence(events)[-9:] == [
        "txn:commit:ok",
        *("txn:begin:ok", "invoke:3", "invoke:4", "invoke:5", "ok:3", "ok:4", "ok:5", "log:TXN_CRASH"),
    ]
    assert fake.calls.count("commit") == 1  # the killed transaction was never committed
    assert markers(events)[-1].action == "begin"  # the audit sees an attempt with no end: indeterminate


def test_freeze_in_txn_stops_itself_with_the_transaction_open_then_commits_when_resumed(
    fake: FakeProducer, monkeypatch: pytest.MonkeyPatch
) -> None:
    signals: list[int] = []
    monkeypatch.setattr(module, "_signal_self", signals.append)
    events: list[Event] = []
    assert run(events, spec(freeze_in_txn=1)).committed == 2
    assert signals == [signal.SIGSTOP]
    shape = sequence(events)
    assert shape.index("log:TXN_FREEZE") == shape.index("ok:2") + 1 == shape.index("txn:commit:ok") - 1
    freeze = next(e for e in events if isinstance(e, ClientLog) and e.facility == "TXN_FREEZE")
    assert "transaction 1" in freeze.message
    assert "3 sends flushed" in freeze.message


def test_a_stop_commits_the_open_transaction_with_what_it_sent(fake: FakeProducer) -> None:
    stop = threading.Event()
    events: list[Event] = []
    original = fake.produce

    def produce_then_stop(
        topic: str, value: bytes, key: bytes, on_delivery: Any, headers: Any = None
    ) -> None:
        original(topic, value, key, on_delivery, headers)
        if value.endswith(b":1"):
            stop.set()

    fake.produce = produce_then_stop  # type: ignore[method-assign]
    stats = run(events, spec(), stop)
    assert stats == TxnProducerStats(transactions=1, committed=1, aborted=0)
    assert markers(events)[-1].value_ids == ids(0, 1)


# ---- a child process frozen and thawed --------------------------------------------------------------


def state(pid: int) -> str:
    """The process state letter of /proc/<pid>/stat (``T``: stopped)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0]


def wait_state(pid: int, wanted: set[str], timeout_s: float = 5.0) -> str:
    """The process's state once it is one of ``wanted`` (or whatever it is after ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while (now := state(pid)) not in wanted and time.monotonic() < deadline:
        time.sleep(0.02)
    return now


@contextmanager
def frozen_echo() -> Iterator[tuple[EchoChild, int]]:
    """An echo child that has written its event and is frozen (state ``T``); SIGKILLed after if it runs."""
    sink = Collect()
    child = EchoChild("echo", "1", sink).start()
    try:
        sink.wait_for(1)
        assert child.pid is not None
        child.pause()
        assert wait_state(child.pid, {"T"}) == "T"
        yield child, child.pid
    finally:
        if child.running:
            child.crash()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_a_paused_child_is_stopped_resumes_and_still_stops_gracefully() -> None:
    with frozen_echo() as (child, pid):
        child.resume()
        assert wait_state(pid, {"S", "R"}) in {"S", "R"}
        child.pause()
        assert wait_state(pid, {"T"}) == "T"
        child.stop(timeout_s=10.0)  # SIGTERM reaches a frozen child: stop() thaws it
    assert child.returncode == 0
    with pytest.raises(WorkloadError, match="not running"):
        child.resume()


FROZEN_STOPS = 10


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_frozen_children_stop_at_once_whichever_thread_takes_the_sigterm() -> None:
    """A frozen child's SIGTERM often lands on a thread other than its main one (numpy's OpenBLAS worker,
    here), whose wait the handler does not interrupt: before the wake-up watcher of ``stop_on_sigterm``,
    11 of 40 such stops waited out the child's 30 s ``stop.wait``. Each must now close within 3 s."""
    for _ in range(FROZEN_STOPS):
        with frozen_echo() as (child, _pid):
            child.stop(timeout_s=3.0)  # raises WorkloadError if it has not closed by then
        assert child.returncode == 0
