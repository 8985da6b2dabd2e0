"""The workload half of a :class:`~chaos.scenario.runner.ScenarioRun`: workers built on the run's context
(producers, group members, the restore reader, the cluster-state samplers), each stopped when the run ends.

A run holds one :class:`RunWorkers` (``run.workers``), built on the run as its :class:`WorkerHost` (the
context, the bootstrap of a client path, the Java worker); it keeps what the run must stop
(:meth:`RunWorkers.on_close`) and stops it in :meth:`RunWorkers.stop_workers`. The run offers the workers'
helpers as its own methods (``run.producer(...)``) through :class:`Delegated`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import signal
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Concatenate, Final, Generic, Literal, ParamSpec, Protocol, TypeVar, overload

from chaos.errors import ConfigError
from chaos.scenario.model import ScenarioError
from chaos.service import ServiceSpec
from chaos.workload import (
    IDEMPOTENT,
    Checkpoint,
    ClientProfile,
    ClusterSampler,
    CommitStrategy,
    DeliveryPoint,
    MemberSpec,
    Processing,
    ProcessMember,
    ProcessProducer,
    ProcessProducerSpec,
    ProducerSpec,
    ProducerWorker,
    RestoreReader,
    RunContext,
    ThreadMember,
    Traffic,
    TransactionalProducer,
    TxnProducerSpec,
    producer_config,
    profile,
    startup_probe,
)
from chaos.workload.java_build import JavaWorker
from chaos.workload.java_client import (
    AnyProducer,
    JavaMember,
    JavaProducer,
    JavaTransform,
    java_startup_probe,
)
from chaos.workload.producer import DEFAULT_KEYS
from chaos.workload.transactional import TransactionalWorker, TxnWorkerSpec

INTROSPECT_PROCESS: Final = "introspect"
ProducerRole = Literal["app", "input"]
PRODUCER_ROLES: Final = ("app", "input")


class _Unset(enum.Enum):
    UNSET = "unset"


UNSET: Final = _Unset.UNSET
"""An option left out (``keys``: the traffic's key space, else 16 keys)."""


def producer_traffic(keys: int | _Unset | None, traffic: Traffic | None) -> tuple[int, Traffic | None]:
    """A producer's ``(spec keys, traffic)`` from the call's ``keys`` and ``traffic``: ``keys`` given wins
    over the traffic's; ``keys=None`` (keyless records) needs a traffic and gets a default one."""
    if keys is not UNSET and keys is not None and (type(keys) is not int or keys < 1):
        raise ConfigError(f"producer keys: expected the number of keys >= 1, or None (keyless); got {keys!r}")
    if traffic is None:
        if keys is UNSET:
            return DEFAULT_KEYS, None
        if keys is None:
            return DEFAULT_KEYS, Traffic(keys=None)
        return keys, None
    if keys is not UNSET:
        traffic = dataclasses.replace(traffic, keys=keys)
    return traffic.keys or DEFAULT_KEYS, traffic


class WorkerHost(Protocol):
    """What the workers need of their run."""

    @property
    def context(self) -> RunContext:
        """The run's context."""
        ...

    def client_bootstrap(self, client_path: str) -> str:
        """The cluster's addresses on ``client_path``."""
        ...

    def java_worker(self) -> JavaWorker:
        """The Java client worker for the cluster's Kafka version."""
        ...


class RunWorkers:
    """Workers of one run, on its :attr:`context`; everything started here is stopped by
    :meth:`stop_workers`. ``host``: the run (``None``: no run, for building specs only)."""

    def __init__(self, host: WorkerHost | None = None, client_library: str = "librdkafka") -> None:
        self.host = host
        self._closers: list[Callable[[], None]] = []
        self.interrupting = False
        """True while the run stops its workers because the session was interrupted (Ctrl-C, SIGTERM):
        the harness's closers then cut their flushes short."""
        self._samplers: dict[str, ClusterSampler] = {}
        self.client_library = client_library
        """The workers' client: ``librdkafka`` or ``java`` (:meth:`producer`, :meth:`member`,
        :meth:`process_member`, :meth:`transform`, :meth:`startup_probe`)."""
        self.streams: dict[str, str] = {}
        """Producer -> the guarantee of the client profile it was handed (``client=``): its values are
        judged by that guarantee, the rest by the variant's (:func:`chaos.audit.verdict.judge`)."""
        self.traffic: Traffic | None = None
        """The run's default traffic: a producer started without a ``traffic`` of its own takes it (the
        gate's ``[traffic]``); one without a rate (as fast as acks come) takes it without its rate pattern."""
        self.team_service: ServiceSpec | None = None
        """The team's service (the gate's ``[service]``): a service case (SV1) runs it in place of its
        own example service; ``None``: the case's example."""
        self.commit: CommitStrategy | None = None
        """The application's commit strategy (the gate's ``[consumer] commit``): every member the case starts
        commits this way, whatever strategy the case asks for; ``None``: the case's."""

    def default_traffic(self, traffic: Traffic | None, rate: float | None) -> Traffic | None:
        """``traffic``, else the run's :attr:`traffic` (its rate pattern dropped for a producer without a
        rate: a case's prefill keeps its pace)."""
        if traffic is not None or self.traffic is None:
            return traffic
        if rate is None:
            return dataclasses.replace(self.traffic, burst=None, steps=None)
        return self.traffic

    def _host(self) -> WorkerHost:
        if self.host is None:
            raise ScenarioError("these workers belong to no run: start workers from a ScenarioRun")
        return self.host

    @property
    def context(self) -> RunContext:
        """The run's context (the run builds it)."""
        return self._host().context

    def client_bootstrap(self, client_path: str) -> str:
        """The cluster's addresses on ``client_path`` (the run supplies them)."""
        return self._host().client_bootstrap(client_path)

    def java_worker(self) -> JavaWorker:
        """The Java client worker for the cluster's Kafka version (the run supplies it)."""
        return self._host().java_worker()

    def context_on(self, client_path: str | None) -> RunContext:
        """The run's context, bootstrapped on ``client_path`` (``ext1``, ...: the cluster's extra paths)
        instead of the shared ``ext``: a worker started on it can be cut or slowed alone
        (``run.fault(Refuse, worker)``, :mod:`chaos.faults.client`). ``None``: the run's context."""
        if client_path is None:
            return self.context
        return dataclasses.replace(self.context, bootstrap_servers=self.client_bootstrap(client_path))

    def stream_context(
        self,
        name: str,
        client: ClientProfile | str | None,
        client_path: str | None = None,
        role: ProducerRole = "app",
    ) -> RunContext:
        """The context of producer ``name``: the run's (on ``client_path``), with ``client`` — a profile or
        a profile's name — in place of the variant's when given, which makes ``name`` a stream of its own
        (:attr:`streams`). ``role="input"``: the producer feeds a consume-transform-produce worker, and is a
        plain idempotent one (``IDEMPOTENT``, no ``transactional.id``) whatever the variant's profile,
        unless ``client`` names another non-transactional profile."""
        if role not in PRODUCER_ROLES:
            raise ConfigError(
                f"producer {name}: role expected 'app' (the variant's client) or 'input' (a plain "
                f"idempotent producer feeding a transform); got {role!r}"
            )
        if role == "input":
            chosen_input = profile(client) if isinstance(client, str) else (client or IDEMPOTENT)
            if chosen_input.transactional:
                raise ConfigError(
                    f"producer {name}: role='input' is a plain producer, and the client profile "
                    f"{chosen_input.name!r} is transactional: leave client= out (IDEMPOTENT), or use "
                    "run.txn_producer for a transactional input"
                )
            client = chosen_input
        context = self.context_on(client_path)
        if client is None:
            return context
        chosen = profile(client) if isinstance(client, str) else client
        if self.streams.get(name, chosen.guarantee) != chosen.guarantee:
            raise ScenarioError(
                f"producer {name} already claims {self.streams[name]}; a stream keeps one guarantee (give "
                "the other producer another name)"
            )
        self.streams[name] = chosen.guarantee
        return dataclasses.replace(context, client=chosen)

    def on_close(self, closer: Callable[[], None]) -> None:
        """Run ``closer`` when the run ends (before healing), e.g. to stop a group member."""
        self._closers.append(closer)

    def stop_workers(self, *, interrupted: bool = False) -> list[str]:
        """Run the closers (last registered first), then stop the samplers; the closers' errors.
        ``interrupted``: see :attr:`interrupting`."""
        self.interrupting = interrupted
        errors: list[str] = []
        for closer in reversed(self._closers):
            try:
                closer()
            except Exception as exc:
                errors.append(repr(exc))
        self._closers.clear()
        for sampler in self._samplers.values():
            with contextlib.suppress(Exception):
                sampler.stop()
        self._samplers.clear()
        return errors

    def sampler(self, interval_s: float = 0.5, group: bool = False) -> ClusterSampler:
        """Start the cluster-state sampler on the run's topic (and group); stopped by :meth:`finish`."""
        return self._sample("sampler", ClusterSampler(self.context, group=group, interval_s=interval_s))

    def introspect(self, interval_s: float = 0.5) -> None:
        """Record the topic's leaders and ISR every ``interval_s``: ``cluster_state`` events of process
        ``introspect`` from a :class:`~chaos.workload.ClusterSampler` that sends one raw Metadata request
        to one broker at a time (2 s timeout, the next broker on error), so it keeps answering while a
        broker is crashed or cut. Lighter than :meth:`sampler` (no controller, no group). Stopped by
        :meth:`finish`."""
        if not 0.1 <= interval_s <= 5:
            raise ScenarioError(f"introspect(interval_s={interval_s}): expected 0.1..5 s")
        sampler = ClusterSampler(
            self.context, interval_s=interval_s, process=INTROSPECT_PROCESS, controller=False
        )
        self._sample(INTROSPECT_PROCESS, sampler)

    def _sample(self, name: str, sampler: ClusterSampler) -> ClusterSampler:
        if name in self._samplers:
            raise ScenarioError(f"the run's {name} is already running")
        self._samplers[name] = sampler.start()
        return sampler

    def producer_settings(self, name: str) -> dict[str, Any]:
        """The effective producer configuration of the variant (for the record)."""
        context = self.context
        return producer_config(context.client, context.bootstrap_servers, name, context.time)

    def producer(
        self,
        name: str = "producer-0",
        *,
        count: int | None = None,
        rate: float | None = 100.0,
        duration_s: float | None = None,
        overrides: Sequence[tuple[str, Any]] = (),
        flush_timeout_s: float = 30.0,
        client_path: str | None = None,
        client: ClientProfile | str | None = None,
        topic: str | None = None,
        keys: int | _Unset | None = UNSET,
        traffic: Traffic | None = None,
        role: ProducerRole = "app",
    ) -> AnyProducer:
        """Start a producer with the variant's client configuration; joined (or stopped) by the caller.
        ``client_path``: see :meth:`context_on`. ``client``: a client profile of its own (see
        :meth:`stream_context`). ``topic``: another topic than the run's (a transforming worker's input).
        ``keys``: the key space (``None``: keyless; over the traffic's); ``traffic``: the records' shape
        (:class:`~chaos.workload.Traffic`); ``role="input"``: a plain idempotent producer even under a
        transactional variant (see :meth:`stream_context`).
        On the Java client (:attr:`client_library`) a :class:`~chaos.workload.java_client.JavaProducer`
        with the same interface and events (``keys`` only: a traffic shape is refused there)."""
        spec_keys, shaped = producer_traffic(keys, self.default_traffic(traffic, rate))
        spec = ProducerSpec(
            name=name,
            topic=topic,
            rate=rate,
            count=count,
            duration_s=duration_s,
            keys=spec_keys,
            flush_timeout_s=flush_timeout_s,
            overrides=tuple(overrides),
            traffic=shaped,
        )
        context = self.stream_context(name, client, client_path, role)
        worker: AnyProducer
        if self.client_library == "java":
            worker = JavaProducer(context, spec, self.java_worker())
        else:
            worker = ProducerWorker(context, spec)
        self.on_close(lambda: _quiet(lambda: worker.stop(hasty=self.interrupting)))
        return worker.start()

    def process_producer(
        self,
        name: str = "producer-0",
        *,
        count: int | None = None,
        rate: float | None = 100.0,
        duration_s: float | None = None,
        checkpoint: Checkpoint = "ack",
        overrides: Sequence[tuple[str, Any]] = (),
        flush_timeout_s: float = 30.0,
        client_path: str | None = None,
        client: ClientProfile | str | None = None,
        keys: int | _Unset | None = UNSET,
        traffic: Traffic | None = None,
        role: ProducerRole = "app",
    ) -> ProcessProducer:
        """Start a producer in a child process (:mod:`chaos.workload.producer_process`) that checkpoints what
        it considers sent (``checkpoint``: the last ack or the last send) in the run's directory: ``crash()``
        SIGKILLs it, ``start()`` again resumes at the checkpoint, ``pause()`` / ``resume()`` freeze it. The
        run stops it when it ends (unless it was killed). ``client_path``: see :meth:`context_on`;
        ``client``, ``role``: see :meth:`stream_context`; ``keys``, ``traffic``: see :meth:`producer` (a
        resent value is the same record: every draw is a function of the seed and the sequence)."""
        spec_keys, shaped = producer_traffic(keys, self.default_traffic(traffic, rate))
        spec = ProcessProducerSpec(
            name=name,
            rate=rate,
            count=count,
            duration_s=duration_s if duration_s is not None or count is not None else 30.0,
            checkpoint=checkpoint,
            keys=spec_keys,
            flush_timeout_s=flush_timeout_s,
            overrides=tuple(overrides),
            traffic=shaped,
        )
        worker = ProcessProducer(self.stream_context(name, client, client_path, role), spec)

        def close() -> None:
            if worker.running:
                worker.stop()

        self.on_close(close)
        return worker.start()

    def txn_producer(
        self,
        name: str = "txn-producer-0",
        *,
        txn_size: int = 10,
        rate: float | None = 100.0,
        count: int | None = None,
        duration_s: float | None = None,
        crash_in_txn: int | None = None,
        freeze_in_txn: int | None = None,
        overrides: Mapping[str, Any] | None = None,
        client: ClientProfile | str | None = None,
        flush_timeout_s: float = 30.0,
        abort_rate: float = 0.0,
        abort_txns: tuple[int, ...] = (),
        keys: int | _Unset | None = UNSET,
        traffic: Traffic | None = None,
    ) -> TransactionalProducer:
        """Start a transactional producer (:mod:`chaos.workload.txn_producer`) in a child process: the
        producer's sends in transactions of ``txn_size``, every transaction's begin and end recorded, so the
        audit judges each send by its transaction. ``client``: a transactional client profile when the
        variant's is not (default: the variant's; see :meth:`stream_context`). ``crash_in_txn`` /
        ``freeze_in_txn``: the transaction in which it SIGKILLs / SIGSTOPs itself (``resume()`` thaws it).
        The run stops it when it ends (unless it was killed); ``wait()``, ``stop()``, ``crash()``,
        ``pause()`` / ``resume()`` are the caller's.
        ``abort_rate`` / ``abort_txns``: transactions aborted on purpose (drawn from the run's seed).
        ``keys``, ``traffic``: see :meth:`producer`."""
        spec_keys, shaped = producer_traffic(keys, self.default_traffic(traffic, rate))
        spec = TxnProducerSpec(
            name=name,
            txn_size=txn_size,
            rate=rate,
            count=count,
            duration_s=duration_s if duration_s is not None or count is not None else 30.0,
            crash_in_txn=crash_in_txn,
            freeze_in_txn=freeze_in_txn,
            abort_rate=abort_rate,
            abort_txns=abort_txns,
            abort_seed=self.context.seed or 0,
            keys=spec_keys,
            flush_timeout_s=flush_timeout_s,
            overrides=tuple((overrides or {}).items()),
            traffic=shaped,
        )
        worker = TransactionalProducer(self.stream_context(name, client), spec)

        def close() -> None:
            if worker.returncode != -signal.SIGKILL:  # a crash (crash_in_txn, crash()) is already over
                worker.stop()

        self.on_close(close)
        return worker.start()

    def member_spec(
        self,
        name: str,
        *,
        processing: Processing | None = None,
        batch_size: int = 100,
        overrides: dict[str, Any] | None = None,
        duration_s: float = 120.0,
        topic: str | None = None,
        strategy: CommitStrategy = "commit_after",
        record_delivery: DeliveryPoint = "consume",
        lagging: bool = False,
    ) -> MemberSpec:
        """A group member of the run's group (default: commits after processing; :attr:`commit` over
        ``strategy`` when set) with the variant's consumer configuration, not started (for process members,
        or a member started later). It stops itself after ``duration_s``.

        ``lagging``: its fetch position stays next to what it processed, so a slow member (``processing``)
        lags on the broker too — without it the client prefetches (librdkafka: 100,000 records per
        partition, up to 64 MB in all) and a slow member lags only in its own memory. On librdkafka
        ``queued.min.messages=1``, ``queued.max.messages.kbytes=1`` and ``max.partition.fetch.bytes=1024``
        (the Java client: the last one); ``overrides`` win over them."""
        prefetch: dict[str, Any] = {}
        if lagging:
            prefetch["max.partition.fetch.bytes"] = 1024
            if self.client_library != "java":
                prefetch.update({"queued.min.messages": 1, "queued.max.messages.kbytes": 1})
        return MemberSpec(
            name=name,
            strategy=self.commit or strategy,
            processing=processing or Processing(),
            batch_size=batch_size,
            duration_s=duration_s,
            record_delivery=record_delivery,
            topic=topic,
            overrides=tuple({**prefetch, **(overrides or {})}.items()),
        )

    def member(
        self,
        name: str,
        *,
        processing: Processing | None = None,
        batch_size: int = 100,
        overrides: dict[str, Any] | None = None,
        duration_s: float = 120.0,
        topic: str | None = None,
        strategy: CommitStrategy = "commit_after",
        record_delivery: DeliveryPoint = "consume",
        client_path: str | None = None,
        lagging: bool = False,
    ) -> ThreadMember | JavaMember:
        """Start a group member (:meth:`member_spec`) in a thread — on the Java client
        (:attr:`client_library`) in a child process, :class:`~chaos.workload.java_client.JavaMember`; the run
        stops it when it ends, and it stops itself after ``duration_s``. ``client_path``: see
        :meth:`context_on`; ``lagging``: see :meth:`member_spec`."""
        spec = self.member_spec(
            name,
            processing=processing,
            batch_size=batch_size,
            overrides=overrides,
            duration_s=duration_s,
            topic=topic,
            strategy=strategy,
            record_delivery=record_delivery,
            lagging=lagging,
        )
        context = self.context_on(client_path)
        member: ThreadMember | JavaMember
        if self.client_library == "java":
            member = JavaMember(context, spec, self.java_worker())
        else:
            member = ThreadMember(context, spec)
        self.on_close(lambda: member.stop(hasty=self.interrupting))
        return member.start()

    def process_member(self, spec: MemberSpec) -> ProcessMember | JavaMember:
        """A group member of ``spec`` in a child process the run can kill (``crash()``: SIGKILL, no
        LeaveGroup), not started: a :class:`~chaos.workload.ProcessMember` on librdkafka, a
        :class:`~chaos.workload.java_client.JavaMember` on the Java client (:attr:`client_library`). The
        caller starts and stops it."""
        if self.client_library == "java":
            return JavaMember(self.context, spec, self.java_worker())
        return ProcessMember(self.context, spec)

    def transform(
        self, spec: TxnWorkerSpec, *, client: ClientProfile | None = None, group: str | None = None
    ) -> TransactionalWorker | JavaTransform:
        """A consume-transform-produce worker of ``spec`` (transactional, or the at-least-once transform), in
        a child process, not started: a :class:`~chaos.workload.transactional.TransactionalWorker` on
        librdkafka, a :class:`~chaos.workload.java_client.JavaTransform` on the Java client
        (:attr:`client_library`). ``client``: its client profile instead of the variant's (it must be
        transactional exactly when ``spec`` is); ``group``: its consumer group instead of the run's. The
        caller starts and stops it."""
        context = self.context
        if client is not None:
            context = dataclasses.replace(context, client=client)
        if group is not None:
            context = dataclasses.replace(context, group=group)
        if self.client_library == "java":
            return JavaTransform(context, spec, self.java_worker())
        return TransactionalWorker(context, spec)

    def startup_probe(
        self, *, timeout_s: float, group: bool = False, process: str = "probe", topic: str | None = None
    ) -> bool:
        """What a restarted application's consumer does first (:func:`~chaos.workload.startup_probe`:
        the topic's metadata, then with ``group`` the group's committed offsets, each call within
        ``timeout_s``), on the run's client library — on the Java client ``partitionsFor`` / ``committed``
        of a ``KafkaConsumer`` with the variant's consumer configuration
        (:func:`~chaos.workload.java_client.java_startup_probe`). Whether every call succeeded."""
        if self.client_library == "java":
            return java_startup_probe(
                self.context,
                self.member_spec(process, topic=topic),
                self.java_worker(),
                timeout_s=timeout_s,
                group=group,
                topic=topic,
            )
        return startup_probe(self.context, timeout_s=timeout_s, group=group, process=process, topic=topic)

    def restore_reader(self, *, call_timeout_s: float, poll_timeout_s: float, k: int = 2) -> RestoreReader:
        """The seed's restore reader (end offsets → assign → seek(end − k) → poll) on the run's topic."""
        return RestoreReader(self.context, k=k, poll_timeout_s=poll_timeout_s, call_timeout_s=call_timeout_s)


def _quiet(stop: Callable[[], object]) -> None:
    with contextlib.suppress(Exception):
        stop()


P = ParamSpec("P")
R = TypeVar("R")


class HasWorkers(Protocol):
    workers: RunWorkers


class Delegated(Generic[P, R]):
    """A method of :class:`RunWorkers` offered on the run that holds them: ``producer =
    Delegated(RunWorkers.producer)`` in a run's class makes ``run.producer(...)`` call
    ``run.workers.producer(...)``, with its signature and docstring."""

    def __init__(self, method: Callable[Concatenate[RunWorkers, P], R]) -> None:
        self.method = method
        self.__doc__ = method.__doc__

    @overload
    def __get__(self, run: None, owner: type) -> Delegated[P, R]: ...

    @overload
    def __get__(self, run: HasWorkers, owner: type) -> Callable[P, R]: ...

    def __get__(self, run: HasWorkers | None, owner: type) -> Delegated[P, R] | Callable[P, R]:
        if run is None:
            return self
        method, workers = self.method, run.workers

        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            return method(workers, *args, **kwargs)

        call.__doc__ = method.__doc__
        call.__name__ = method.__name__
        return call
