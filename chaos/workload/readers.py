"""The restore reader (docs/catalog.md PB1 / MD1; MD4) and the final drain.

The restore reader replays the seed's snapshot restore per partition: end offsets → assign → seek(end − k)
→ poll(timeout), each call recorded as a :class:`ProbeCall` with its duration and error. The final drain, run
after every fault is healed, reads every partition from its beginning to its end offset with a fresh
consumer, once per isolation level, recording :class:`DrainRead` per record and :class:`DrainEnd` per
partition — apart from the group's deliveries. :func:`offset_bounds` reads a topic's low watermarks and end
offsets at an isolation level.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._listoffsets import OffsetSpec

from chaos.errors import ConfigError
from chaos.run.context import RunContext
from chaos.run.events import DrainEnd, DrainRead, Isolation, ProbeCall
from chaos.workload.common import ClientLogBridge, error_name, error_text, message_value_id
from chaos.workload.configs import admin_config

LOG_FLUSH_S = 0.2  # serving the client's queue once more before close delivers its last log lines


def _key(raw: bytes | None) -> str | None:
    return raw.decode("utf-8", "replace") if raw is not None else None


def reader_config(context: RunContext, client_id: str, isolation: Isolation) -> dict[str, Any]:
    """A consumer that never joins a group (``assign`` only, no commits) at ``isolation``, with partition
    EOF events on."""
    return {
        **admin_config(context.bootstrap_servers, client_id, context.time),
        "group.id": f"chaos-reader-{uuid.uuid4().hex[:12]}",  # librdkafka needs one; never joined
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
        "isolation.level": isolation,
    }


# ---- restore reader --------------------------------------------------------------------------------


@dataclass(frozen=True)
class RestoreResult:
    """One partition's restore: the watermarks, the seek target, what the poll returned."""

    partition: int
    ok: bool
    low: int | None = None
    high: int | None = None
    target: int | None = None
    polled_offset: int | None = None
    error: str | None = None


