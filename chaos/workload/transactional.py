"""The transactional consume-transform-produce worker (docs/catalog.md O6).

One iteration: ``consume()`` a batch of the input topic (``isolation.level=read_committed``, no auto
commit), ``begin_transaction()``, produce each record's value and key unchanged to the output topic,
``send_offsets_to_transaction()`` with the next offsets of the batch and the consumer's group metadata,
``commit_transaction()``. Recorded: a :class:`Delivery` per input record, a :class:`TxnMarker` ``begin``
(after the call returns), then ``commit`` (``value_ids`` produced, ``offsets`` sent) or ``abort``.

Errors follow librdkafka's transactional API: ``txn_requires_abort()`` → ``abort_transaction()`` and the
consumer is rewound to its committed offsets (the batch is processed again); a retriable commit error is
retried; anything else (fatal: e.g. fenced by a newer instance) records the commit as ``info`` and ends
the worker with :class:`~chaos.errors.WorkloadError`.

The worker runs in a child process (:class:`TransactionalWorker`, ``python -m
chaos.workload.transactional``) so that it can crash for real: :meth:`~ChildProcess.crash` SIGKILLs it at
any moment, and ``crash_in_txn=n`` makes it SIGKILL itself inside its n-th transaction, after the records
were produced and flushed to the log but before the commit. A restart with the same ``transactional.id``
calls ``init_transactions()``, which fences the dead instance and aborts its open transaction.

``TxnWorkerSpec(transactional=False)`` is the same loop without transactions — O6's vulnerable,
at-least-once transform: produce the batch (idempotent producer, no ``transactional.id``), ``flush()``,
then commit the batch's offsets with the consumer (``commit(asynchronous=False)``, recorded as a
:class:`Commit`). ``crash_in_txn=n`` SIGKILLs it in its n-th batch after the flush, before the commit: the
records are in the output, the offsets are not committed, and the next owner produces the batch again.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar, cast

from confluent_kafka import Consumer, KafkaException, Message, Producer, TopicPartition

from chaos.errors import ConfigError, WorkloadError
from chaos.run.context import RunContext
from chaos.run.events import (
    NAME_PATTERN,
    ClientLog,
    Delivery,
    Outcome,
    PartitionOffset,
    TxnAction,
    TxnMarker,
)
from chaos.workload.common import (
    ClientLogBridge,
    Sink,
    child_payload,
    error_name,
    error_text,
    kafka_error,
    member_fields,
    message_value_id,
    record_replaced,
)
from chaos.workload.configs import ConfigItems, config_items, consumer_layers, producer_layers
from chaos.workload.consumer import (
    ChildProcess,
    Processing,
    commit_sync,
    next_offsets,
    partition_offsets,
    rebalance_callbacks,
)
from chaos.workload.effective import ClientConfig, announce

T = TypeVar("T")
COMMIT_RETRIES = 3
HANG_MARGIN_S = 10.0
"""How long past its own timeout a transactional call may block before the instance is given up: librdkafka's
``send_offsets_to_transaction()`` ignores its timeout while the group's coordinator is down (librdkafka
issues 5456 and 5511; RN1 mixed, a crashed coordinator: blocked for good)."""


def bounded(call: Callable[[], T], timeout_s: float, what: str) -> T:
    """``call()`` on a thread of its own, waited for at most ``timeout_s``: a client call that ignores its
    own timeout raises :class:`~chaos.errors.WorkloadError` here (the instance is then given up, the thread
    and its client left to the process's exit) instead of hanging the worker."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True, name=f"bounded-{what}")
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise WorkloadError(f"{what} blocked past its own timeout: given up after {timeout_s:.0f} s")
    if "error" in box:
        raise box["error"]
    return cast(T, box.get("value"))


@dataclass(frozen=True)
class TxnWorkerSpec:
    """One transactional worker of the run's group: it reads ``input_topic`` and writes ``output_topic``
    (``None``: the run's topic). Its clients use the run's client profile — ``transactional`` (the default)
    needs a transactional one (e.g. ``TRANSACTIONAL``), ``transactional=False`` (the at-least-once
    transform) a non-transactional one — with ``consumer_overrides`` / ``producer_overrides`` on top.
    ``transactional.id`` is ``chaos-<name>``: a restart under the same name fences the previous instance.
    ``api_timeout_s`` ``None`` is the time profile's API timeout. ``processing``: the injected processing
    cost, as a group member's — per record and per batch inside the open transaction, and in
    ``on_assign``. ``restarts``: how many times an error that ends the worker (an unretriable commit, an
    ``init_transactions()`` that timed out, a fatal client error) starts it again in the same process — both
    clients closed, new ones built, the same ``transactional.id`` (its ``init_transactions()`` aborts what
    the last left open; the consumer resumes at the group's committed offsets), as an application's
    supervisor would; each restart recorded (:func:`~chaos.workload.common.record_replaced`). ``0``: the
    error ends the worker."""

    name: str
    input_topic: str
    output_topic: str | None = None
    batch_size: int = 50
    poll_timeout_s: float = 0.5
    duration_s: float = 120.0
    api_timeout_s: float | None = None
    crash_in_txn: int | None = None
    transactional: bool = True
    consumer_overrides: ConfigItems = ()
    producer_overrides: ConfigItems = ()
    processing: Processing = field(default_factory=Processing)
    restarts: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.restarts, int) or not 0 <= self.restarts <= 100:
            raise ConfigError(f"TxnWorkerSpec.restarts: expected 0..100; got {self.restarts!r}")
        if not isinstance(self.processing, Processing):
            raise ConfigError(f"TxnWorkerSpec.processing: expected a Processing; got {self.processing!r}")
        if not isinstance(self.name, str) or re.fullmatch(NAME_PATTERN, self.name) is None:
            raise ConfigError(f"TxnWorkerSpec.name: expected [A-Za-z0-9_.-]{{1,128}}; got {self.name!r}")
        if not self.input_topic or (self.output_topic is not None and not self.output_topic):
            raise ConfigError("TxnWorkerSpec: expected an input_topic, and an output_topic or None")
        if not 1 <= self.batch_size <= 10_000:
            raise ConfigError(f"TxnWorkerSpec.batch_size: expected 1..10000; got {self.batch_size!r}")
        timeout_ok = self.api_timeout_s is None or self.api_timeout_s > 0
        if not 0 < self.poll_timeout_s <= 10 or not self.duration_s > 0 or not timeout_ok:
            raise ConfigError(
                "TxnWorkerSpec: expected poll_timeout_s in (0, 10], duration_s > 0, api_timeout_s > 0 or None"
            )
        if self.crash_in_txn is not None and self.crash_in_txn < 1:
            raise ConfigError(
                f"TxnWorkerSpec.crash_in_txn: expected a transaction number >= 1; got {self.crash_in_txn}"
            )
        for attr in ("consumer_overrides", "producer_overrides"):
            object.__setattr__(self, attr, config_items("TxnWorkerSpec", attr, getattr(self, attr)))

    def consumer_settings(self, context: RunContext) -> dict[str, Any]:
        """The input consumer's configuration: read_committed, no auto commit, no auto offset store."""
        return dict(self.consumer_client(context).settings)

    def producer_settings(self, context: RunContext) -> dict[str, Any]:
        """The output producer's configuration (with ``transactional.id`` when transactional)."""
        return dict(self.producer_client(context).settings)

    def consumer_client(self, context: RunContext) -> ClientConfig:
        """:meth:`consumer_settings` with the origin of every key (the effective configuration)."""
        self._check(context)
        layers = consumer_layers(
            context.client,
            context.bootstrap_servers,
            self.name,
            context.group,
            context.time,
            dict(self.consumer_overrides),
            owner=f"consumer overrides of transform {self.name}",
        )
        layers.put(
            "transactional worker: read_committed, offsets committed by the worker",
            {
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
            },
        )
        return layers.client(self.name, "transform_consumer", context.client.name)

    def producer_client(self, context: RunContext) -> ClientConfig:
        """:meth:`producer_settings` with the origin of every key (the effective configuration)."""
        self._check(context)
        return producer_layers(
            context.client,
            context.bootstrap_servers,
            self.name,
            context.time,
            dict(self.producer_overrides),
            owner=f"producer overrides of transform {self.name}",
        ).client(self.name, "transform_producer", context.client.name)

    def _check(self, context: RunContext) -> None:
        client = context.client
        if client.transactional != self.transactional:
            raise ConfigError(
                f"TxnWorkerSpec {self.name}: the run's client profile {client.name!r} is "
                f"{'' if client.transactional else 'not '}transactional; pass transactional="
                f"{client.transactional}, or hand the worker dataclasses.replace(context, client=...)"
            )

    def to_data(self) -> dict[str, Any]:
        data = asdict(self)
        for attr in ("consumer_overrides", "producer_overrides"):
            data[attr] = [list(p) for p in getattr(self, attr)]
        return data

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> TxnWorkerSpec:
        return cls(**{**data, "processing": Processing(**data.get("processing", {}))})


