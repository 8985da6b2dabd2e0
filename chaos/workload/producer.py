"""A producer worker: unique values at a target rate, each send recorded as invoke then exactly one outcome.

Every value is ``value_id_for(run, producer, seq)`` (UTF-8) with a key ``k<seq % keys>`` — or, with a
:class:`~chaos.workload.traffic.Traffic`, the record its shape draws for ``seq`` (sized values, a key space,
headers, tombstones, a rate pattern), the value id at the start of the value and in a header. The worker
records :class:`SendInvoke` before ``produce()`` and one :class:`SendOutcome` per value: from the delivery
report (classified by :mod:`chaos.workload.outcomes`), from a synchronous ``produce()`` error, or — for values
still unacknowledged after the final flush and purge — ``info`` with ``_NO_DELIVERY_REPORT``.

:class:`Pacer` (when the next send is due) and :class:`SendRecorder` (recording one producer's sends) are
shared with the transactional producer (:mod:`chaos.workload.txn_producer`).
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Final, Self

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from chaos.errors import ConfigError, WorkloadError
from chaos.run.context import RunContext
from chaos.run.events import NAME_PATTERN, SendInvoke, SendOutcome, value_id_for
from chaos.workload.common import ClientLogBridge, error_name, error_text, is_fatal, record_replaced
from chaos.workload.configs import ConfigValue, config_items, producer_layers
from chaos.workload.effective import ClientConfig, announce
from chaos.workload.outcomes import classify_delivery_error, classify_produce_exception
from chaos.workload.traffic import RatePattern, Traffic, TrafficShape

ENQUEUE_GIVE_UP_S: Final = 5.0  # BufferError for this long (queue never drains) -> fail _QUEUE_FULL
HASTY_FLUSH_S: Final = 1.0  # an interrupted session: a CI cancel leaves seconds, not a delivery timeout
FATAL_FLUSH_S: Final = 5.0  # a client that failed fatally delivers nothing more: its reports, then close
DEFAULT_KEYS: Final = 16
MAX_INSTANCES: Final = 4
"""A producer whose client fails fatally is closed and replaced by a new instance, as an application must
(Jepsen replaces a crashed client's process); after this many instances failed the stream ends."""


@dataclass(frozen=True)
class ProducerSpec:
    """What one producer sends: ``rate`` messages/s (``None`` = as fast as possible) until ``count``
    messages or ``duration_s`` seconds, whichever comes first (at least one must be set), to ``topic``
    (``None``: the run's). ``traffic``: the records' shape and rate pattern (``None``: each value its bare
    id, key ``k<seq % keys>``, no headers); with a traffic, its key space is the one used, and ``keys``
    other than the default must agree with it."""

    name: str
    topic: str | None = None
    rate: float | None = 1000.0
    count: int | None = None
    duration_s: float | None = 10.0
    keys: int = 16  # DEFAULT_KEYS
    flush_timeout_s: float = 30.0
    overrides: tuple[tuple[str, ConfigValue], ...] = ()
    traffic: Traffic | None = None

    def __post_init__(self) -> None:
        owner = type(self).__name__  # a subclass's errors name the subclass
        if not isinstance(self.name, str) or not re.fullmatch(NAME_PATTERN, self.name):
            raise ConfigError(f"{owner}.name: expected [A-Za-z0-9_.-]{{1,128}}; got {self.name!r}")
        if self.topic is not None and not self.topic:
            raise ConfigError(f"{owner}.topic: expected a topic name, or None for the run's topic")
        if self.rate is not None and not self.rate > 0:
            raise ConfigError(f"{owner}.rate: expected messages/s > 0 or None; got {self.rate!r}")
        if self.count is None and self.duration_s is None:
            raise ConfigError(f"{owner}: set count or duration_s (a producer must stop by itself)")
        if self.count is not None and self.count < 0:
            raise ConfigError(f"{owner}.count: expected >= 0; got {self.count!r}")
        if self.duration_s is not None and not self.duration_s > 0:
            raise ConfigError(f"{owner}.duration_s: expected > 0; got {self.duration_s!r}")
        if self.keys < 1:
            raise ConfigError(f"{owner}.keys: expected >= 1; got {self.keys!r}")
        if self.traffic is not None:
            if not isinstance(self.traffic, Traffic):
                raise ConfigError(
                    f"{owner}.traffic: expected a chaos.workload.Traffic or None; got {self.traffic!r}"
                )
            if self.keys != DEFAULT_KEYS and self.keys != self.traffic.keys:
                raise ConfigError(
                    f"{owner}: keys={self.keys} and traffic.keys={self.traffic.keys} disagree: set the key "
                    "space once, in Traffic(keys=...)"
                )
            self.traffic.pattern(self.rate)  # a burst needs a rate: refused here, not in the send loop
        if not self.flush_timeout_s > 0:
            raise ConfigError(f"{owner}.flush_timeout_s: expected > 0; got {self.flush_timeout_s!r}")
        object.__setattr__(self, "overrides", config_items(owner, "overrides", self.overrides))

    def pattern(self) -> RatePattern | None:
        """The traffic's rate pattern at :attr:`rate`; ``None``: a steady rate."""
        return self.traffic.pattern(self.rate) if self.traffic is not None else None

    def sending_s(self) -> float:
        """How long the sending lasts: ``duration_s``, or ``count`` at ``rate`` (or the traffic's rate
        pattern) when that ends first."""
        duration = self.duration_s or 0.0
        pattern = self.pattern()
        if self.count is not None and pattern is not None:
            duration = min(duration or float("inf"), pattern.due(self.count))
        elif self.count is not None and self.rate:
            duration = min(duration or float("inf"), self.count / self.rate)
        return duration

    def shape(self, context: RunContext) -> TrafficShape | None:
        """The traffic resolved for this producer in ``context`` (its seed, else the run's)."""
        return self.traffic.shape(self.name, context.seed) if self.traffic is not None else None

    def to_data(self) -> dict[str, Any]:
        """As JSON data (a child process's spec): :meth:`from_data` reads it back."""
        data = asdict(self)
        data["overrides"] = [list(p) for p in self.overrides]
        data["traffic"] = self.traffic.to_data() if self.traffic is not None else None
        return data

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> Self:
        traffic = data.get("traffic")
        return cls(**{**data, "traffic": Traffic.from_data(traffic) if traffic is not None else None})

    def client_config(self, context: RunContext) -> ClientConfig:
        """The producer's effective configuration in ``context``: the run's, then ``overrides``."""
        return producer_layers(
            context.client,
            context.bootstrap_servers,
            self.name,
            context.time,
            dict(self.overrides),
            owner=f"overrides of producer {self.name}",
        ).client(self.name, "producer", context.client.name)


@dataclass(frozen=True)
class ProducerStats:
    """Counts of one producer's sends by outcome."""

    sent: int
    ok: int
    fail: int
    info: int
    elapsed_s: float


class Pacer:
    """When a producer's next send is due: ``spec.rate`` sends/s from construction, until ``spec.count``
    sends, ``spec.duration_s`` seconds, or a stop."""

    def __init__(self, spec: ProducerSpec, stop: threading.Event, *, start: int = 0) -> None:
        self.started = time.monotonic()
        self.seq = start  # the next send's sequence number (a restarted producer resumes at its checkpoint)
        self._start = start
        self._deadline = self.started + spec.duration_s if spec.duration_s is not None else float("inf")
        self._count = spec.count if spec.count is not None else 2**62
        self._interval = 1.0 / spec.rate if spec.rate else 0.0
        self._pattern = spec.pattern()
        self._stop = stop

    def ready(self, producer: Producer) -> bool:
        """Serve ``producer``'s callbacks until the next send is due; False when the sending is over."""
        while self.seq < self._count and not self._stop.is_set():
            now = time.monotonic()
            if now >= self._deadline:
                return False
            if self._pattern is not None or self._interval:
                due = self.started + self.due(self.seq - self._start)
                if due > now + 0.001:
                    producer.poll(min(due - now, self._deadline - now, 0.1))
                    continue
            return True
        return False

    def due(self, n: int) -> float:
        """Seconds after the start at which this session's send ``n`` (0 = its first) is due."""
        if self._pattern is not None:
            return self._pattern.due(n)
        return n * self._interval

    def sent(self, producer: Producer) -> None:
        """Count the send just made (delivery reports are served every 64 sends)."""
        self.seq += 1
        if self.seq % 64 == 0:
            producer.poll(0)


class SendRecorder:
    """Records one producer's sends into the run's sink: :class:`SendInvoke` before ``produce()``, then
    exactly one :class:`SendOutcome` per value (delivery report, synchronous error, or ``info`` when
    :meth:`close` finds it silent). ``process`` is both the events' process and the values' producer."""

    def __init__(
        self,
        context: RunContext,
        process: str,
        topic: str,
        keys: int,
        on_ack: Callable[[int], None] | None = None,
        shape: TrafficShape | None = None,
    ) -> None:
        """``on_ack(seq)``: called with each acknowledged value's sequence number (a checkpoint);
        ``shape``: the records' traffic shape (``None``: the bare value id, key ``k<seq % keys>``)."""
        self._on_ack = on_ack
        self._shape = shape
        self.process = process
        self.topic = topic
        self._keys = keys
        self._sink = context.sink
        self._run_id = context.run_id
        self._single_attempt = context.client.single_attempt
        self._pending: dict[str, float] = {}  # value id -> invoke mono
        self._lock = threading.Lock()
        self._counts = {"ok": 0, "fail": 0, "info": 0}
        self._sent = 0
        self._closed = False

    def counts(self) -> tuple[int, int, int, int]:
        """``(sent, ok, fail, info)`` so far."""
        with self._lock:
            return self._sent, self._counts["ok"], self._counts["fail"], self._counts["info"]

    def send(self, producer: Producer, seq: int) -> str:
        """Record and produce value ``seq``; returns its value id."""
        vid = value_id_for(self._run_id, self.process, seq)
        if self._shape is None:
            key: str | None = f"k{seq % self._keys}"
            value: bytes | None = vid.encode()
            headers: list[tuple[str, str | bytes | None]] | None = None
            tombstone = None
            report = self.on_delivery
        else:
            shaped = self._shape.record(seq, vid)
            key, value, headers = shaped.key, shaped.value, list(shaped.headers)
            tombstone = True if shaped.tombstone else None
            report = functools.partial(self._delivered, vid)  # a tombstone's value names nothing
        raw_key = key.encode() if key is not None else None
        invoke = SendInvoke(
            run_id=self._run_id,
            process=self.process,
            value_id=vid,
            producer=self.process,
            seq=seq,
            topic=self.topic,
            key=key,
            tombstone=tombstone,
        )
        self._sink(invoke)
        with self._lock:
            self._pending[vid] = invoke.mono
            self._sent += 1
        give_up = time.monotonic() + ENQUEUE_GIVE_UP_S
        while True:
            try:
                producer.produce(self.topic, value=value, key=raw_key, headers=headers, on_delivery=report)
                return vid
            except BufferError:
                # The local queue is full: serve delivery reports to drain it, then retry the same value.
                if time.monotonic() >= give_up:
                    self._resolve_sync(vid, "_QUEUE_FULL", "local queue stayed full", retriable=True)
                    return vid
                producer.poll(0.05)
            except KafkaException as exc:
                self._resolve_sync(vid, error_name(exc), error_text(exc), retriable=False)
                if is_fatal(exc):
                    raise  # the instance is unusable: the caller replaces it (produce_paced)
                return vid

    def _resolve_sync(self, vid: str, error: str, message: str, *, retriable: bool) -> None:
        verdict = classify_produce_exception(error)
        with self._lock:
            mono = self._pending.pop(vid)
            self._counts["fail"] += 1
        now = time.monotonic()
        self._sink(
            SendOutcome(
                run_id=self._run_id,
                process=self.process,
                value_id=vid,
                outcome="fail",
                latency_ms=(now - mono) * 1000,
                error=error,
                retriable=retriable,
                fatal=False,
                message=f"{message}: {verdict.reason}",
                mono=now,
            )
        )

    def on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        """The delivery report callback of a bare value (``on_delivery`` of its ``produce()``)."""
        raw = msg.value()
        self._delivered(raw.decode("utf-8", "replace") if raw is not None else "", err, msg)

    def _delivered(self, vid: str, err: KafkaError | None, msg: Message) -> None:
        now = time.monotonic()
        with self._lock:
            mono = self._pending.pop(vid, None)
            if mono is None or self._closed:
                return  # already resolved (cannot happen for our own values; defensive)
        latency = (now - mono) * 1000
        if err is None:
            offset = msg.offset()
            partition = msg.partition()
            outcome = SendOutcome(
                run_id=self._run_id,
                process=self.process,
                value_id=vid,
                outcome="ok",
                partition=partition if partition is not None and partition >= 0 else 0,
                offset=offset if offset is not None and offset >= 0 else None,
                latency_ms=latency,
                mono=now,
            )
            kind = "ok"
        else:
            verdict = classify_delivery_error(err.name(), single_attempt=self._single_attempt)
            partition = msg.partition()
            outcome = SendOutcome(
                run_id=self._run_id,
                process=self.process,
                value_id=vid,
                outcome=verdict.outcome,
                partition=partition if partition is not None and partition >= 0 else None,
                latency_ms=latency,
                error=err.name(),
                retriable=err.retriable(),
                fatal=err.fatal(),
                message=f"{err.str()}: {verdict.reason}",
                mono=now,
            )
            kind = verdict.outcome
        with self._lock:
            self._counts[kind] += 1
        self._sink(outcome)
        if kind == "ok" and self._on_ack is not None:
            self._on_ack(int(vid.rpartition(":")[2]))

    def reopen(self) -> None:
        """Take delivery reports again: a new client instance replaces a closed one."""
        with self._lock:
            self._closed = False

    def close(self, producer: Producer, flush_timeout_s: float) -> None:
        """Flush with a timeout; purge what is left so it reports; record anything still silent as info."""
        remaining = producer.flush(flush_timeout_s)
        if remaining:
            producer.purge(in_queue=True, in_flight=True, blocking=False)
            producer.flush(min(5.0, flush_timeout_s))
        with self._lock:
            self._closed = True
            silent = list(self._pending.items())
            self._pending.clear()
            self._counts["info"] += len(silent)
        now = time.monotonic()
        for vid, mono in silent:
            self._sink(
                SendOutcome(
                    run_id=self._run_id,
                    process=self.process,
                    value_id=vid,
                    outcome="info",
                    latency_ms=(now - mono) * 1000,
                    error="_NO_DELIVERY_REPORT",
                    message="no delivery report before the producer was closed: outcome unknown",
                    mono=now,
                )
            )


def produce_paced(
    context: RunContext,
    config: dict[str, Any],
    sends: SendRecorder,
    pace: Pacer,
    flush_timeout_s: Callable[[], float],
    after_send: Callable[[int], None] | None = None,
) -> None:
    """Send ``pace``'s values through a producer built from ``config``, recorded by ``sends``; close it
    (flush bounded by ``flush_timeout_s()``, read at close time). A fatal client error (librdkafka's
    idempotent producer gives up: ``_INCONSISTENT``, ``_GAPLESS_GUARANTEE``…) is the client's behaviour
    under test, not a harness failure: the instance is closed (its unacknowledged sends recorded as their
    reports say, or unknown), the error recorded (:func:`~chaos.workload.common.record_replaced`), and a new
    instance continues the sequence — at most :data:`MAX_INSTANCES` instances, then the stream ends. Any
    other error propagates."""
    for instance in range(1, MAX_INSTANCES + 1):
        producer = Producer(config)
        sends.reopen()
        fatal: BaseException | None = None
        try:
            while pace.ready(producer):
                sends.send(producer, pace.seq)
                if after_send is not None:
                    after_send(pace.seq)
                pace.sent(producer)
        except BaseException as exc:
            if not is_fatal(exc):
                with contextlib.suppress(Exception):  # the error that ended the loop is the one to report
                    sends.close(producer, flush_timeout_s())
                raise
            fatal = exc
        sends.close(producer, min(FATAL_FLUSH_S, flush_timeout_s()) if fatal else flush_timeout_s())
        if fatal is None:
            return
        replaced = instance < MAX_INSTANCES
        then = (
            f"a new instance continues at sequence {pace.seq}"
            if replaced
            else f"{instance} instances failed: the stream ends at sequence {pace.seq}"
        )
        record_replaced(
            context.sink,
            context.run_id,
            sends.process,
            fatal,
            f"fatal error of instance {instance}: {error_text(fatal)}; it was closed, {then}",
        )
        if not replaced:
            return


class ProducerWorker:
    """Sends :class:`ProducerSpec`'s values on its own thread with the run's client profile and records
    every send.

    ``start()`` then ``join()`` (or ``stop()`` to end early); both are bounded by ``join_timeout_s``.
    """

    def __init__(self, context: RunContext, spec: ProducerSpec) -> None:
        self.spec = spec
        self.context = context
        self.topic = spec.topic or context.topic
        self._logs = ClientLogBridge(context.sink, context.run_id, spec.name)
        self.client_config = spec.client_config(context)
        announce(context, self.client_config)  # what it runs with (callbacks excluded): the run records it
        self._config: dict[str, Any] = {**self.client_config.settings, **self._logs.callbacks()}
        self._sends = SendRecorder(context, spec.name, self.topic, spec.keys, shape=spec.shape(context))
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._hasty = False
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._started = 0.0
        self._finished = 0.0

    @property
    def name(self) -> str:
        return self.spec.name

    # ---- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> ProducerWorker:
        if self._thread is not None:
            raise WorkloadError(f"producer {self.spec.name} already started; build a new ProducerWorker")
        self._thread = threading.Thread(target=self._run, name=f"producer-{self.spec.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float | None = None, *, hasty: bool = False) -> ProducerStats:
        """Stop sending, flush (bounded by ``flush_timeout_s``; ``hasty``: by :data:`HASTY_FLUSH_S`, for
        an interrupted session — what is not acknowledged by then is recorded as unknown) and wait for
        the thread."""
        self._hasty = self._hasty or hasty
        self._stop.set()
        return self.join(timeout_s)

    def join(self, timeout_s: float | None = None) -> ProducerStats:
        """Wait for the worker to finish; raises :class:`WorkloadError` if it failed or did not finish."""
        if self._thread is None:
            raise WorkloadError(f"producer {self.spec.name} was never started")
        limit = timeout_s if timeout_s is not None else self._join_budget()
        self._thread.join(limit)
        if self._thread.is_alive():
            raise WorkloadError(f"producer {self.spec.name} did not finish within {limit:.1f} s")
        if self._error is not None:
            raise WorkloadError(f"producer {self.spec.name} failed: {self._error!r}") from self._error
        return self.stats()

    def _join_budget(self) -> float:
        return self.spec.sending_s() + self.spec.flush_timeout_s + ENQUEUE_GIVE_UP_S + 10.0

    def stats(self) -> ProducerStats:
        sent, ok, fail, info = self._sends.counts()
        with self._lock:
            end = self._finished or time.monotonic()
            elapsed = end - self._started if self._started else 0.0
        return ProducerStats(sent, ok, fail, info, elapsed)

    # ---- the send loop -----------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            pace = Pacer(self.spec, self._stop)
            self._started = pace.started
            produce_paced(self.context, self._config, self._sends, pace, self._flush_s)
        except BaseException as exc:
            self._error = exc
        finally:
            self._logs.detach()
            with self._lock:
                self._finished = time.monotonic()

    def _flush_s(self) -> float:
        return min(HASTY_FLUSH_S, self.spec.flush_timeout_s) if self._hasty else self.spec.flush_timeout_s