class RestoreReader:
    """The seed's restore pattern on the run's topic (or ``topic``), one temporary consumer per restore (as
    in PB1).

    :param k: read back ``k`` records from the end (the seed used 2).
    :param poll_timeout_s: the seed's ``poll(Duration.ofMillis(10_000L))``.
    :param call_timeout_s: timeout of the end-offsets call (default: the time profile's request.timeout.ms,
        Java's: 30 s faithful).
    """

    def __init__(
        self,
        context: RunContext,
        *,
        process: str = "restore",
        k: int = 2,
        poll_timeout_s: float = 10.0,
        call_timeout_s: float | None = None,
        topic: str | None = None,
    ) -> None:
        if k < 1:
            raise ConfigError(f"RestoreReader.k: expected >= 1; got {k!r}")
        if not poll_timeout_s > 0:
            raise ConfigError(f"RestoreReader.poll_timeout_s: expected > 0; got {poll_timeout_s!r}")
        self._context = context
        self._topic = topic or context.topic
        self._sink = context.sink
        self._run_id = context.run_id
        self._process = process
        self._k = k
        self._poll_timeout_s = poll_timeout_s
        self._call_timeout_s = call_timeout_s or context.time.request_timeout_ms / 1000

    def _probe(
        self,
        operation: str,
        started: float,
        *,
        timeout_s: float | None = None,
        exc: BaseException | None = None,
        **fields: Any,
    ) -> None:
        self._sink(
            ProbeCall(
                run_id=self._run_id,
                process=self._process,
                operation=operation,
                duration_ms=(time.monotonic() - started) * 1000,
                timeout_ms=timeout_s * 1000 if timeout_s is not None else None,
                error=error_name(exc) if exc is not None else None,
                message=error_text(exc) if exc is not None else None,
                topic=self._topic,
                **fields,
            )
        )

    def restore(self, partitions: Sequence[int]) -> list[RestoreResult]:
        """Restore each partition in turn with a fresh consumer; never raises for a Kafka error."""
        return [self.restore_one(p) for p in partitions]

    def restore_one(self, partition: int) -> RestoreResult:
        logs = ClientLogBridge(self._sink, self._run_id, self._process)
        config = reader_config(self._context, f"{self._process}-{partition}", "read_uncommitted")
        config["enable.partition.eof"] = False  # the seed's poll sees records or nothing
        config.update(logs.callbacks())
        consumer = Consumer(config)
        try:
            return self._restore(consumer, partition)
        finally:
            # librdkafka's log lines reach the logger only when the client's queue is served: serve it
            # once more, or the lines of a call that just failed (e.g. "Connection setup timed out") are
            # dropped with the client.
            with contextlib.suppress(Exception):
                consumer.poll(LOG_FLUSH_S)
            consumer.close()
            logs.detach()

    def _restore(self, consumer: Consumer, partition: int) -> RestoreResult:
        tp = TopicPartition(self._topic, partition)
        started = time.monotonic()
        try:
            low, high = consumer.get_watermark_offsets(tp, timeout=self._call_timeout_s)
        except KafkaException as exc:
            self._probe("list_offsets", started, timeout_s=self._call_timeout_s, exc=exc, partition=partition)
            return RestoreResult(partition, False, error=error_name(exc))
        self._probe(
            "list_offsets",
            started,
            timeout_s=self._call_timeout_s,
            partition=partition,
            low_offset=low,
            high_offset=high,
            result=f"[{low}, {high})",
        )
        target = max(low, high - self._k)
        if high <= low:
            return RestoreResult(partition, True, low, high, target)
        started = time.monotonic()
        try:
            consumer.assign([TopicPartition(self._topic, partition, target)])
        except KafkaException as exc:
            self._probe("assign", started, exc=exc, partition=partition, offset=target)
            return RestoreResult(partition, False, low, high, target, error=error_name(exc))
        self._probe("assign", started, partition=partition, offset=target)
        started = time.monotonic()
        try:
            consumer.seek(TopicPartition(self._topic, partition, target))
        except KafkaException as exc:  # recorded; the assign offset still applies
            self._probe("seek", started, exc=exc, partition=partition, offset=target)
        else:
            self._probe("seek", started, partition=partition, offset=target)
        started = time.monotonic()
        try:
            msg = consumer.poll(self._poll_timeout_s)
        except KafkaException as exc:
            self._probe("poll", started, timeout_s=self._poll_timeout_s, exc=exc, partition=partition)
            return RestoreResult(partition, False, low, high, target, error=error_name(exc))
        if msg is None:
            self._probe("poll", started, timeout_s=self._poll_timeout_s, partition=partition, result="empty")
            return RestoreResult(partition, False, low, high, target, error="EMPTY_POLL")
        err = msg.error()
        if err is not None:
            self._probe(
                "poll", started, timeout_s=self._poll_timeout_s, partition=partition, exc=KafkaException(err)
            )
            return RestoreResult(partition, False, low, high, target, error=err.name())
        offset = msg.offset()
        self._probe(
            "poll",
            started,
            timeout_s=self._poll_timeout_s,
            partition=partition,
            offset=offset,
            result="1 msg",
        )
        return RestoreResult(partition, True, low, high, target, polled_offset=offset)


# ---- start-up probe (MD2 / MD3) ---------------------------------------------------------------------


def startup_probe(
    context: RunContext,
    *,
    timeout_s: float,
    group: bool = False,
    process: str = "probe",
    topic: str | None = None,
) -> bool:
    """What a client does first on start, with a fresh consumer (no cached metadata), each call a
    :class:`ProbeCall`: ``metadata`` — ``list_topics(topic, timeout)`` of the run's topic (or ``topic``),
    Java's ``partitionsFor`` (MD2) — then, with ``group``, ``committed`` — the run's group's committed
    offsets of every partition (MD3). The consumer never subscribes. Returns whether every call succeeded;
    never raises for a Kafka error.
    """
    if not timeout_s > 0:
        raise ConfigError(f"startup_probe.timeout_s: expected > 0; got {timeout_s!r}")
    sink, run_id = context.sink, context.run_id
    topic = topic or context.topic
    logs = ClientLogBridge(sink, run_id, process)
    config = reader_config(context, process, "read_uncommitted")
    if group:
        config["group.id"] = context.group
    config.update(logs.callbacks())
    consumer = Consumer(config)

    def probe(operation: str, started: float, exc: BaseException | None = None, **fields: Any) -> None:
        sink(
            ProbeCall(
                run_id=run_id,
                process=process,
                operation=operation,
                duration_ms=(time.monotonic() - started) * 1000,
                timeout_ms=timeout_s * 1000,
                error=error_name(exc) if exc is not None else None,
                message=error_text(exc) if exc is not None else None,
                topic=topic,
                **fields,
            )
        )

    try:
        started = time.monotonic()
        try:
            metadata = consumer.list_topics(topic, timeout=timeout_s)
            tmeta = metadata.topics.get(topic)
            if tmeta is not None and tmeta.error is not None:
                raise KafkaException(tmeta.error)
        except KafkaException as exc:
            probe("metadata", started, exc)
            return False
        partitions = sorted(tmeta.partitions) if tmeta is not None else []
        probe("metadata", started, result=f"{len(partitions)} partitions")
        if not group:
            return True
        started = time.monotonic()
        try:
            committed = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=timeout_s)
        except KafkaException as exc:
            probe("committed", started, exc)
            return False
        probe("committed", started, result=" ".join(f"{tp.partition}:{tp.offset}" for tp in committed))
        return True
    finally:
        consumer.close()
        logs.detach()