def _rewind(consumer: Consumer, timeout_s: float) -> None:
    """Seek every assigned partition back to its committed offset (or the beginning if none)."""
    assignment = consumer.assignment()
    if not assignment:
        return
    for tp in consumer.committed(assignment, timeout=timeout_s):
        target = tp.offset if tp.offset >= 0 else -2  # OFFSET_BEGINNING
        consumer.seek(TopicPartition(tp.topic, tp.partition, target))


def run_txn_worker(context: RunContext, spec: TxnWorkerSpec, stop: threading.Event) -> int:
    """Run the worker until ``stop`` is set or ``duration_s`` passes, restarted after an error at most
    ``spec.restarts`` times; returns the transactions committed."""
    deadline = time.monotonic() + spec.duration_s
    committed = 0
    for instance in range(1, spec.restarts + 2):
        counter = [0]
        try:
            _run_instance(context, spec, stop, deadline, counter)
            return committed + counter[0]
        except (KafkaException, WorkloadError) as exc:
            committed += counter[0]
            if instance > spec.restarts or stop.is_set():
                raise
            record_replaced(
                context.sink,
                context.run_id,
                spec.name,
                exc,
                f"instance {instance} ended by {error_text(exc)}; its clients were closed, a new instance "
                f"started (restart {instance} of at most {spec.restarts})",
            )
    raise AssertionError("unreachable")  # pragma: no cover


