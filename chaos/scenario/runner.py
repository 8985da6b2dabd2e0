"""Running one scenario variant: the pipeline cluster → faults → workload → history → audit → report.

A scenario test opens a :class:`ScenarioRun` on the session's cluster, composes its fault and workload
timeline with the run's helpers, and calls :meth:`ScenarioRun.finish`, which heals, drains, captures the
broker logs, closes the history, audits it and returns a :class:`ScenarioResult` (the audit result and the
history) for the test's assertions. Everything the run produced sits in one directory
(``<test run_dir>/<run id>/``): ``scenario.json``, ``history/``, ``audit.json``, ``logs/`` — what the
report hook renders into ``report.html`` after the test.

Faults are built through :meth:`ScenarioRun.fault`, on the run's own :class:`~chaos.faults.base.FaultLog`,
whose records the run bridges into the history as :class:`~chaos.history.FaultEvent`s (inject and heal).
"""

from __future__ import annotations

import contextlib
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, TypeVar

from chaos.cluster import questions
from chaos.faults.base import Fault, FaultLog, FaultRecord
from chaos.history import (
    ClientLog,
    Event,
    Recorder,
    read_events,
)
from chaos.run.events import Isolation
from chaos.run.evidence import EvidenceLog, write_evidence
from chaos.run.manifest import ScenarioInfo, TopicInfo, write_scenario
from chaos.scenario.bridge import fault_event
from chaos.scenario.model import Scenario, ScenarioError, Variant
from chaos.scenario.result import ScenarioResult
from chaos.scenario.views import acked_ids, delivered_ids
from chaos.workload import (
    ClientProfile,
    ClusterSampler,
    CommitStrategy,
    DeliveryPoint,
    MemberSpec,
    Processing,
    ProducerSpec,
    ProducerWorker,
    RestoreReader,
    ThreadMember,
    TimeProfile,
    consumer_config,
    custom_profile,
    drain,
    producer_config,
    time_profile,
)

if TYPE_CHECKING:
    from chaos.audit.run import Engine
    from chaos.cluster.cluster import KafkaCluster
    from chaos.run.events import PartitionState as LiveState

F = TypeVar("F", bound=Fault)
Scalar = str | int | float | bool | None

INTROSPECT_PROCESS: Final = "introspect"
MAX_WAIT_S: Final = 300.0


