"""The workload on the Java client (``org.apache.kafka:kafka-clients``) beside librdkafka.

The worker (:mod:`chaos.workload.java_build`: the project's own Java source, compiled per Kafka version)
runs as a child process the run supervises (:class:`~chaos.workload.consumer.ChildProcess`: SIGTERM to
stop, SIGKILL to crash, SIGSTOP to freeze; it dies with its parent) and writes the **same history events** as
the librdkafka workers: the audit does not know which client produced a history.

What the two clients share is decided once, on this side:

- the configuration: a profile's librdkafka keys become the Java client's
  (:mod:`chaos.workload.java_config`);
- a failed send's outcome: the worker reports the error's Kafka code name (``NOT_ENOUGH_REPLICAS``,
  ``REQUEST_TIMED_OUT`` for the Java client's ``TimeoutException``) or its exception class, and
  :class:`JavaChild` classifies it with :func:`chaos.workload.outcomes.classify_delivery_error`, the
  librdkafka worker's rule; a failed commit likewise (:data:`~chaos.workload.outcomes.COMMIT_UNKNOWN`);
- a delivered record's value id: read from its payload, or a tombstone's from its ``chaos-id`` header, by
  :func:`~chaos.workload.common.record_value_id`;
- the client's own log: its WARN and ERROR lines become ``client_log`` events (facility: the logger's
  class, e.g. ``NetworkClient``, ``Sender``, ``ConsumerCoordinator``), the symptoms' evidence.
"""

from __future__ import annotations

import json
import re
import signal
import threading
import time
from dataclasses import asdict
from typing import Any, Final

from chaos.errors import ConfigError, WorkloadError
from chaos.run.context import RunContext, Sink
from chaos.run.events import VALUE_ID_HEADER, ClientLog, Event, SendInvoke, SendOutcome
from chaos.workload.common import notice, payload_value_id, record_value_id
from chaos.workload.consumer import HASTY_CLOSE_S, ChildProcess, MemberSpec
from chaos.workload.effective import ClientConfig, announce
from chaos.workload.java_build import JavaWorker
from chaos.workload.java_config import JavaConfig, java_member_config, java_producer_config
from chaos.workload.outcomes import (
    COMMIT_UNKNOWN,
    JAVA_ERROR_NAMES,
    classify_delivery_error,
    classify_produce_exception,
)
from chaos.workload.producer import HASTY_FLUSH_S, ProducerSpec, ProducerStats, ProducerWorker
from chaos.workload.transactional import TxnWorkerSpec

CLIENTS: Final = ("librdkafka", "java")
"""The client implementations a run's workers may use."""
JVM_EXIT_S: Final = 5.0
"""What a stop allows beyond the flush or close: the JVM's shutdown after its client closed."""
MEMBER_CLOSE_S: Final = 30.0
"""How long a Java member's ``close()`` may take (its LeaveGroup, an auto strategy's last commit)."""


_LOG_LINE: Final = re.compile(r"^(TRACE|DEBUG|INFO|WARN|ERROR) ([\w.$]+) - (.*)$")
_LEVELS: Final = {"ERROR": "error", "WARN": "warning", "INFO": "info", "DEBUG": "debug", "TRACE": "debug"}


def client_log_of(line: str, run_id: str, process: str) -> ClientLog | None:
    """The ``client_log`` event of one slf4j-simple line of the Java client; None for other lines (a stack
    trace's frames, a configuration dump's rows)."""
    match = _LOG_LINE.match(line)
    if match is None:
        return None
    level, logger, message = match.groups()
    return ClientLog(
        run_id=run_id,
        process=process,
        level=_LEVELS[level],  # type: ignore[arg-type]
        facility=logger.rsplit(".", 1)[-1],
        message=message,
    )