def _run_instance(
    context: RunContext, spec: TxnWorkerSpec, stop: threading.Event, deadline: float, committed: list[int]
) -> None:
    """One instance of the worker (its two clients) until ``stop`` or ``deadline``; ``committed[0]``
    counts its commits."""
    sink, run_id = context.sink, context.run_id
    output = spec.output_topic or context.topic
    logs = ClientLogBridge(sink, run_id, spec.name)
    pconf = spec.producer_settings(context)
    cconf = spec.consumer_settings(context)
    tid = str(pconf.get("transactional.id", ""))
    timeout = spec.api_timeout_s or context.time.api_timeout_s
    pconf.update(logs.callbacks())
    producer = Producer(pconf)
    if spec.transactional:
        try:
            init_transactions(producer, timeout, sink, run_id, spec.name, tid)
        except BaseException:
            logs.detach()
            raise
    cconf.update(logs.callbacks())
    consumer = Consumer(cconf)

    def common() -> dict[str, Any]:
        return member_fields(run_id, spec.name, context.group, consumer)

    marker = TxnMarkers(sink, run_id, spec.name, tid)
    txns = 0
    try:
        slow_assign = spec.processing.on_assign_s
        consumer.subscribe(
            [spec.input_topic],
            **rebalance_callbacks(sink, common, (lambda: stop.wait(slow_assign)) if slow_assign else None),
        )
        while not stop.is_set() and time.monotonic() < deadline:
            messages = consumer.consume(num_messages=spec.batch_size, timeout=spec.poll_timeout_s)
            records = _records(run_id, spec.name, sink, messages)
            if not records:
                continue
            txns += 1
            if spec.transactional:
                producer.begin_transaction()
                marker("begin")
            base = common()
            value_ids: list[str] = []
            for msg in records:
                raw_key = msg.key()
                vid = message_value_id(msg)
                sink(
                    Delivery(
                        topic=msg.topic() or spec.input_topic,
                        partition=msg.partition() or 0,
                        offset=msg.offset() or 0,
                        value_id=vid,
                        key=raw_key.decode("utf-8", "replace") if raw_key is not None else None,
                        **base,
                    )
                )
                producer.produce(output, value=msg.value(), key=raw_key, headers=msg.headers())
                if vid is not None:
                    value_ids.append(vid)
                if spec.processing.per_record_s:
                    stop.wait(spec.processing.per_record_s)
            if spec.processing.per_batch_s:
                stop.wait(spec.processing.per_batch_s)
            if spec.crash_in_txn == txns:
                producer.flush(timeout)  # the records are in the log, the transaction is open
                os.kill(os.getpid(), signal.SIGKILL)
            offsets = next_offsets(records)
            if not spec.transactional:
                _commit_plain(producer, consumer, offsets, timeout, sink, common)
                committed[0] += 1
            elif _commit(producer, consumer, offsets, timeout, marker, value_ids):
                committed[0] += 1
            else:
                _rewind(consumer, timeout)
    finally:
        try:
            bounded(consumer.close, timeout + HANG_MARGIN_S, "consumer close")
            producer.flush(timeout)
        finally:
            logs.detach()