# ---- final drain -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class DrainSummary:
    """Per isolation level: records read and partitions that reached their end offset."""

    isolation: Isolation
    records: int
    complete: tuple[int, ...]
    incomplete: tuple[int, ...]


def _list_offsets(
    admin: AdminClient, topic: str, partitions: Sequence[int], isolation: Isolation, timeout_s: float
) -> dict[int, tuple[int, int]]:
    earliest = OffsetSpec.earliest()  # type: ignore[no-untyped-call]
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    low_f = _ask_offsets(admin, topic, partitions, earliest, isolation, timeout_s)
    high_f = _ask_offsets(admin, topic, partitions, latest, isolation, timeout_s)
    lows, highs = _answered(low_f, timeout_s), _answered(high_f, timeout_s)
    return {p: (lows[p], highs[p]) for p in partitions}


def _ask_offsets(
    admin: AdminClient,
    topic: str,
    partitions: Sequence[int],
    spec: Any,
    isolation: Isolation,
    timeout_s: float,
) -> dict[TopicPartition, Any]:
    """ListOffsets of ``partitions`` at ``spec`` (earliest or latest), sent: the futures of its answers."""
    level = (
        IsolationLevel.READ_COMMITTED if isolation == "read_committed" else IsolationLevel.READ_UNCOMMITTED
    )
    return admin.list_offsets(
        {TopicPartition(topic, p): spec for p in partitions}, isolation_level=level, request_timeout=timeout_s
    )


def _answered(futures: dict[TopicPartition, Any], timeout_s: float) -> dict[int, int]:
    return {tp.partition: f.result(timeout_s).offset for tp, f in futures.items()}


def drain(
    context: RunContext,
    *,
    isolations: Sequence[Isolation] = ("read_uncommitted", "read_committed"),
    timeout_s: float = 60.0,
    process: str = "drain",
    topic: str | None = None,
) -> list[DrainSummary]:
    """Read every partition of the run's topic (or ``topic``) from its low watermark to its end offset, per
    isolation level.

    The end offset is the high watermark (read_uncommitted) or the last stable offset (read_committed),
    taken once at the start through ``AdminClient.list_offsets``. A partition is ``ok`` once the consumer's
    position reaches it (under read_committed, control records and aborted data occupy offsets that are
    never returned, so "every offset read" means "position reached the end"); its ``low_offset`` is the
    partition's log start read again after the drain when retention moved it on meanwhile (the records
    below it could not be read); ``fail`` if ``timeout_s`` runs out first or the offsets could not be
    listed.
    """
    topic = topic or context.topic
    admin = AdminClient(admin_config(context.bootstrap_servers, f"{process}-admin", context.time))
    call_timeout = context.time.api_timeout_s
    partitions = _partitions(admin, topic, call_timeout, "drain")
    return [
        _drain_one(context, admin, topic, partitions, isolation, timeout_s, process, call_timeout)
        for isolation in isolations
    ]


def _partitions(admin: AdminClient, topic: str, timeout_s: float, caller: str) -> list[int]:
    metadata = admin.list_topics(topic, timeout=timeout_s)
    tmeta = metadata.topics.get(topic)
    if tmeta is None or tmeta.error is not None:
        raise ConfigError(f"{caller}: topic {topic!r} is not readable: {getattr(tmeta, 'error', 'missing')}")
    return sorted(tmeta.partitions)


def offset_bounds(
    admin: AdminClient, topic: str, isolation: Isolation, timeout_s: float
) -> dict[int, tuple[int, int]]:
    """Per partition of ``topic``, read now: its low watermark and its end offset at ``isolation`` — the
    high watermark (read_uncommitted) or the last stable offset (read_committed). Stale-leader answers
    are retried within ``timeout_s``; other Kafka errors raise."""
    partitions = _partitions(admin, topic, timeout_s, "offset_bounds")
    return _list_offsets_retrying(admin, topic, partitions, isolation, timeout_s, timeout_s)