class JavaChild(ChildProcess):
    """The worker's process: its rows completed (a failed send or commit classified, a delivery's value id
    read, an unknown member id or generation null), its log lines recorded."""

    clean_exits = (0, -signal.SIGTERM, 128 + signal.SIGTERM)  # a JVM ends a SIGTERM it handled with 143

    def __init__(
        self, name: str, payload: str, sink: Sink, worker: JavaWorker, run_id: str, *, single_attempt: bool
    ) -> None:
        super().__init__(name, payload, sink)
        self.worker = worker
        self.run_id = run_id
        self.single_attempt = single_attempt

    def command(self) -> list[str]:
        return self.worker.command()

    def row(self, row: dict[str, Any]) -> dict[str, Any]:
        sync = bool(row.pop("sync", False))
        kind = row.get("kind")
        if kind == "send_outcome" and row.get("outcome") is None:
            error = str(row.get("error"))
            classified = (
                classify_produce_exception(error)
                if sync
                else classify_delivery_error(
                    JAVA_ERROR_NAMES.get(error, error), single_attempt=self.single_attempt
                )
            )
            row["outcome"] = classified.outcome
            if classified.outcome == "fail":
                row["retriable"] = bool(row.get("retriable"))
                row["fatal"] = bool(row.get("fatal"))
        elif kind == "commit" and row.get("outcome") is None:
            row["outcome"] = "info" if row.get("error") in COMMIT_UNKNOWN else "fail"
        elif kind == "delivery":
            value = row.pop("value", None)
            header = row.pop("id_header", None)
            row["value_id"] = record_value_id(
                value.encode() if isinstance(value, str) else None,
                [(VALUE_ID_HEADER, header)] if isinstance(header, str) else None,
            )
        elif kind == "txn":
            ids = (payload_value_id(v.encode()) for v in row.pop("values", []) if isinstance(v, str))
            row["value_ids"] = [vid for vid in ids if vid is not None]
        return row

    def stderr_line(self, line: str) -> None:
        event = client_log_of(line, self.run_id, self.name)
        if event is not None and event.level in ("warning", "error"):
            self._sink(event)


def _announced(context: RunContext, librdkafka: ClientConfig, java: JavaConfig) -> None:
    announce(
        context,
        ClientConfig(
            librdkafka.process,
            librdkafka.role,
            f"{librdkafka.profile} (Java client)",
            java.settings,
            java.origins,
        ),
    )


def _payload(role: str, context: RunContext, name: str, java: JavaConfig | None, **fields: object) -> str:
    """The one JSON line the worker reads: role, run, name, its spec ``fields`` and its properties (a role
    with two clients passes each one's in ``fields`` instead)."""
    data: dict[str, object] = {"role": role, "run_id": context.run_id, "name": name, **fields}
    if java is not None:
        data["config"] = dict(java.settings)
    return json.dumps(data, separators=(",", ":"))


def _note_dropped(context: RunContext, name: str, java: JavaConfig) -> None:
    if java.dropped:
        left_out = "; ".join(f"{key} ({why})" for key, why in java.dropped.items())
        notice(context, name, "JAVA_CONFIG", f"left out for the Java client: {left_out}")


class JavaProducer:
    """A :class:`ProducerSpec`'s sends on the Java client (see the module docstring), with
    :class:`~chaos.workload.producer.ProducerWorker`'s interface: ``start()``, then ``join()`` or
    ``stop()``, ``stats()``. Start it once: it keeps no checkpoint. A spec with a ``traffic`` shape is
    refused (the worker sends bare value ids; ``keys`` it honours)."""

    def __init__(self, context: RunContext, spec: ProducerSpec, worker: JavaWorker) -> None:
        if spec.traffic is not None:
            raise ConfigError(
                f"producer {spec.name}: the Java client's worker sends only the bare value id with a key "
                f"k<seq % keys> (keys=N works); a traffic shape (sizes, headers, tombstones, key skew, "
                "keyless records, a rate pattern) is librdkafka's only\n  fix: run this producer without "
                "traffic=, or run the scenario on librdkafka (no --chaos-client java)"
            )
        self.spec = spec
        self.context = context
        self.topic = spec.topic or context.topic
        librdkafka = spec.client_config(context)
        self.java = java_producer_config(librdkafka)
        _announced(context, librdkafka, self.java)
        payload = _payload(
            "producer",
            context,
            spec.name,
            self.java,
            topic=self.topic,
            rate=spec.rate,
            count=spec.count,
            duration_s=spec.duration_s,
            keys=spec.keys,
            close_timeout_s=spec.flush_timeout_s,
        )
        self._counts = {"sent": 0, "ok": 0, "fail": 0, "info": 0}
        self._lock = threading.Lock()
        self._started = 0.0
        self._finished = 0.0
        self._child = JavaChild(
            spec.name,
            payload,
            self._record,
            worker,
            context.run_id,
            single_attempt=context.client.single_attempt,
        )

    @property
    def name(self) -> str:
        return self.spec.name

    def _record(self, event: Event) -> None:
        with self._lock:
            if isinstance(event, SendInvoke):
                self._counts["sent"] += 1
            elif isinstance(event, SendOutcome):
                self._counts[event.outcome] += 1
        self.context.sink(event)

    def start(self) -> JavaProducer:
        if self._started:
            raise WorkloadError(f"producer {self.name} already started; build a new JavaProducer")
        self._started = time.monotonic()
        _note_dropped(self.context, self.name, self.java)
        self._child.start()
        return self

    def stop(self, timeout_s: float | None = None, *, hasty: bool = False) -> ProducerStats:
        """SIGTERM: stop sending, flush within ``flush_timeout_s`` (``hasty``: killed after
        :data:`~chaos.workload.producer.HASTY_FLUSH_S`; its unacknowledged values keep no outcome)."""
        if not self._started:
            raise WorkloadError(f"producer {self.name} was never started")
        limit = HASTY_FLUSH_S + JVM_EXIT_S if hasty else (timeout_s or self.spec.flush_timeout_s + JVM_EXIT_S)
        try:
            self._child.stop(limit)
        except WorkloadError:
            if not hasty:
                raise
        return self._ended()

    def join(self, timeout_s: float | None = None) -> ProducerStats:
        """Wait for the sending to end by itself; raises :class:`WorkloadError` if it failed or runs on."""
        if not self._started:
            raise WorkloadError(f"producer {self.name} was never started")
        limit = timeout_s if timeout_s is not None else self._join_budget()
        code = self._child.wait(limit)
        if code is None:
            raise WorkloadError(f"producer {self.name} did not finish within {limit:.1f} s")
        if code not in self._child.clean_exits or self._child.error is not None:
            self._child.stop(1.0)  # raises with the child's stderr
        return self._ended()

    def _join_budget(self) -> float:
        # a send may block up to max.block.ms (60 s)
        return self.spec.sending_s() + self.spec.flush_timeout_s + JVM_EXIT_S + 60.0

    def _ended(self) -> ProducerStats:
        with self._lock:
            self._finished = self._finished or time.monotonic()
        return self.stats()

    def stats(self) -> ProducerStats:
        with self._lock:
            end = self._finished or time.monotonic()
            counts = dict(self._counts)
        elapsed = end - self._started if self._started else 0.0
        return ProducerStats(counts["sent"], counts["ok"], counts["fail"], counts["info"], elapsed)