class ScenarioRun:
    """One variant of one scenario on a running cluster; a context manager.

    ``__enter__`` writes ``scenario.json`` and opens the history; :meth:`finish` ends the run;
    ``__exit__`` (on an exception, or without :meth:`finish`) heals, captures logs, closes the history and
    records the error in ``scenario.json`` — so a crashed run still leaves a readable run directory.
    """

    def __init__(
        self,
        scenario: Scenario,
        variant: Variant | str,
        cluster: KafkaCluster,
        run_dir: Path,
        *,
        seed: int | None = None,
        profile: str = "ci",
        nodeid: str | None = None,
        engine: Engine = "reference",
        spark_master: str = "local[2]",
        strict_symptoms: bool | None = None,
    ) -> None:
        self.scenario = scenario
        self.variant = scenario.variant(variant) if isinstance(variant, str) else variant
        if self.variant not in scenario.variants:
            raise ScenarioError(f"variant {self.variant.name!r} is not one of {scenario.scenario_id}'s")
        self.cluster = cluster
        self.seed = seed
        self.time: TimeProfile = time_profile(profile)
        self.strict_symptoms = profile == "faithful" if strict_symptoms is None else strict_symptoms
        self.nodeid = nodeid
        self.engine: Engine = engine
        self.spark_master = spark_master
        self.run_id = (
            f"{scenario.case_id.lower()}-{self.variant.name.replace('_', '-')}-{uuid.uuid4().hex[:6]}"
        )
        self.dir = run_dir / self.run_id
        self.topic = f"t-{self.run_id}"
        self.group = f"g-{self.run_id}"
        self.faults = FaultLog()
        self.faults.subscribe(self._on_fault)
        self.client: ClientProfile = custom_profile(
            self.variant.client_profile or "custom",
            self.variant.client_guarantee or self.variant.guarantee,  # type: ignore[arg-type]  # validated
            producer=dict(self.variant.producer_config or {}),
            consumer=dict(self.variant.consumer_config or {}),
            description=self.variant.description,
        )
        self._info = ScenarioInfo(scenario_id=f"{scenario.scenario_id}[{self.variant.name}]")
        self._history: Recorder | None = None
        self._events: list[Event] = []
        self._lock = threading.Lock()
        self._sampler: ClusterSampler | None = None
        self._introspector: ClusterSampler | None = None
        self._closers: list[Callable[[], None]] = []
        self._finished = False
        self.result: ScenarioResult | None = None
        self.started = 0.0

    # ---- lifecycle ---------------------------------------------------------------------------------

    def __enter__(self) -> ScenarioRun:
        self.dir.mkdir(parents=True, exist_ok=False)
        self._info = ScenarioInfo(
            scenario_id=f"{self.scenario.scenario_id}[{self.variant.name}]",
            title=f"{self.scenario.title} — {self.variant.name}",
            case_id=self.scenario.case_id,
            source=self.scenario.source,
            symptom=self.scenario.symptom,
            guarantee=self.variant.guarantee,
            client_profile=self.variant.client_profile,
            producer_config=dict(self.variant.producer_config or {}),
            consumer_config=dict(self.variant.consumer_config or {}),
            broker_config=dict(self.cluster.config.broker_config()),
            time_profile=self.time.name,
            brokers=len(self.cluster.brokers) or None,
            seed=self.seed,
            expected_symptoms=self.scenario.symptoms(self.variant),
            remediation=self.scenario.remediation,
            nodeid=self.nodeid or self.scenario.nodeid(self.variant.name),
            started_ts=time.time(),
        )
        write_scenario(self.dir, self._info)
        self._history = Recorder(self.dir, self.run_id)
        self.started = time.monotonic()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._finished:
            return
        error = None
        if exc is not None:
            error = "".join(traceback.format_exception_only(exc)).strip()[-2000:]
        self._teardown()
        self._close_history()
        self._write_end("error" if exc is not None else None, error)

    # ---- the run's sink and waits -----------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap_servers

    def record(self, event: Event) -> None:
        """The run's sink: into the history, and into the live copy waits read."""
        if self._history is None:
            raise ScenarioError("the run is not open: use `with ScenarioRun(...) as run:`")
        self._history.record(event)
        with self._lock:
            self._events.append(event)

    def events(self) -> list[Event]:
        """A snapshot of what was recorded so far (record order)."""
        with self._lock:
            return list(self._events)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def wait_for(
        self, what: str, condition: Callable[[list[Event]], bool], timeout_s: float, interval_s: float = 0.1
    ) -> float:
        """Poll ``condition(events)`` until true; returns the seconds it took (AssertionError on timeout)."""
        if not 0 < timeout_s <= MAX_WAIT_S:
            raise ScenarioError(f"wait_for({what!r}): timeout_s must be in (0, {MAX_WAIT_S}]")
        started = time.monotonic()
        while True:
            if condition(self.events()):
                return time.monotonic() - started
            if time.monotonic() - started > timeout_s:
                raise AssertionError(f"{what}: not within {timeout_s:.0f} s")
            time.sleep(interval_s)

    def wait_quiet(
        self, what: str, select: Callable[[Event], bool], quiet_s: float, timeout_s: float
    ) -> float:
        """Wait until no event matching ``select`` was recorded for ``quiet_s`` (e.g. a group that has
        caught up); returns the seconds it took. AssertionError if it never quiets within ``timeout_s``."""
        now = time.monotonic
        return self.wait_for(
            what,
            lambda ev: now() - max((e.mono for e in ev if select(e)), default=self.started) >= quiet_s,
            timeout_s,
        )

    def wait_until(self, what: str, condition: Callable[[], bool], timeout_s: float) -> float:
        """Poll a cluster-side ``condition()`` (introspection) until true; errors count as false."""
        if not 0 < timeout_s <= MAX_WAIT_S:
            raise ScenarioError(f"wait_until({what!r}): timeout_s must be in (0, {MAX_WAIT_S}]")
        started = time.monotonic()
        last = ""
        while time.monotonic() - started <= timeout_s:
            try:
                if condition():
                    return time.monotonic() - started
            except Exception as exc:  # a broker that does not answer yet: keep polling
                last = f" (last error: {exc})"
            time.sleep(0.2)
        raise AssertionError(f"{what}: not within {timeout_s:.0f} s{last}")

    # ---- composition helpers -----------------------------------------------------------------------

    def create_topic(self, partitions: int = 3, replication_factor: int = 3) -> str:
        """Create the run's topic with the variant's topic config; recorded in ``scenario.json``."""
        config = self.variant.topic_settings()
        self.cluster.create_topic(self.topic, partitions, replication_factor, config)
        self._info = replace(
            self._info,
            topic=TopicInfo(
                self.topic, partitions, replication_factor, dict(self.variant.topic_config or {})
            ),
        )
        write_scenario(self.dir, self._info)
        return self.topic

    def fault(self, kind: Callable[..., F], *args: Any, **kwargs: Any) -> F:
        """Build a fault on this cluster that records into the run's history (not yet injected)."""
        return kind(self.cluster, *args, log=self.faults, **kwargs)

    def sampler(self, interval_s: float = 0.5, group: bool = False) -> ClusterSampler:
        """Start the cluster-state sampler on the run's topic (and group); stopped by :meth:`finish`."""
        if self._sampler is not None:
            raise ScenarioError("the run's sampler is already running")
        self._sampler = ClusterSampler(
            self.bootstrap,
            self.record,
            self.run_id,
            topics=[self.topic],
            group=self.group if group else None,
            interval_s=interval_s,
        ).start()
        return self._sampler

    def end_offsets(self, timeout_s: float = 10.0) -> dict[int, int]:
        """The topic's end offsets (high watermarks) per partition, read now (for waits, not assertions)."""
        return questions.end_offsets(self.cluster, self.topic, timeout_s)

    def wait_caught_up(self, timeout_s: float = 30.0) -> float:
        """Wait until the group has delivered, in every partition, the record before the end offset."""
        from chaos.history import Delivery

        ends = {p: end for p, end in self.end_offsets().items() if end > 0}

        def caught_up(events: list[Event]) -> bool:
            last: dict[int, int] = {}
            for e in events:
                if isinstance(e, Delivery) and e.topic == self.topic:
                    last[e.partition] = max(last.get(e.partition, -1), e.offset)
            return all(last.get(p, -1) >= end - 1 for p, end in ends.items())

        return self.wait_for(f"the group reached the end offsets {ends}", caught_up, timeout_s)

    def introspect(self, interval_s: float = 0.5) -> None:
        """Record the topic's leaders and ISR every ``interval_s``: ``cluster_state`` events of process
        ``introspect`` from a :class:`~chaos.workload.ClusterSampler` that sends one raw Metadata request
        to one broker at a time (2 s timeout, the next broker on error), so it keeps answering while a
        broker is crashed or cut. Lighter than :meth:`sampler` (no controller, no group). Stopped by
        :meth:`finish`."""
        if self._introspector is not None:
            raise ScenarioError("the run's introspection is already running")
        if not 0.1 <= interval_s <= 5:
            raise ScenarioError(f"introspect(interval_s={interval_s}): expected 0.1..5 s")
        self._introspector = ClusterSampler(
            self.bootstrap,
            self.record,
            self.run_id,
            topics=[self.topic],
            interval_s=interval_s,
            process=INTROSPECT_PROCESS,
            controller=False,
        ).start()

    def producer_settings(self, name: str) -> dict[str, Any]:
        """The effective producer configuration of the variant (for the record)."""
        return producer_config(self.client, self.bootstrap, name, self.time)

    def producer(
        self,
        name: str = "producer-0",
        *,
        count: int | None = None,
        rate: float | None = 100.0,
        duration_s: float | None = None,
        overrides: Sequence[tuple[str, Any]] = (),
        flush_timeout_s: float = 30.0,
    ) -> ProducerWorker:
        """Start a producer with the variant's client configuration; joined (or stopped) by the caller."""
        worker = ProducerWorker(
            ProducerSpec(
                name=name,
                topic=self.topic,
                rate=rate,
                count=count,
                duration_s=duration_s,
                flush_timeout_s=flush_timeout_s,
                overrides=tuple(overrides),
            ),
            self.bootstrap,
            self.client,
            self.record,
            self.run_id,
            time_profile=self.time,
        )
        self._closers.append(lambda: _quiet(worker.stop))
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
    ) -> MemberSpec:
        """A group member of the run's group (default: commits after processing) with the variant's consumer
        configuration, not started (for process members, or a member started later)."""
        return MemberSpec(
            name=name,
            run_id=self.run_id,
            group=self.group,
            topic=topic or self.topic,
            config=consumer_config(self.client, self.bootstrap, name, self.group, self.time, overrides),
            strategy=strategy,
            processing=processing or Processing(),
            batch_size=batch_size,
            duration_s=duration_s,
            record_delivery=record_delivery,
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
    ) -> ThreadMember:
        """Start a group member (:meth:`member_spec`) in a thread; the run stops it when it ends."""
        member = ThreadMember(
            self.member_spec(
                name,
                processing=processing,
                batch_size=batch_size,
                overrides=overrides,
                duration_s=duration_s,
                topic=topic,
                strategy=strategy,
                record_delivery=record_delivery,
            ),
            self.record,
        )
        self.on_close(lambda: member.stop())
        return member.start()

    def prefill(self, records: int, *, member: str = "consumer-0", timeout_s: float = 30.0) -> None:
        """Produce ``records`` values (as fast as acks come) and wait until a one-member group (commit after
        processing) delivered every acknowledged one; the member is stopped after."""
        worker = self.member(member, batch_size=100)
        stats = self.producer(count=records, rate=None, duration_s=timeout_s).join()
        if stats.ok != records:
            raise ScenarioError(f"prefill: {stats.ok} of {records} values acknowledged ({stats})")
        self.wait_for(
            "the group delivered every prefilled record",
            lambda ev: acked_ids(ev) <= delivered_ids(ev),
            timeout_s,
        )
        worker.stop()

    def target_partition(self, *, avoid_coordinator: bool = False) -> LiveState:
        """The partition to aim a fault at: see :func:`chaos.cluster.questions.target_partition`."""
        return questions.target_partition(
            self.cluster, self.topic, self.group, avoid_coordinator=avoid_coordinator
        )

    def restore_reader(self, *, call_timeout_s: float, poll_timeout_s: float, k: int = 2) -> RestoreReader:
        """The seed's restore reader (end offsets → assign → seek(end − k) → poll) on the run's topic."""
        return RestoreReader(
            self.bootstrap,
            self.topic,
            self.record,
            self.run_id,
            k=k,
            poll_timeout_s=poll_timeout_s,
            call_timeout_s=call_timeout_s,
            time_profile=self.time,
        )

    def on_close(self, closer: Callable[[], None]) -> None:
        """Run ``closer`` when the run ends (before healing), e.g. to stop a group member."""
        self._closers.append(closer)

    def note(self, text: str) -> None:
        """A timeline marker in the history (``client_log`` facility ``SCENARIO`` from ``scenario``)."""
        self.record(
            ClientLog(
                run_id=self.run_id, process="scenario", level="notice", message=text, facility="SCENARIO"
            )
        )

    def converged(self, full_isr: bool = False) -> bool:
        """Every broker names the same leaders for the topic (:func:`chaos.cluster.questions.converged`)."""
        return questions.converged(self.cluster, self.topic, full_isr)

    def wait_converged(self, timeout_s: float = 60.0) -> bool:
        """Wait (bounded) for :meth:`converged`; a timeout is noted in the history, not raised."""
        deadline = time.monotonic() + timeout_s
        while not self.converged():
            if time.monotonic() >= deadline:
                self.note(f"the brokers did not agree on the topic's leaders within {timeout_s:.0f} s")
                return False
            time.sleep(0.5)
        return True

    # ---- end ---------------------------------------------------------------------------------------

    def finish(
        self,
        *,
        drain_timeout_s: float = 60.0,
        isolations: Sequence[Isolation] = ("read_uncommitted", "read_committed"),
        engine: Engine | None = None,
    ) -> ScenarioResult:
        """Heal, drain the topic, capture broker logs, close the history, audit; ``audit.json`` written.

        ``isolations``: the drain's isolation levels, i.e. what the audit takes as the topic's contents
        (``("read_committed",)`` for a transactional output, whose aborted copies are not its contents).
        ``engine``: the audit engine for this run (default: the run's).
        """
        if self._history is None or self._finished:
            raise ScenarioError("finish() needs an open run and may be called once")
        from chaos.audit.run import TopicSource
        from chaos.gate.run import audit_run

        self._teardown()
        if self._info.topic is not None:
            self.wait_converged()
        drained = tuple(
            drain(
                self.bootstrap,
                self.topic,
                self.record,
                self.run_id,
                timeout_s=drain_timeout_s,
                time_profile=self.time,
                isolations=isolations,
            )
        )
        self._close_history()
        if engine is not None:
            self.engine = engine
        topic = TopicSource(self.bootstrap, (self.topic,)) if self.engine == "spark" else None
        audit = audit_run(
            self.dir,
            guarantee=str(self.variant.guarantee),
            engine=self.engine,
            master=self.spark_master,
            topic=topic,
        )
        self._finished = True
        self._write_end(None, None)
        result = ScenarioResult(
            run_dir=self.dir,
            run_id=self.run_id,
            topic=self.topic,
            audit=audit,
            events=tuple(read_events(self.dir)),
            drained=drained,
            expected_verdict=self.variant.expected_verdict,
            checks=EvidenceLog(self.strict_symptoms),
        )
        result.check_declared(self.scenario.symptoms(self.variant))
        write_evidence(self.dir, result.evidence)
        print(f"\n{self.variant.name}: {result.summary()}")
        self.result = result
        return result

    def _teardown(self) -> None:
        errors: list[str] = []
        for closer in reversed(self._closers):
            try:
                closer()
            except Exception as exc:
                errors.append(repr(exc))
        self._closers.clear()
        for sampler in (self._introspector, self._sampler):
            if sampler is not None:
                with contextlib.suppress(Exception):
                    sampler.stop()
        self._introspector = self._sampler = None
        for fault in self.faults.active():
            try:
                fault.heal()
            except Exception as exc:
                errors.append(repr(exc))
        if errors:
            with contextlib.suppress(Exception):
                self.note("teardown errors: " + "; ".join(errors)[:1000])

    def _capture_logs(self) -> None:
        with contextlib.suppress(Exception):
            self.cluster.capture_logs(self.dir / self._info.log_dir)

    def _close_history(self) -> None:
        if self._history is not None:
            history, self._history = self._history, None
            self._capture_logs()
            history.close()

    def _write_end(self, outcome: str | None, error: str | None) -> None:
        self._info = replace(self._info, ended_ts=time.time(), outcome=outcome, error=error)
        write_scenario(self.dir, self._info)

    def _on_fault(self, action: str, record: FaultRecord) -> None:
        if self._history is not None:
            self.record(fault_event(self.run_id, action, record))


def _quiet(stop: Callable[[], object]) -> None:
    with contextlib.suppress(Exception):
        stop()
