"""Consumer-group members: each with its own Consumer, recording deliveries, commits and rebalances.

A member runs :func:`run_member` — subscribe, then ``consume()`` batches until told to stop — either on a
thread of this process (:class:`ThreadMember`) or in a child process (:class:`ProcessMember`) whose events
come back as JSON lines on a pipe. Only a child process can *crash*: SIGKILL leaves librdkafka no chance to
send LeaveGroup, so the coordinator notices only after ``session.timeout.ms``, as with a real crash. In one
process that cannot be had: confluent-kafka's ``Consumer`` dealloc calls ``rd_kafka_destroy()``, which
closes the consumer (LeaveGroup included), and a consumer kept alive but not polled still heartbeats from
librdkafka's threads until ``max.poll.interval.ms`` and then leaves the group itself.

Commit strategies (:data:`COMMIT_STRATEGIES`):

- ``auto``: librdkafka auto-commit with auto offset store (stored as soon as ``consume()`` returns a record);
  commits recorded from ``on_commit``;
- ``commit_after``: ``enable.auto.commit=false``; a synchronous commit of the batch after processing it;
- ``commit_before``: the same commit, made before processing the batch (L6);
- ``store_after``: ``enable.auto.offset.store=false``, ``store_offsets()`` after processing, auto-commit on.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final, Literal, Self, get_args

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from chaos.errors import ConfigError, WorkloadError
from chaos.run.context import RunContext
from chaos.run.events import (
    NAME_PATTERN,
    ClientLog,
    Commit,
    Delivery,
    Event,
    Outcome,
    PartitionOffset,
    Rebalance,
    RebalanceAction,
)
from chaos.workload.common import (
    ClientLogBridge,
    Sink,
    child_payload,
    error_name,
    error_text,
    member_fields,
    message_value_id,
)
from chaos.workload.configs import ConfigItems, config_items, consumer_layers
from chaos.workload.effective import ClientConfig, announce
from chaos.workload.outcomes import COMMIT_UNKNOWN

CommitStrategy = Literal["auto", "commit_after", "commit_before", "store_after"]
COMMIT_STRATEGIES: Final[tuple[str, ...]] = get_args(CommitStrategy)
STRATEGY_SETTINGS: Final[dict[str, tuple[bool, bool]]] = {
    "auto": (True, True),
    "store_after": (True, False),
    "commit_after": (False, False),
    "commit_before": (False, False),
}
"""What each commit strategy forces: (``enable.auto.commit``, ``enable.auto.offset.store``)."""
DeliveryPoint = Literal["consume", "processed"]
DELIVERY_POINTS: Final[tuple[str, ...]] = get_args(DeliveryPoint)
RecordHook = Callable[[Message], None]

STOP_GRACE_S: Final = 2.0
HASTY_CLOSE_S: Final = 2.0  # an interrupted session: a CI cancel leaves seconds, not a commit's timeout
PARENT_PID_ENV: Final = "CHAOS_PARENT_PID"
"""The child's expected parent pid, set by :meth:`ChildProcess.start` (``member_child.die_with_parent``)."""