# A broker back from a cut or a restart answers with these until its leader epochs catch up (measured: a
# drain right after PB1's heal got FENCED_LEADER_EPOCH for every partition under read_committed).
_STALE_LEADER: Final = frozenset(
    {"FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH", "NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE"}
)


def _list_offsets_retrying(
    admin: AdminClient,
    topic: str,
    partitions: list[int],
    isolation: Isolation,
    call_timeout: float,
    timeout_s: float,
) -> dict[int, tuple[int, int]]:
    """:func:`_list_offsets`, retried every 0.5 s while the answer is a stale-leader error, for at most
    ``timeout_s`` (the drain's own bound); any other error, or the last one, is raised."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return _list_offsets(admin, topic, partitions, isolation, call_timeout)
        except KafkaException as exc:
            if error_name(exc) not in _STALE_LEADER or time.monotonic() + 0.5 >= deadline:
                raise
        time.sleep(0.5)


def _drain_one(
    context: RunContext,
    admin: AdminClient,
    topic: str,
    partitions: list[int],
    isolation: Isolation,
    timeout_s: float,
    process: str,
    call_timeout: float,
) -> DrainSummary:
    sink, run_id = context.sink, context.run_id

    def end(
        partition: int,
        outcome: Literal["ok", "fail"],
        low: int | None,
        high: int | None,
        error: str | None = None,
        message: str | None = None,
    ) -> None:
        sink(
            DrainEnd(
                run_id=run_id,
                process=process,
                isolation=isolation,
                topic=topic,
                partition=partition,
                outcome=outcome,
                low_offset=low,
                high_offset=high,
                error=error,
                message=message,
            )
        )

    try:
        bounds = _list_offsets_retrying(admin, topic, partitions, isolation, call_timeout, timeout_s)
    except (KafkaException, TimeoutError) as exc:
        for p in partitions:
            end(p, "fail", None, None, error_name(exc), f"list_offsets: {error_text(exc)}")
        return DrainSummary(isolation, 0, (), tuple(partitions))
    logs = ClientLogBridge(sink, run_id, process)
    config = reader_config(context, f"{process}-{isolation}", isolation)
    config.update(logs.callbacks())
    consumer = Consumer(config)
    todo = {p for p, (low, high) in bounds.items() if high > low}
    positions = {p: bounds[p][0] for p in todo}
    records = 0
    try:
        consumer.assign(
            [
                TopicPartition(topic, p, bounds[p][0] if bounds[p][0] >= 0 else OFFSET_BEGINNING)
                for p in sorted(todo)
            ]
        )
        deadline = time.monotonic() + timeout_s
        while todo and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                part = msg.partition()
                if part is None or part not in todo:
                    continue
                p = part
                err = msg.error()
                offset = msg.offset()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF and offset is not None:
                        positions[p] = max(positions[p], offset)
                    else:
                        continue
                elif offset is not None:
                    if offset < bounds[p][1]:
                        records += 1
                        sink(
                            DrainRead(
                                run_id=run_id,
                                process=process,
                                isolation=isolation,
                                topic=topic,
                                partition=p,
                                offset=offset,
                                value_id=message_value_id(msg),
                                key=_key(msg.key()),
                            )
                        )
                    positions[p] = max(positions[p], offset + 1)
                if positions[p] >= bounds[p][1]:
                    todo.discard(p)
        starts = _starts_after(admin, topic, partitions, isolation, call_timeout)
        for p in sorted(set(bounds) - todo):
            low, high = bounds[p]
            end(p, "ok", min(max(low, starts.get(p, low)), high), high)
        for p in sorted(todo):
            end(
                p,
                "fail",
                *bounds[p],
                error="_TIMED_OUT",
                message=f"position {positions[p]} short of end offset {bounds[p][1]} after {timeout_s} s",
            )
    finally:
        consumer.close()
        logs.detach()
    complete = tuple(sorted(set(partitions) - todo))
    return DrainSummary(isolation, records, complete, tuple(sorted(todo)))


def _starts_after(
    admin: AdminClient, topic: str, partitions: list[int], isolation: Isolation, call_timeout: float
) -> dict[int, int]:
    """Each partition's log start read again once the drain has read it: retention (or ``DeleteRecords``)
    may have removed records the drain had not reached yet — its consumer then resumes at the new start —
    so a ``drain_end`` names the start it really read from. Empty when the offsets cannot be listed."""
    earliest = OffsetSpec.earliest()  # type: ignore[no-untyped-call]
    try:
        return _answered(
            _ask_offsets(admin, topic, partitions, earliest, isolation, call_timeout), call_timeout
        )
    except (KafkaException, TimeoutError):
        return {}