def _records(run_id: str, process: str, sink: Sink, messages: Sequence[Message]) -> list[Message]:
    records = []
    for msg in messages:
        err = msg.error()
        if err is None:
            records.append(msg)
            continue
        sink(
            ClientLog(
                run_id=run_id,
                process=process,
                level="error",
                message=err.str(),
                facility="CONSUME",
                error=err.name(),
                retriable=err.retriable(),
                fatal=err.fatal(),
            )
        )
    return records


def _commit_plain(
    producer: Producer,
    consumer: Consumer,
    offsets: list[TopicPartition],
    timeout: float,
    sink: Sink,
    common: Callable[[], dict[str, Any]],
) -> None:
    """The at-least-once transform's commit: every output record delivered, then the input offsets."""
    remaining = producer.flush(timeout)
    if remaining:
        raise WorkloadError(f"{remaining} output records not delivered within {timeout} s")
    commit_sync(consumer, offsets, sink, common)


def _commit(
    producer: Producer,
    consumer: Consumer,
    offsets: list[TopicPartition],
    timeout: float,
    marker: TxnMarkers,
    value_ids: list[str],
) -> bool:
    """Send the offsets and commit; True if committed, False if aborted (the caller rewinds)."""
    return end_transaction(
        producer,
        timeout,
        marker,
        value_ids,
        partition_offsets(offsets),
        lambda: bounded(
            lambda: producer.send_offsets_to_transaction(
                offsets, consumer.consumer_group_metadata(), timeout
            ),
            timeout + HANG_MARGIN_S,
            "send_offsets_to_transaction",
        ),
    )


class TxnMarkers:
    """Records the :class:`TxnMarker` events of one transactional producer (``process``,
    ``transactional_id``): call it with the action, outcome, the values and offsets of the transaction, and
    the exception that ended it (its name and text become ``error`` / ``message``)."""

    def __init__(self, sink: Sink, run_id: str, process: str, transactional_id: str) -> None:
        self._sink = sink
        self._run_id = run_id
        self.process = process
        self.transactional_id = transactional_id

    def __call__(
        self,
        action: TxnAction,
        outcome: Outcome = "ok",
        value_ids: Sequence[str] = (),
        offsets: tuple[PartitionOffset, ...] = (),
        exc: BaseException | None = None,
    ) -> None:
        self._sink(
            TxnMarker(
                run_id=self._run_id,
                process=self.process,
                action=action,
                transactional_id=self.transactional_id,
                outcome=outcome,
                value_ids=tuple(value_ids),
                offsets=offsets,
                error=error_name(exc) if exc is not None else None,
                message=error_text(exc) if exc is not None else None,
            )
        )


