"""Running one scenario variant: the pipeline cluster → faults → workload → history → audit → report.

A scenario test opens a :class:`ScenarioRun` on the session's cluster, composes its fault and workload
timeline with the run's helpers, and calls :meth:`ScenarioRun.finish`, which heals, drains, captures the
broker logs, closes the history, audits it and returns a :class:`ScenarioResult` (the audit result and the
history) for the test's assertions. Everything the run produced sits in one directory
(``<test run_dir>/<run id>/``): ``scenario.json``, ``history/``, ``audit.json``, ``logs/`` — what the
report hook renders into ``report.html`` after the test.

Workers get the run's :attr:`~ScenarioRun.context` (run id, bootstrap, topic, group, profiles, the run's
sink). Faults are built through :meth:`ScenarioRun.fault`, or run from a seeded plan by
:meth:`ScenarioRun.nemesis`, on the run's own :class:`~chaos.faults.base.FaultLog`, whose records the run
bridges into the history as :class:`~chaos.history.FaultEvent`s (inject and heal).
"""

from __future__ import annotations

import contextlib
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import cached_property
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, TypeVar

from chaos.audit.spark import SCENARIO_MASTER
from chaos.cluster import questions
from chaos.cluster.introspect import GROUP_SESSION_CONFIG, POLICY_CONFIGS
from chaos.faults.base import Fault, FaultLog, FaultRecord
from chaos.faults.heal import heal_faults, not_healed
from chaos.faults.nemesis import Nemesis
from chaos.faults.plan import KINDS, RESOLVED_PLAN_FILE, RUN_GROUP, RUN_TOPIC, Plan, generate_plan
from chaos.history import ClientLog, Event, Recorder
from chaos.run.events import Isolation, LogStart, TopicPolicy
from chaos.run.files import write_atomic
from chaos.run.layout import LOGS_DIR, PLAN_NAME
from chaos.run.manifest import ScenarioInfo, TopicInfo, write_scenario
from chaos.scenario import waits
from chaos.scenario.bridge import fault_event
from chaos.scenario.conclude import (
    audit_options,
    client_records,
    conclude,
    given_isolation,
    group_isolation,
    member_levels,
)
from chaos.scenario.describe import describe_run, scenario_id, variant_client
from chaos.scenario.model import Scenario, ScenarioError, Variant
from chaos.scenario.result import ScenarioResult
from chaos.scenario.views import MARK_FACILITY, acked_ids, delivered_ids, find_mark, mark_text
from chaos.scenario.workers import Delegated, RunWorkers
from chaos.service import Binding, Service, ServiceSpec
from chaos.workload import CommitStrategy, RunContext, Traffic, consumer_config, drain, time_profile
from chaos.workload.effective import announced, take_announced
from chaos.workload.java_build import JavaWorker, ensure_java_worker
from chaos.workload.java_client import check_client
from chaos.workload.readers import offset_bounds
from chaos.workload.tail import last_data_offsets

if TYPE_CHECKING:
    from chaos.audit.facts import AuditOptions
    from chaos.audit.run import Engine
    from chaos.cluster.cluster import KafkaCluster
    from chaos.run.events import PartitionState as LiveState
    from chaos.run.profiles import GroupProtocol

F = TypeVar("F", bound=Fault)

MAX_WAIT_S: Final = waits.MAX_WAIT_S
LOG_MARGIN_S: Final = 10.0
"""Broker log lines kept from before the run started (its logs are cut to its own window)."""