@dataclass(frozen=True)
class Processing:
    """Injected processing cost: a delay per record, per batch, and inside ``on_assign`` (seconds).

    Delays are cut short when the member is stopped, so stopping stays bounded.
    """

    per_record_s: float = 0.0
    per_batch_s: float = 0.0
    on_assign_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("per_record_s", "per_batch_s", "on_assign_s"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or value < 0:
                raise ConfigError(f"Processing.{name}: expected seconds >= 0; got {value!r}")


@dataclass(frozen=True)
class MemberSpec:
    """One group member of the run's group: its actor name, how it commits and processes.

    The consumer configuration is the run's (:func:`chaos.workload.configs.consumer_config` of the
    context's client and time profiles), then ``overrides`` (librdkafka settings, a mapping is accepted),
    then the strategy's own settings. ``topic`` ``None`` is the run's topic.
    """

    name: str
    strategy: CommitStrategy = "commit_after"
    processing: Processing = field(default_factory=Processing)
    batch_size: int = 100
    poll_timeout_s: float = 0.2
    duration_s: float = 60.0
    record_delivery: DeliveryPoint = "consume"
    """When a :class:`Delivery` is recorded: ``consume`` — as soon as ``consume()`` returns the record;
    ``processed`` — after the record's processing (its delay and hook), i.e. the processing sink's view:
    a member killed mid-batch leaves the rest of the batch undelivered (L6)."""
    topic: str | None = None
    overrides: ConfigItems = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or re.fullmatch(NAME_PATTERN, self.name) is None:
            raise ConfigError(f"MemberSpec.name: expected [A-Za-z0-9_.-]{{1,128}}; got {self.name!r}")
        if self.record_delivery not in DELIVERY_POINTS:
            raise ConfigError(
                f"MemberSpec.record_delivery: expected one of {', '.join(DELIVERY_POINTS)}; "
                f"got {self.record_delivery!r}"
            )
        if self.strategy not in COMMIT_STRATEGIES:
            raise ConfigError(
                f"MemberSpec.strategy: expected one of {', '.join(COMMIT_STRATEGIES)}; got {self.strategy!r}"
            )
        if not 1 <= self.batch_size <= 100_000:
            raise ConfigError(f"MemberSpec.batch_size: expected 1..100000; got {self.batch_size!r}")
        if not 0 < self.poll_timeout_s <= 10:
            raise ConfigError(f"MemberSpec.poll_timeout_s: expected (0, 10]; got {self.poll_timeout_s!r}")
        if not self.duration_s > 0:
            raise ConfigError(f"MemberSpec.duration_s: expected > 0; got {self.duration_s!r}")
        if self.topic is not None and not self.topic:
            raise ConfigError("MemberSpec.topic: expected a topic name, or None for the run's topic")
        object.__setattr__(self, "overrides", config_items("MemberSpec", "overrides", self.overrides))

    def consumer_settings(self, context: RunContext) -> dict[str, Any]:
        """The member's Consumer configuration in ``context``: the run's, ``overrides``, the strategy's."""
        return dict(self.client_config(context).settings)

    def client_config(self, context: RunContext) -> ClientConfig:
        """:meth:`consumer_settings` with the origin of every key (the member's effective configuration)."""
        layers = consumer_layers(
            context.client,
            context.bootstrap_servers,
            self.name,
            context.group,
            context.time,
            dict(self.overrides),
            owner=f"overrides of member {self.name}",
        )
        auto_commit, auto_store = STRATEGY_SETTINGS[self.strategy]
        layers.put(
            f"commit strategy {self.strategy}",
            {"enable.auto.commit": auto_commit, "enable.auto.offset.store": auto_store},
        )
        return layers.client(self.name, "member", context.client.name)

    def to_data(self) -> dict[str, Any]:
        data = asdict(self)
        data["overrides"] = [list(p) for p in self.overrides]
        return data

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> MemberSpec:
        return cls(**{**data, "processing": Processing(**data["processing"])})


def partition_offsets(parts: Sequence[TopicPartition] | None) -> tuple[PartitionOffset, ...]:
    result = []
    for tp in parts or ():
        err = tp.error
        result.append(
            PartitionOffset(
                topic=tp.topic,
                partition=tp.partition,
                offset=tp.offset if tp.offset >= 0 else None,
                error=err.name() if isinstance(err, KafkaError) else None,
            )
        )
    return tuple(result)


def commit_sync(
    consumer: Consumer,
    offsets: list[TopicPartition],
    sink: Sink,
    common: Callable[[], dict[str, Any]],
) -> None:
    """Commit ``offsets`` synchronously and record the :class:`Commit` (never raises a Kafka error).

    A failed synchronous commit may still have reached the coordinator (e.g. a timeout): ``info``
    (unknown), unless the coordinator answered with an error (``fail``).
    """
    try:
        result = consumer.commit(offsets=offsets, asynchronous=False)
    except KafkaException as exc:
        name = error_name(exc)
        outcome: Literal["fail", "info"] = "info" if name in COMMIT_UNKNOWN else "fail"
        sink(
            Commit(
                outcome=outcome,
                offsets=partition_offsets(offsets),
                error=name,
                message=error_text(exc),
                **common(),
            )
        )
        return
    recorded = partition_offsets(result or [])
    error = next((p.error for p in recorded if p.error), None)
    sink(Commit(outcome="fail" if error else "ok", offsets=recorded, error=error, **common()))


def next_offsets(messages: Sequence[Message]) -> list[TopicPartition]:
    """The next offset to read per partition after ``messages``."""
    nxt: dict[tuple[str, int], int] = {}
    for msg in messages:
        topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
        if topic is None or partition is None or offset is None:
            continue
        key = (topic, partition)
        nxt[key] = max(nxt.get(key, 0), offset + 1)
    return [TopicPartition(t, p, o) for (t, p), o in sorted(nxt.items())]


def rebalance_callbacks(
    sink: Sink, fields: Callable[[], dict[str, Any]], after_assign: Callable[[], object] | None = None
) -> dict[str, Callable[[Consumer, list[TopicPartition]], None]]:
    """``on_assign`` / ``on_revoke`` / ``on_lost`` for ``subscribe()``, each recording a Rebalance event.

    ``after_assign`` runs inside the assign callback (an injected slow ``on_assign``).
    """

    def recorder(
        action: RebalanceAction,
    ) -> Callable[[Consumer, list[TopicPartition]], None]:
        def callback(_consumer: Consumer, partitions: list[TopicPartition]) -> None:
            sink(Rebalance(action=action, partitions=partition_offsets(partitions), **fields()))
            if action == "assign" and after_assign is not None:
                after_assign()

        return callback

    return {"on_assign": recorder("assign"), "on_revoke": recorder("revoke"), "on_lost": recorder("lost")}


def run_member(
    context: RunContext, spec: MemberSpec, stop: threading.Event, hook: RecordHook | None = None
) -> None:
    """Run one member until ``stop`` is set or ``duration_s`` passes, then close it gracefully."""
    sink, run_id = context.sink, context.run_id
    topic = spec.topic or context.topic
    logs = ClientLogBridge(sink, run_id, spec.name)
    consumer: Consumer | None = None

    def common() -> dict[str, Any]:
        assert consumer is not None
        return member_fields(run_id, spec.name, context.group, consumer)

    def slow_assign() -> None:
        if spec.processing.on_assign_s:
            stop.wait(spec.processing.on_assign_s)

    def on_commit(err: KafkaError | None, partitions: list[TopicPartition]) -> None:
        offsets = partition_offsets(partitions)
        if err is None:
            outcome: Outcome = "fail" if any(p.error for p in offsets) else "ok"
            error = next((p.error for p in offsets if p.error), None)
            sink(Commit(outcome=outcome, offsets=offsets, error=error, message="auto-commit", **common()))
        elif err.code() != KafkaError._NO_OFFSET:  # nothing stored yet: no commit was sent
            sink(Commit(outcome="fail", offsets=offsets, error=err.name(), message=err.str(), **common()))

    settings = spec.consumer_settings(context)
    settings.update(logs.callbacks())
    if spec.strategy in ("auto", "store_after"):
        settings["on_commit"] = on_commit
    consumer = Consumer(settings)

    def commit(messages: Sequence[Message]) -> None:
        offsets = next_offsets(messages)
        if not offsets:
            return
        commit_sync(consumer, offsets, sink, common)

    try:
        consumer.subscribe([topic], **rebalance_callbacks(sink, common, after_assign=slow_assign))
        deadline = time.monotonic() + spec.duration_s
        while not stop.is_set() and time.monotonic() < deadline:
            messages = consumer.consume(num_messages=spec.batch_size, timeout=spec.poll_timeout_s)
            records: list[Message] = []
            processed: list[Delivery] = []  # record_delivery="processed": recorded after processing
            base = common() if messages else {}
            for msg in messages:
                err = msg.error()
                if err is not None:
                    sink(
                        ClientLog(
                            run_id=run_id,
                            process=spec.name,
                            level="error",
                            message=err.str(),
                            facility="CONSUME",
                            error=err.name(),
                            retriable=err.retriable(),
                            fatal=err.fatal(),
                        )
                    )
                    continue
                records.append(msg)
                raw_key = msg.key()
                delivery = Delivery(
                    topic=msg.topic() or topic,
                    partition=msg.partition() or 0,
                    offset=msg.offset() or 0,
                    value_id=message_value_id(msg),
                    key=raw_key.decode("utf-8", "replace") if raw_key is not None else None,
                    **base,
                )
                if spec.record_delivery == "consume":
                    sink(delivery)
                else:
                    processed.append(delivery)
            if not records:
                continue
            if spec.strategy == "commit_before":
                commit(records)
            for index, msg in enumerate(records):
                if spec.processing.per_record_s:
                    stop.wait(spec.processing.per_record_s)
                if hook is not None:
                    hook(msg)
                if processed:
                    sink(processed[index])
            if spec.processing.per_batch_s:
                stop.wait(spec.processing.per_batch_s)
            if spec.strategy == "commit_after":
                commit(records)
            elif spec.strategy == "store_after":
                try:
                    consumer.store_offsets(offsets=next_offsets(records))
                except KafkaException as exc:  # e.g. _STATE: the partition was revoked meanwhile
                    sink(
                        ClientLog(
                            run_id=run_id,
                            process=spec.name,
                            level="warning",
                            message=f"store_offsets: {error_text(exc)}",
                            facility="STORE",
                            error=error_name(exc),
                        )
                    )
    finally:
        consumer.close()  # graceful: commits (auto strategies), revokes, sends LeaveGroup
        logs.detach()


# ---- runners ---------------------------------------------------------------------------------------


class ThreadMember:
    """A member on a thread of this process. Supports graceful stop and restart, not crash."""

    def __init__(self, context: RunContext, spec: MemberSpec, hook: RecordHook | None = None) -> None:
        # refuse a bad configuration here, not in the member's thread; the run records what it runs with
        announce(context, spec.client_config(context))
        self.spec = spec
        self.context = context
        self._hook = hook
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> ThreadMember:
        if self.running:
            raise WorkloadError(f"member {self.spec.name} is already running")
        self._stop = threading.Event()
        self.error = None
        stop = self._stop

        def body() -> None:
            try:
                run_member(self.context, self.spec, stop, self._hook)
            except BaseException as exc:
                self.error = exc

        self._thread = threading.Thread(target=body, name=f"member-{self.spec.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 30.0, *, hasty: bool = False) -> None:
        """Graceful close (commit, revoke, LeaveGroup); bounded by ``timeout_s``, or with ``hasty`` (an
        interrupted session) by :data:`HASTY_CLOSE_S`: a member stuck in a commit to a dead coordinator is
        then left to the process's exit (its thread is a daemon) and this raises saying so."""
        self._stop.set()
        if self._thread is not None:
            if hasty:
                timeout_s = min(timeout_s, HASTY_CLOSE_S)
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                left = " (the session was interrupted: left to the process's exit)" if hasty else ""
                raise WorkloadError(f"member {self.spec.name} did not close within {timeout_s} s{left}")
        if self.error is not None:
            raise WorkloadError(f"member {self.spec.name} failed: {self.error!r}") from self.error

    def crash(self) -> None:
        raise WorkloadError(
            f"member {self.spec.name} runs on a thread and cannot crash without LeaveGroup; "
            f"use mode='process' (ProcessMember) for crash tests"
        )

    def restart(self) -> ThreadMember:
        self.stop()
        return self.start()


class ChildProcess:
    """A workload actor in a child Python process (``python -m <module>``) whose events come back over a pipe.

    The child reads one JSON line (its spec) from stdin and writes each event as one flushed JSON line to
    stdout. :meth:`stop` asks it to close gracefully (SIGTERM); :meth:`crash` SIGKILLs it; :meth:`pause`
    freezes it (SIGSTOP) until :meth:`resume`. Events the child wrote to the pipe before a kill are kept; the
    rest is lost, as in a real crash.
    """

    module: str = "chaos.workload.member_child"
    clean_exits: tuple[int, ...] = (0, -signal.SIGTERM)
    """Exit statuses of a graceful stop (a JVM ends a SIGTERM it handled with 143)."""

    def __init__(self, name: str, payload: str, sink: Sink) -> None:
        self.name = name
        self._payload = payload
        self._sink = sink
        self._proc: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self._stderr: deque[str] = deque(maxlen=40)
        self._stderr_thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.events = 0

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def returncode(self) -> int | None:
        """The child's exit status (negative: killed by that signal), ``None`` while it runs."""
        return self._proc.poll() if self._proc is not None else None

    def start(self) -> Self:
        if self.running:
            raise WorkloadError(f"{self.name} is already running")
        self.error = None
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        env[PARENT_PID_ENV] = str(os.getpid())  # the child dies with this process (die_with_parent)
        self._proc = subprocess.Popen(
            self.command(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        assert self._proc.stdin is not None
        self._proc.stdin.write(self._payload.encode() + b"\n")
        self._proc.stdin.close()
        self._reader = threading.Thread(
            target=self._read, args=(self._proc,), daemon=True, name=f"child-pipe-{self.name}"
        )
        self._reader.start()
        self._stderr_thread = threading.Thread(target=self._read_stderr, args=(self._proc,), daemon=True)
        self._stderr_thread.start()
        return self

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if not line.endswith(b"\n"):
                break  # torn by a kill
            try:
                event = Event.from_row(self.row(json.loads(line)))
            except (ValueError, TypeError) as exc:
                self.error = exc
                continue
            self.events += 1
            try:
                self._sink(event)
            except BaseException as exc:
                self.error = exc
                return

    def _read_stderr(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            text = line.decode("utf-8", "replace").rstrip()
            self._stderr.append(text)
            try:
                self.stderr_line(text)
            except Exception as exc:  # evidence only: a line that does not parse never stops the child
                self._stderr.append(f"(not recorded: {exc!r})")

    def command(self) -> list[str]:
        """The child's command line: this Python running :attr:`module`."""
        return [sys.executable, "-m", self.module]

    def row(self, row: dict[str, Any]) -> dict[str, Any]:
        """One event row the child wrote, before it becomes an event (override to complete it)."""
        return row

    def stderr_line(self, line: str) -> None:
        """One line the child wrote to stderr (kept for error messages; override to record it)."""

    def _wait(self, timeout_s: float) -> int | None:
        assert self._proc is not None
        try:
            code = self._proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None
        for thread in (self._reader, self._stderr_thread):
            if thread is not None:
                thread.join(5.0)
        return code

    def wait(self, timeout_s: float) -> int | None:
        """Wait for the child to exit by itself; its exit status, or ``None`` if it still runs."""
        if self._proc is None:
            raise WorkloadError(f"{self.name} was never started")
        return self._wait(timeout_s)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Graceful: SIGTERM, the child closes its clients; SIGKILL if it has not exited in ``timeout_s``."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            self._proc.send_signal(signal.SIGCONT)  # a frozen child handles the SIGTERM once it runs
        code = self._wait(timeout_s)
        if code is None:
            self._proc.kill()
            self._wait(STOP_GRACE_S)
            raise WorkloadError(
                f"{self.name} did not close within {timeout_s} s; killed it\n" + "\n".join(self._stderr)
            )
        if code not in self.clean_exits:
            raise WorkloadError(f"{self.name} exited with {code}:\n" + "\n".join(self._stderr))
        if self.error is not None:
            raise WorkloadError(f"{self.name}: bad event from the child: {self.error!r}")

    def crash(self) -> None:
        """SIGKILL the child: no close, no commit, no LeaveGroup."""
        if self._proc is None or self._proc.poll() is not None:
            raise WorkloadError(f"{self.name} is not running")
        self._proc.kill()
        self._wait(10.0)

    def pause(self) -> None:
        """Freeze the child (SIGSTOP): no thread of it runs — no heartbeat, no request, no timer — until
        :meth:`resume`, as a process stalled by the OS or a debugger. :meth:`stop` and :meth:`crash` work on a
        frozen child."""
        self._signal_running(signal.SIGSTOP)

    def resume(self) -> None:
        """Let a frozen child run again (SIGCONT), whether :meth:`pause` or the child itself stopped it."""
        self._signal_running(signal.SIGCONT)

    def _signal_running(self, signum: signal.Signals) -> None:
        if self._proc is None or self._proc.poll() is not None:
            raise WorkloadError(f"{self.name} is not running")
        self._proc.send_signal(signum)

    def restart(self) -> Self:
        if self.running:
            self.stop()
        return self.start()

    def stderr_tail(self) -> list[str]:
        return list(self._stderr)


class ProcessMember(ChildProcess):
    """A group member in a child process (``python -m chaos.workload.member_child``, which reads the
    context and the spec as one :func:`~chaos.workload.common.child_payload` line); see
    :class:`ChildProcess`. ``stop()`` closes the consumer gracefully, ``crash()`` is SIGKILL."""

    module = "chaos.workload.member_child"

    def __init__(self, context: RunContext, spec: MemberSpec) -> None:
        # refuse a bad configuration in the parent, not in the child; the child builds this very dict (same
        # spec, same context), which the run records
        announce(context, spec.client_config(context))
        super().__init__(spec.name, child_payload(context, spec.to_data()), context.sink)
        self.spec = spec
        self.context = context


Member = ThreadMember | ProcessMember


class ConsumerGroup:
    """N members of the run's group, each with its own Consumer (threads or child processes)."""

    def __init__(
        self,
        context: RunContext,
        specs: Sequence[MemberSpec],
        *,
        mode: Literal["thread", "process"] = "thread",
        hook: RecordHook | None = None,
    ) -> None:
        if not specs:
            raise ConfigError("ConsumerGroup: expected at least one MemberSpec")
        if len({s.name for s in specs}) != len(specs):
            raise ConfigError("ConsumerGroup: member names must be unique")
        if mode == "process" and hook is not None:
            raise ConfigError("ConsumerGroup: a Python hook cannot run in a child process; use Processing")
        self.members: list[Member] = [
            ThreadMember(context, s, hook) if mode == "thread" else ProcessMember(context, s) for s in specs
        ]

    def start(self) -> ConsumerGroup:
        for member in self.members:
            member.start()
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        """Close every member gracefully; raises the first failure after trying all."""
        errors: list[BaseException] = []
        for member in self.members:
            try:
                member.stop(timeout_s)
            except WorkloadError as exc:
                errors.append(exc)
        if errors:
            raise errors[0]

    def __enter__(self) -> ConsumerGroup:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