def init_transactions(
    producer: Producer, timeout: float, sink: Sink, run_id: str, process: str, transactional_id: str
) -> None:
    """``init_transactions()`` (it fences earlier instances of the id and aborts their open transaction),
    recorded as a ``TXN_INIT`` client log line with its duration."""
    started = time.monotonic()
    producer.init_transactions(timeout)
    took_ms = (time.monotonic() - started) * 1000
    sink(
        ClientLog(
            run_id=run_id,
            process=process,
            level="info",
            facility="TXN_INIT",
            message=f"init_transactions({transactional_id}) returned in {took_ms:.0f} ms",
        )
    )


def end_transaction(
    producer: Producer,
    timeout: float,
    marker: TxnMarkers,
    value_ids: Sequence[str],
    offsets: tuple[PartitionOffset, ...] = (),
    before_commit: Callable[[], object] | None = None,
) -> bool:
    """Commit the open transaction (``before_commit`` first, until it succeeded once: e.g. sending the
    consumer's offsets — a commit after it failed would commit the outputs without the inputs' offsets);
    True if committed, False if it had to be aborted (``txn_requires_abort``), both recorded. A retriable
    error is retried (:data:`COMMIT_RETRIES` attempts); any other error, or a call blocked
    :data:`HANG_MARGIN_S` past its timeout (:func:`bounded`), is recorded as a commit of outcome ``info`` (it
    may or may not have happened) and raised as :class:`~chaos.errors.WorkloadError`."""
    pending = before_commit
    for attempt in range(COMMIT_RETRIES):
        try:
            if pending is not None:  # again after a retriable failure: never commit without it
                pending()
                pending = None
            bounded(
                lambda: producer.commit_transaction(timeout), timeout + HANG_MARGIN_S, "commit_transaction"
            )
        except KafkaException as exc:
            err = kafka_error(exc)
            if err is not None and err.txn_requires_abort():
                producer.abort_transaction(timeout)
                marker("abort", "ok", value_ids, offsets, exc)  # error names the cause
                return False
            if err is not None and err.retriable() and attempt + 1 < COMMIT_RETRIES:
                continue
            marker("commit", "info", value_ids, offsets, exc)  # the commit may or may not have happened
            raise WorkloadError(f"commit_transaction failed: {error_text(exc)}") from exc
        except WorkloadError as exc:  # a call that blocked past its timeout (bounded): given up
            marker("commit", "info", value_ids, offsets, exc)
            raise
        marker("commit", "ok", value_ids, offsets)
        return True
    raise AssertionError("unreachable")  # pragma: no cover


class TransactionalWorker(ChildProcess):
    """The worker in a child process; events come back over a pipe into the context's sink (see
    :class:`ChildProcess`). A spec that does not fit the context's client profile raises here.

    ``stop()`` ends it gracefully (the current transaction completes); ``crash()`` SIGKILLs it.
    """

    module = "chaos.workload.transactional"

    def __init__(self, context: RunContext, spec: TxnWorkerSpec) -> None:
        # refuse a mismatched profile or a misspelled setting in the parent, not in the child; the child
        # builds these very dicts (same spec, same context), which the run records
        announce(context, spec.producer_client(context), spec.consumer_client(context))
        super().__init__(spec.name, child_payload(context, spec.to_data()), context.sink)
        self.spec = spec
        self.context = context


def main() -> int:
    from chaos.workload.member_child import serve

    return serve(lambda context, spec, stop: run_txn_worker(context, TxnWorkerSpec.from_data(spec), stop))


if __name__ == "__main__":
    sys.exit(main())