def check_client(name: str) -> str:
    """``name`` when it is a client the harness runs (:data:`CLIENTS`), else a :class:`ConfigError`."""
    if name not in CLIENTS:
        raise ConfigError(f"client: expected one of {', '.join(CLIENTS)}; got {name!r}")
    return name


class JavaMember(JavaChild):
    """A :class:`~chaos.workload.consumer.MemberSpec`'s group member on the Java client, in a child process,
    with :class:`~chaos.workload.consumer.ProcessMember`'s interface: ``stop()`` closes it gracefully
    (LeaveGroup), ``crash()`` SIGKILLs it, ``pause()`` / ``resume()`` freeze it. Strategies
    ``commit_after``, ``commit_before`` and ``auto`` (its commits recorded by a consumer interceptor);
    ``store_after`` has no Java counterpart (the Java client keeps no offset store)."""

    def __init__(self, context: RunContext, spec: MemberSpec, worker: JavaWorker) -> None:
        if spec.strategy == "store_after":
            raise ConfigError(
                f"member {spec.name}: strategy store_after has no Java client counterpart (it keeps no "
                "offset store to commit from)\n  fix: use commit_after (the same commits, made by the "
                "worker), or run this member on librdkafka"
            )
        librdkafka = spec.client_config(context)
        self.java = java_member_config(librdkafka)
        _announced(context, librdkafka, self.java)
        payload = _payload(
            "member",
            context,
            spec.name,
            self.java,
            group=context.group,
            topic=spec.topic or context.topic,
            strategy=spec.strategy,
            batch_size=spec.batch_size,
            poll_timeout_s=spec.poll_timeout_s,
            duration_s=spec.duration_s,
            processing=asdict(spec.processing),
            record_delivery=spec.record_delivery,
            close_timeout_s=MEMBER_CLOSE_S,
        )
        super().__init__(
            spec.name,
            payload,
            context.sink,
            worker,
            context.run_id,
            single_attempt=context.client.single_attempt,
        )
        self.spec = spec
        self.context = context

    def start(self) -> JavaMember:
        _note_dropped(self.context, self.name, self.java)
        super().start()
        return self

    def stop(self, timeout_s: float = MEMBER_CLOSE_S + JVM_EXIT_S, *, hasty: bool = False) -> None:
        """SIGTERM: the member leaves its group (``hasty``: killed after
        :data:`~chaos.workload.consumer.HASTY_CLOSE_S`)."""
        super().stop(min(timeout_s, HASTY_CLOSE_S + JVM_EXIT_S) if hasty else timeout_s)

    def restart(self) -> JavaMember:
        self.stop()
        return self.start()