class ScenarioRun:
    """One variant of one scenario on a running cluster; a context manager. Its workload helpers
    (:meth:`producer`, :meth:`member`, :meth:`sampler`…) are those of its workers (:attr:`workers`, a
    :class:`~chaos.scenario.workers.RunWorkers` built on the run), offered as the run's own methods.

    ``__enter__`` writes ``scenario.json`` and opens the history; :meth:`finish` ends the run;
    ``__exit__`` (on an exception, or without :meth:`finish`) heals, captures logs, closes the history and
    records the error in ``scenario.json`` — so a crashed run still leaves a readable run directory.
    ``group_protocol``: the members' consumer-group protocol unless the variant sets ``group.protocol``
    (:meth:`~chaos.run.profiles.ClientProfile.with_group_protocol`; the plugin's ``--chaos-group-protocol``).
    ``client_library``: ``librdkafka`` or ``java``, the producers' client (:meth:`producer`; the plugin's
    ``--chaos-client``). ``duration_s``: how long a scenario with a workload of no fixed length runs (the
    plugin's ``--chaos-duration``; None: the scenario's own default). ``replay``: a saved plan that
    :meth:`plan` returns instead of drawing one (the plugin's ``--chaos-plan``, ``chaos replay``).
    ``fault_kinds``: the kinds :meth:`plan` draws from when the scenario names none (the plugin's
    ``--chaos-fault-kinds``; None: :data:`~chaos.faults.plan.KINDS`).
    """

    context_on = Delegated(RunWorkers.context_on)
    on_close = Delegated(RunWorkers.on_close)
    sampler = Delegated(RunWorkers.sampler)
    introspect = Delegated(RunWorkers.introspect)
    producer = Delegated(RunWorkers.producer)
    process_producer = Delegated(RunWorkers.process_producer)
    txn_producer = Delegated(RunWorkers.txn_producer)
    member_spec = Delegated(RunWorkers.member_spec)
    member = Delegated(RunWorkers.member)
    process_member = Delegated(RunWorkers.process_member)
    transform = Delegated(RunWorkers.transform)
    startup_probe = Delegated(RunWorkers.startup_probe)
    restore_reader = Delegated(RunWorkers.restore_reader)

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
        engine: Engine = "spark",
        spark_master: str = SCENARIO_MASTER,
        strict_symptoms: bool | None = None,
        group_protocol: GroupProtocol = "classic",
        client_library: str = "librdkafka",
        duration_s: float | None = None,
        replay: Plan | None = None,
        fault_kinds: tuple[str, ...] | None = None,
    ) -> None:
        self.workers = RunWorkers(self, check_client(client_library))
        self.scenario = scenario
        self.variant = scenario.variant(variant) if isinstance(variant, str) else variant
        if self.variant not in scenario.variants:
            raise ScenarioError(f"variant {self.variant.name!r} is not one of {scenario.scenario_id}'s")
        self.cluster = cluster
        if client_library == "java":
            self.java_worker()  # built (once per version) before the run starts, not in its first producer
        self.seed = seed
        self.time = time_profile(profile)
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
        declared = variant_client(self.variant)
        self.client = declared.with_group_protocol(group_protocol)
        self._left_to_broker = declared.moved_by(self.client)
        self._info = ScenarioInfo(scenario_id=scenario_id(scenario, self.variant))
        self._history: Recorder | None = None
        self._events: list[Event] = []
        self._lock = threading.Lock()
        self._nemesis: Nemesis | None = None
        self._plan: Plan | None = None
        self.duration_s = duration_s
        self.replay = replay
        self.fault_kinds = fault_kinds
        self._finished = False
        self.result: ScenarioResult | None = None
        self.started = 0.0

    @property
    def client_library(self) -> str:
        """The workers' client: ``librdkafka`` or ``java``."""
        return self.workers.client_library

    @property
    def commit(self) -> CommitStrategy | None:
        """How the team's application commits (the gate's ``[consumer] commit``): every member the run
        starts commits this way; ``None``: as the case asks."""
        return self.workers.commit

    @property
    def team_service(self) -> ServiceSpec | None:
        """The team's service (the gate's ``[service]``), which a service case runs in place of its own
        example; ``None``: the case's example."""
        return self.workers.team_service

    @property
    def length_s(self) -> float | None:
        """How long the run's workload is asked to run: the replayed plan's, else ``duration_s``."""
        return self.replay.workload_s if self.replay is not None else self.duration_s

    def not_applicable(self) -> str | None:
        """Why this run cannot reach its variant's verdict — too short (:meth:`too_short`), or its case does
        not happen on the run's client (``Variant.not_on_clients``) — else None: the test is skipped with
        it before the run opens."""
        short = self.too_short()
        if short:
            return short
        why = (self.variant.not_on_clients or {}).get(self.client_library)
        if why:
            case = f"{self.scenario.case_id} {self.variant.name}"
            return f"{case} does not apply on the {self.client_library} client: {why}"
        return None

    def too_short(self) -> str | None:
        """Why the run would be too short for its variant (``Variant.min_duration_s``), else None. A replay
        is never too short: it runs a given plan (a shrunk one may be short), not a search."""
        need = self.variant.min_duration_s
        if not need or self.replay is not None or (self.length_s or 0.0) >= need:
            return None
        given = f"{self.length_s:.0f} s" if self.length_s else "no --chaos-duration"
        return (
            f"{self.scenario.case_id} {self.variant.name} needs a workload of at least {need:.0f} s to reach "
            f"its verdict ({given}): pass --chaos-duration {max(need, 600.0) / 60:.0f}m"
        )

    @cached_property
    def context(self) -> RunContext:
        """What every worker of this run is handed: run id, dir, bootstrap, topic, group, the client and
        time profiles, the seed and :meth:`record` as the sink (built on first use: the cluster is up)."""
        return RunContext(
            run_id=self.run_id,
            bootstrap_servers=self.bootstrap,
            topic=self.topic,
            group=self.group,
            client=self.client,
            sink=self.record,
            time=self.time,
            run_dir=self.dir,
            seed=self.seed,
        )

    # ---- lifecycle ---------------------------------------------------------------------------------

    def __enter__(self) -> ScenarioRun:
        self.dir.mkdir(parents=True, exist_ok=False)
        self._update(
            describe_run(self.scenario, self.variant, self.cluster, self.time, self.seed, self.nodeid)
        )
        self._history = Recorder(self.dir, self.run_id)
        self.started = time.monotonic()
        if self._left_to_broker:
            self._move_session_to_the_group()
        return self

    def _move_session_to_the_group(self) -> None:
        """On the consumer protocol the variant's classic session keys become its group's configs (KIP-848:
        ``consumer.session.timeout.ms``…), so the case keeps its timing; noted in the history."""
        group = {
            GROUP_SESSION_CONFIG[k]: str(v)
            for k, v in self._left_to_broker.items()
            if k in GROUP_SESSION_CONFIG
        }
        left = ", ".join(f"{k}={v}" for k, v in sorted(self._left_to_broker.items()))
        if group:
            self.cluster.set_group_config(self.group, group)
        moved = f"set as group {self.group}'s {group}" if group else "the broker's group.consumer.* apply"
        self.note(f"consumer group protocol: the variant's {left} left out of the client; {moved}")

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._finished:
            return
        failed: Exception | None = None
        try:
            self._teardown(interrupted=isinstance(exc, KeyboardInterrupt))
        except Exception as teardown_error:  # a fault not healed: the run is an error, whatever it was
            failed = teardown_error
        finally:
            self._close_history()
        cause = exc if exc is not None else failed
        error = "".join(traceback.format_exception_only(cause)).strip()[-2000:] if cause is not None else None
        self._update(ended_ts=time.time(), outcome="error" if cause is not None else None, error=error)
        if failed is not None and exc is None:
            raise failed

    def finish(
        self,
        *,
        drain_timeout_s: float = 60.0,
        isolations: Sequence[Isolation] = ("read_uncommitted", "read_committed"),
        engine: Engine | None = None,
        options: AuditOptions | None = None,
    ) -> ScenarioResult:
        """Heal, drain the topic, capture broker logs, close the history, audit; ``audit.json`` written, and
        ``scenario.json`` given what each client really ran with (``clients``, ``group_isolation``).

        ``isolations``: the drain's isolation levels, i.e. what the audit takes as the topic's contents
        (``("read_committed",)`` for a transactional output, whose aborted copies are not its contents).
        ``engine``: the audit engine for this run (default: the run's).
        ``options``: the audit's options; by default the group's isolation level is its members' effective
        ``isolation.level`` (:func:`chaos.scenario.conclude.group_isolation`).
        """
        if self._history is None or self._finished:
            raise ScenarioError("finish() needs an open run and may be called once")
        self._teardown()
        clients = take_announced(self.run_id)
        isolation = group_isolation(clients, self.group)
        if options is None:
            options = audit_options(isolation)
        else:
            isolation = given_isolation(options, isolation)
        self._update(clients=client_records(clients, self.variant), group_isolation=isolation)
        if self._info.topic is not None:
            self.wait_converged()
        drained = drain(self.context, timeout_s=drain_timeout_s, isolations=isolations)
        self._close_history()
        history_s = time.monotonic() - self.started
        self.engine = engine or self.engine
        symptoms = self.scenario.symptoms(self.variant)
        result = conclude(
            self.context,
            self.variant,
            symptoms,
            drained,
            engine=self.engine,
            spark_master=self.spark_master,
            strict_symptoms=self.strict_symptoms,
            options=options,
            isolations=isolations,
            streams=self.workers.streams,
        )
        for record in self.faults.records():
            if record.effect is not None and record.effect.required:  # no proof it landed: inconclusive
                result.precondition(
                    f"fault {record.seq} ({record.kind} on {record.target}) had an observable effect",
                    record.effect.observed,
                    record.effect.evidence,
                )
        self._finished = True
        timings = {"history_s": round(history_s, 3)}
        if result.audit_s is not None:
            timings["audit_s"] = round(result.audit_s, 3)
        self._update(ended_ts=time.time(), outcome=None, error=None, timings=timings)
        print(f"\n{self.variant.name}: {result.summary()}")
        self.result = result
        return result

    def _teardown(self, *, interrupted: bool = False) -> None:
        """Stop the nemesis (it heals the cluster), the workers and samplers; heal the run's faults
        (``interrupted``: without waiting for the cluster to settle, :attr:`Fault.interrupted`)."""
        errors: list[str] = []
        if self._nemesis is not None:
            nemesis, self._nemesis = self._nemesis, None
            try:
                nemesis.stop(interrupted=interrupted)
            except Exception as exc:
                errors.append(f"nemesis heal: {exc!r}")
            errors += nemesis.errors
            if self._plan is not None:
                resolved = self._plan.resolved(nemesis.resolved)
                with contextlib.suppress(OSError):
                    write_atomic(self.dir / RESOLVED_PLAN_FILE, resolved.to_json())
        errors += self.workers.stop_workers(interrupted=interrupted)
        _, stuck = heal_faults(self.faults.active(), interrupted=interrupted)
        errors += [f"{f!r}: {f.record.error if f.record else '?'}" for f in stuck]
        if errors:
            with contextlib.suppress(Exception):
                self.note("teardown errors: " + "; ".join(errors)[:1000])
        if stuck:  # never audit (or pass) a run whose cluster is still cut
            raise not_healed(stuck, self.run_id)

    def _close_history(self) -> None:
        if self._history is not None:
            history, self._history = self._history, None
            started = self._info.started_ts
            since = started - LOG_MARGIN_S if started is not None else None
            with contextlib.suppress(Exception):
                self.cluster.capture_logs(self.dir / self._info.log_dir, since=since)
            history.close()

    def _update(self, info: ScenarioInfo | None = None, **changes: Any) -> None:
        self._info = replace(info or self._info, **changes)
        write_scenario(self.dir, self._info)

    def _on_fault(self, action: str, record: FaultRecord) -> None:
        if self._history is not None:
            self.record(fault_event(self.run_id, action, record))

    # ---- the run's sink and waits -----------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap_servers

    def client_bootstrap(self, client_path: str) -> str:
        return self.cluster.bootstrap(client_path)

    def java_worker(self) -> JavaWorker:
        return ensure_java_worker(self.cluster.config.kafka_version)

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

    def note(self, text: str) -> None:
        """A timeline marker in the history (``client_log`` facility ``SCENARIO`` from ``scenario``)."""
        self.record(
            ClientLog(
                run_id=self.run_id, process="scenario", level="notice", message=text, facility="SCENARIO"
            )
        )

    def mark(self, name: str) -> None:
        """A named moment of the timeline (``cut-done``), found again by name with
        :func:`chaos.scenario.views.mark` — never by its position among the notes, to which a gate run adds
        its own. A name is used once per run (``ScenarioError`` for a second one)."""
        text = mark_text(name)
        if find_mark(self.events(), name) is not None:
            raise ScenarioError(f"mark {name!r} is already in this run's history: one name per moment")
        self.record(
            ClientLog(
                run_id=self.run_id, process="scenario", level="notice", message=text, facility=MARK_FACILITY
            )
        )

    def wait_for(
        self, what: str, condition: Callable[[list[Event]], bool], timeout_s: float, interval_s: float = 0.1
    ) -> float:
        """Poll ``condition(events)`` until true; returns the seconds it took (AssertionError on timeout)."""
        return waits.wait_for_events(what, self.events, condition, timeout_s, interval_s)

    def wait_quiet(
        self, what: str, select: Callable[[Event], bool], quiet_s: float, timeout_s: float
    ) -> float:
        """Wait until no event matching ``select`` was recorded for ``quiet_s`` (e.g. a group that has
        caught up); returns the seconds it took. AssertionError if it never quiets within ``timeout_s``."""
        return self.wait_for(what, waits.quiet_for(select, quiet_s, self.started), timeout_s)

    def wait_until(self, what: str, condition: Callable[[], bool], timeout_s: float) -> float:
        """Poll a cluster-side ``condition()`` (introspection) until true; errors count as false."""
        return waits.wait_until(what, condition, timeout_s)

    def wait_caught_up(
        self, timeout_s: float = 30.0, *, isolation: Isolation | None = None, topic: str | None = None
    ) -> waits.CaughtUp:
        """Wait until the group has delivered, in every partition, the last record it can read: the
        greatest offset below the end offset (the last stable offset under read_committed, the high
        watermark under read_uncommitted) holding a record visible at the group's isolation level — not a
        commit/abort marker, nor under read_committed an aborted record (:func:`chaos.scenario.waits.
        caught_up`, :func:`chaos.workload.tail.last_data_offsets`). The targets are read while every
        broker names the same leaders (:meth:`converged`; a broker back from a cut answers with its old
        high watermark), and read again once the group reached them, until a read finds nothing new.

        Returns the seconds it took (a float) with ``.expired``: the partitions whose records the group had
        not read were removed by retention or ``DeleteRecords`` (:class:`chaos.scenario.waits.Expired`,
        each also noted in the history); a target removed so makes the wait read its targets again
        rather than time out.

        ``topic``: another topic than the run's (a transform's output, read by a member given ``topic=``).
        ``isolation``: the group's level. By default its members' effective ``isolation.level`` (as the
        workers announced it; the variant's consumer configuration before any member started), but
        read_committed if a transactional worker consumes the topic or the members differ
        (:func:`chaos.scenario.waits.group_isolation`)."""
        topic = topic or self.topic
        if isolation is None:
            configured = list(member_levels(announced(self.run_id), self.group))
            if not configured:  # no member announced yet: the variant's consumer configuration
                member = consumer_config(self.client, self.bootstrap, "caught-up", self.group, self.time)
                configured = [str(member["isolation.level"])]
            isolation = waits.group_isolation(topic, self.events(), configured)
        level: Isolation = isolation

        def targets(timeout: float) -> dict[int, int]:
            return last_data_offsets(
                self.context, level, timeout_s=timeout, topic=topic, admin=self.cluster.admin()
            )

        def bounds() -> dict[int, tuple[int, int]]:
            return offset_bounds(self.cluster.admin(), topic, "read_uncommitted", 5.0)

        caught = waits.caught_up(
            topic,
            self.events,
            bounds,
            timeout_s,
            targets,
            settled=lambda: questions.converged(self.cluster, topic),
        )
        for expired in caught.expired:
            self.note(
                f"wait_caught_up({topic}): records the group had not read expired: {expired.describe()}"
            )
        return caught

    # ---- the cluster: topic, faults, questions ------------------------------------------------------

    def create_topic(
        self,
        partitions: int = 3,
        replication_factor: int = 3,
        *,
        name: str | None = None,
        config: Mapping[str, str] | None = None,
    ) -> str:
        """Create a topic and record its effective log policy in the history (``topic_policy``: what the
        audit may count as removed on purpose rather than lost). ``name`` ``None``: the run's topic, with
        the variant's topic config and ``config`` over it, also recorded in ``scenario.json``; another name
        (a transform's input or output topic): a topic of this run with ``config`` alone."""
        settings = {**self.variant.topic_settings(), **(config or {})} if name is None else dict(config or {})
        topic = self.topic if name is None else name
        self.cluster.create_topic(topic, partitions, replication_factor, settings)
        if name is None:
            recorded = {**(self.variant.topic_config or {}), **(config or {})}
            self._update(topic=TopicInfo(self.topic, partitions, replication_factor, recorded))
        self.record_topic_policy(topic)
        return topic

    def record_topic_policy(self, topic: str) -> TopicPolicy:
        """Read ``topic``'s effective log policy (DescribeConfigs) and record it in the history; call it
        again after altering the topic's configs."""
        found = self.cluster.topic_configs(topic, POLICY_CONFIGS)
        event = TopicPolicy(
            run_id=self.run_id,
            process="scenario",
            topic=topic,
            cleanup_policy=found["cleanup.policy"].replace(" ", ""),
            retention_ms=int(found["retention.ms"]),
            retention_bytes=int(found["retention.bytes"]),
            delete_retention_ms=int(found["delete.retention.ms"]),
        )
        self.record(event)
        return event

    def delete_records(self, partition: int, before_offset: int, *, topic: str | None = None) -> int:
        """Delete a partition's records below ``before_offset`` (DeleteRecords, as an operator or a
        retention tool would) and record the moved log start (``log_start``, action ``deleted``): the audit
        counts what it removed as ``expired``, not lost. Returns the new log start offset."""
        name = topic or self.topic
        start = self.cluster.delete_records(name, partition, before_offset)
        self.record(
            LogStart(
                run_id=self.run_id, process="scenario", topic=name, partition=partition, offset=start,
                action="deleted",
            )
        )  # fmt: skip
        return start

    def fault(self, kind: Callable[..., F], *args: Any, must_land: bool = True, **kwargs: Any) -> F:
        """Build a fault on this cluster that records into the run's history (not yet injected).

        A fault that measures its effect (a cut or a toxic: packets, docs/faults.md) and saw none makes
        the run inconclusive (``unknown``, the fault named in the reason), unless ``must_land=False``: one of
        several alike of which the case needs some to land (say so with a precondition of its own)."""
        fault = kind(self.cluster, *args, log=self.faults, **kwargs)
        fault.must_land = must_land
        return fault

    def plan(self, **options: Any) -> Plan:
        """A fault plan drawn from the run's seed for its cluster (:func:`chaos.faults.plan.generate_plan`'s
        ``duration_s``, ``kinds``, ``concurrency``… as ``options``; ``kinds`` by default the run's
        ``fault_kinds``, the plugin's ``--chaos-fault-kinds``); its targets name the run's topic and group
        as :data:`~chaos.faults.plan.RUN_TOPIC` / :data:`~chaos.faults.plan.RUN_GROUP`, so a seed gives
        the same plan in every run (:meth:`nemesis` binds them). A replayed run (``replay``) gets
        the saved plan instead, whatever the options."""
        if self.replay is not None:
            return self.replay
        if self.seed is None:
            raise ScenarioError("plan(): the run has no seed; open it with seed= (the plugin's --chaos-seed)")
        options.setdefault("kinds", self.fault_kinds or KINDS)
        if "brokers" not in options:
            options["brokers"] = len(self.cluster.brokers) or self.cluster.config.brokers
        options.setdefault("topic", RUN_TOPIC)
        options.setdefault("group", RUN_GROUP)
        return generate_plan(self.seed, **options)

    def nemesis(self, plan: Plan, *, must_land: bool = True) -> Nemesis:
        """Run ``plan`` from now on the run's cluster, its faults in the run's history like :meth:`fault`'s.
        The plan is saved as ``plan.json`` (and in ``scenario.json``); when the run ends, the plan with the
        brokers its faults hit as ``plan.resolved.json`` (what ``chaos replay`` runs). The run stops the
        nemesis and heals when it ends. ``must_land=False``: a fault with no effect is evidence, not a
        precondition of its own (:meth:`unlanded` lists them for a precondition of the scenario's)."""
        if self._nemesis is not None:
            raise ScenarioError("the run's nemesis is already running a plan; one plan per run")
        if self.cluster.brokers and plan.brokers > len(self.cluster.brokers):
            raise ScenarioError(
                f"the plan is for {plan.brokers} brokers, the cluster has {len(self.cluster.brokers)}: "
                "generate it with run.plan() or brokers=len(run.cluster.brokers)"
            )
        self._plan = plan
        write_atomic(self.dir / PLAN_NAME, plan.to_json())
        self._update(plan=plan.to_data())
        self.note(
            f"nemesis: plan of seed {plan.seed}, {len(plan.steps)} faults over {plan.duration_s:.0f} s "
            f"(at most {plan.max_concurrent} at once)"
        )
        nemesis = Nemesis(self.cluster, self.faults, must_land=must_land)
        self._nemesis = nemesis.start(plan.bind(self.topic, self.group))
        return self._nemesis

    def unlanded(self) -> list[FaultRecord]:
        """The run's faults that measured their effect and saw none (the proof: docs/faults.md)."""
        return [r for r in self.faults.records() if r.effect is not None and not r.effect.observed]

    def unproven(self) -> list[FaultRecord]:
        """The run's faults that held (their inject succeeded) without proof that they landed: no effect
        seen, or none measured (a cut whose broker stopped, a toxic across a Toxiproxy restart)."""
        return [r for r in self.faults.records() if not r.inject_failed and not r.proven]

    def end_offsets(
        self, timeout_s: float = 10.0, isolation: Isolation = "read_uncommitted"
    ) -> dict[int, int]:
        """The topic's end offsets per partition, read now (for waits, not assertions): the high watermarks,
        or with ``isolation="read_committed"`` the last stable offsets. On a transactional topic the
        offset before either may be a marker, never delivered: a group caught up is
        :meth:`wait_caught_up`'s business."""
        bounds = offset_bounds(self.cluster.admin(), self.topic, isolation, timeout_s)
        return {p: end for p, (_, end) in bounds.items()}

    def target_partition(self, *, avoid_coordinator: bool = False, group: str | None = None) -> LiveState:
        """The partition to aim a fault at: see :func:`chaos.cluster.questions.target_partition`
        (``group``: the group whose coordinator to avoid, the run's by default)."""
        return questions.target_partition(
            self.cluster, self.topic, group or self.group, avoid_coordinator=avoid_coordinator
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

    def service(
        self,
        spec: ServiceSpec,
        *,
        input_partitions: int = 3,
        input_config: Mapping[str, str] | None = None,
        start: bool = True,
    ) -> Service:
        """Run a team's service (:mod:`chaos.service`) between its input topic — created here unless it
        exists (``input_partitions``, replication 3, ``input_config``; ``min.insync.replicas=2`` by default)
        — and the run's topic, its output (what the audit reads). Its instances' output goes to
        ``logs/<name>-<n>.log``; the run stops them when it ends, before the heal and the drain. With
        ``id="header:chaos-id"`` the run's default traffic becomes ``Traffic()`` when it has none, so the
        input records carry their id in that header. ``start=False``: the caller starts it."""
        input_topic = spec.input_topic or f"{self.topic}-in"
        if input_topic not in self.cluster.topics(internal=False):
            config = {"min.insync.replicas": "2", **(input_config or {})}
            self.create_topic(input_partitions, 3, name=input_topic, config=config)
        if spec.id == "header:chaos-id" and self.workers.traffic is None:
            self.workers.traffic = Traffic()
        binding = Binding(self.bootstrap, input_topic, self.topic, spec.group or f"svc-{self.run_id}")
        service = Service(spec, binding, self.dir / LOGS_DIR, self.cluster, self.run_id, note=self.note)
        self.note(f"service {spec.describe()}: {input_topic} -> {self.topic}, group {binding.group}")
        self.on_close(service.close)
        return service.start() if start else service

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