class JavaTransform(JavaChild):
    """A :class:`~chaos.workload.transactional.TxnWorkerSpec`'s consume-transform-produce worker on the Java
    client (role ``transform``: ``beginTransaction`` / ``sendOffsetsToTransaction`` / ``commitTransaction``,
    or the at-least-once transform without ``transactional``), in a child process, with
    :class:`~chaos.workload.transactional.TransactionalWorker`'s interface: ``stop()`` ends it after the
    transaction in hand, ``crash()`` SIGKILLs it, ``crash_in_txn`` makes it SIGKILL itself. Its transactional
    calls are bounded by ``max.block.ms`` = the spec's API timeout (librdkafka's take it as an argument)."""

    def __init__(self, context: RunContext, spec: TxnWorkerSpec, worker: JavaWorker) -> None:
        producer, consumer = spec.producer_client(context), spec.consumer_client(context)
        self.producer_java = java_producer_config(producer)
        self.consumer_java = java_member_config(consumer)
        _announced(context, producer, self.producer_java)
        _announced(context, consumer, self.consumer_java)
        timeout = spec.api_timeout_s or context.time.api_timeout_s
        self.close_timeout_s = 2 * timeout
        payload = _payload(
            "transform",
            context,
            spec.name,
            None,
            group=context.group,
            input_topic=spec.input_topic,
            output_topic=spec.output_topic or context.topic,
            batch_size=spec.batch_size,
            poll_timeout_s=spec.poll_timeout_s,
            duration_s=spec.duration_s,
            api_timeout_s=timeout,
            crash_in_txn=spec.crash_in_txn or 0,
            transactional=spec.transactional,
            processing=asdict(spec.processing),
            restarts=spec.restarts,
            close_timeout_s=self.close_timeout_s,
            consumer_config=dict(self.consumer_java.settings),
            producer_config=dict(self.producer_java.settings),
        )
        super().__init__(spec.name, payload, context.sink, worker, context.run_id, single_attempt=False)
        self.spec = spec
        self.context = context

    def start(self) -> JavaTransform:
        _note_dropped(self.context, self.name, self.producer_java)
        _note_dropped(self.context, self.name, self.consumer_java)
        super().start()
        return self

    def stop(self, timeout_s: float | None = None) -> None:
        """SIGTERM: the transaction in hand completes, both clients close (bounded by the API timeout)."""
        super().stop(timeout_s if timeout_s is not None else self.close_timeout_s + 2 * JVM_EXIT_S)


PROBE_EXIT_S: Final = 30.0
"""What a Java probe may take beyond its calls' timeouts: the JVM's start and the consumer's close."""


def java_startup_probe(
    context: RunContext,
    spec: MemberSpec,
    worker: JavaWorker,
    *,
    timeout_s: float,
    group: bool = False,
    topic: str | None = None,
) -> bool:
    """:func:`~chaos.workload.readers.startup_probe` on the Java client: a fresh ``KafkaConsumer`` with
    ``spec``'s configuration (the application's consumer, restarted; without ``group`` its ``group.id`` left
    out) calls ``partitionsFor(topic, T)`` — the call whose failure is "Timeout expired while fetching topic
    metadata" — then with ``group`` ``committed(every partition, T)``, each call a ``probe_call`` event of
    process ``spec.name`` (a failed one: the exception's class and message). Returns whether every call
    succeeded; never raises for the client's error."""
    if not timeout_s > 0:
        raise ConfigError(f"startup_probe.timeout_s: expected > 0; got {timeout_s!r}")
    librdkafka = spec.client_config(context)
    java = java_member_config(librdkafka)
    if not group:
        java = JavaConfig(
            {k: v for k, v in java.settings.items() if k != "group.id"},
            {k: v for k, v in java.origins.items() if k != "group.id"},
            java.dropped,
        )
    _announced(context, librdkafka, java)
    payload = _payload(
        "probe", context, spec.name, java, topic=topic or context.topic, group=group, timeout_s=timeout_s
    )
    child = JavaChild(spec.name, payload, context.sink, worker, context.run_id, single_attempt=False)
    _note_dropped(context, spec.name, java)
    child.start()
    limit = (2 if group else 1) * timeout_s + PROBE_EXIT_S
    code = child.wait(limit)
    if code is None:
        child.stop(1.0)  # raises, with the child's stderr
        raise WorkloadError(f"{spec.name}: the Java probe did not end within {limit:.0f} s")
    if code not in (0, 1) or child.error is not None:
        tail = "\n".join(child.stderr_tail())
        raise WorkloadError(f"{spec.name}: the Java probe exited with {code} ({child.error!r}):\n{tail}")
    return code == 0


AnyProducer = ProducerWorker | JavaProducer
"""What :meth:`ScenarioRun.producer <chaos.scenario.workers.RunWorkers.producer>` starts: one interface."""
