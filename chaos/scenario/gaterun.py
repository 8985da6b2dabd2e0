"""The full gate run: each selected catalog case replayed once with the team's configuration as the variant
under test (``pytest -m chaos --chaos-gate GATE_FILE``, and ``chaos gate GATE_FILE`` through it).

- :func:`gate_variant` builds that variant (pure): a catalog body branches on ``run.variant.name``, so the
  variant takes the *name* — the fault and workload timeline — of one built-in variant (the case's
  ``remediated`` one: what a correct configuration must survive), the team's guarantee, ``pass`` as the
  verdict it must reach, the team's client settings over the timing settings the case needs, and the
  team's topic settings.
- :class:`GateCase` is the value of the test's ``variant`` parameter in a gate run (id ``gate``):
  :func:`chaos.scenario.chaos_scenario`'s test hands it the run factory and the body. It runs the case,
  judges it by the verdict and the thresholds only — an assertion of the body (written for the built-in
  variants) is recorded as evidence, never the verdict — and retries a failed or inconclusive run up to
  the gate file's ``retries`` (fail, then pass = *flaky*).
- :class:`GateSession` holds the run's gate file, lint, results and (``--chaos-gate-baseline``) the
  previous gate run each case is compared with; :class:`GatePlugin` is its pytest side (selection,
  calibration outcomes, ``gate.json`` / ``gate.md`` / JUnit at the session's end).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

import pytest

from chaos import versions
from chaos.errors import ChaosError
from chaos.gate.baseline import describe_rule, observe
from chaos.gate.cases import TRAFFIC_NOT_APPLICABLE, CasePlan, plan_cases
from chaos.gate.gatefile import (
    LOG_POLICY_KEYS,
    ClientSettings,
    GateFile,
    GateFileError,
    canonical,
    flag,
    is_secret,
)
from chaos.gate.lint import LintResult
from chaos.gate.report import (
    Attempt,
    Calibration,
    CaseResult,
    GateReport,
    GateReportError,
    compare_cases,
    gate_path,
    read_gate_file,
    write_gate,
)
from chaos.gate.thresholds import measure
from chaos.run.layout import GATE_MD_NAME, JUNIT_NAME, PAGE_NAME
from chaos.run.manifest import ThresholdResult, read_scenario, write_scenario
from chaos.scenario.api import GATE_PLUGIN
from chaos.scenario.model import Scenario, Setting, Variant

if TYPE_CHECKING:
    from chaos.audit.model import Removal
    from chaos.scenario.result import ScenarioResult
    from chaos.scenario.runner import ScenarioRun
    from chaos.workload.consumer import CommitStrategy

GATE_ID: Final = "gate"
"""The pytest parameter id of the gate variant (``test_pb1[gate]``)."""
GATE_PROFILE: Final = "gate"
TIMELINE: Final = "remediated"
CALIBRATION: Final = ("vulnerable", "remediated")

NOT_PASSED: Final[Mapping[str, str]] = MappingProxyType(
    {
        "transactional.id": "the workload runs its own transactions where a case needs them",
        "client.id": "the workload names each client",
        "group.id": "the run's group is the run's own",
        "group.instance.id": "one static id shared by every member of the run would fence them",
        "security.protocol": "the gate's cluster is plaintext",
    }
)
"""Settings of the team's clients the gate reads (the lint judges them) but does not hand to the run's
clients, and why. Also every ``sasl.*`` and ``ssl.*`` setting (the gate's cluster has no security) and
any secret: no secret ever reaches a run's ``scenario.json``."""


def not_passed(key: str) -> str | None:
    """Why the gate does not pass setting ``key`` to the run's clients, or ``None`` when it does."""
    name = canonical(key)
    if name in NOT_PASSED:
        return NOT_PASSED[name]
    if name.startswith(("sasl.", "ssl.")) or is_secret(name):
        return "the gate's cluster is plaintext, without credentials"
    return None


def is_timing(key: str) -> bool:
    """A client timing setting (``*.ms``): the case's value is kept where the team gives none."""
    return canonical(key).endswith(".ms")


def _client_config(
    case: Mapping[str, Setting] | None, team: ClientSettings | None
) -> tuple[dict[str, Setting], tuple[str, ...]]:
    """The team's settings (those the run can use) over the case's timing settings; notes on the rest."""
    given = team.as_dict() if team is not None else {}
    names = {canonical(k) for k in given}
    config: dict[str, Setting] = {
        k: v for k, v in (case or {}).items() if is_timing(k) and canonical(k) not in names
    }
    notes: list[str] = []
    for key, value in given.items():
        why = not_passed(key)
        if why is None:
            config[key] = value
        else:
            notes.append(f"{key} not passed to the run's clients: {why}")
    return config, tuple(notes)


def poll_interval_at_least_session(consumer: dict[str, Setting], team: Mapping[str, object]) -> None:
    """librdkafka refuses a ``max.poll.interval.ms`` below ``session.timeout.ms``. Where the team's session
    timeout exceeds a case's own poll interval (a case's timing setting the team did not give), the interval
    is raised to the session: the case keeps its timeline, and the group detects a silent member as slowly
    as the team's service would."""
    keys = {canonical(k): k for k in consumer}
    interval, session = keys.get("max.poll.interval.ms"), keys.get("session.timeout.ms")
    if interval is None or session is None or "max.poll.interval.ms" in {canonical(k) for k in team}:
        return  # the team's own pair is theirs to fix (librdkafka says so when the client is built)
    if int(str(consumer[interval])) < int(str(consumer[session])):
        consumer[interval] = consumer[session]


def timeline_of(scenario: Scenario, gate: GateFile) -> str:
    """The built-in variant whose timeline the gate replays: the case's ``remediated`` one; O6's
    ``vulnerable`` (the at-least-once transform) for a configuration without a ``transactional.id``, whose
    transform cannot run the transactional timeline."""
    if scenario.case_id == "O6" and not gate.transactional:
        return "vulnerable"
    return TIMELINE


def gate_variant(scenario: Scenario, gate: GateFile, timeline: str | None = None) -> Variant:
    """The team's configuration as a variant of ``scenario`` (see the module docstring). Raises
    :class:`~chaos.scenario.model.ScenarioError` when the case has no such timeline."""
    base = scenario.variant(timeline or timeline_of(scenario, gate))
    producer, _ = _client_config(base.producer_config, gate.producer)
    team_consumer = gate.consumer.settings if gate.consumer else None
    consumer, _ = _client_config(base.consumer_config, team_consumer)
    poll_interval_at_least_session(consumer, team_consumer.as_dict() if team_consumer is not None else {})
    idempotent = str(producer.get("enable.idempotence", "")).lower() in ("true", "t", "1")
    if gate.transactional and not idempotent:
        producer["enable.idempotence"] = "true"  # implied by the transactional.id the run does not use
        idempotent = True
    topic: dict[str, Setting] = {
        "min.insync.replicas": int(gate.topic_setting("min.insync.replicas").value),
        "unclean.leader.election.enable": gate.topic_setting("unclean.leader.election.enable").value
        == "true",
    }
    for key in LOG_POLICY_KEYS:  # the broker's defaults where the file gives none
        if gate.topic_given(key):
            value = gate.topic_setting(key).value
            topic[key] = value if key == "cleanup.policy" else int(value)
    source = gate.path.name if gate.path is not None else "the gate file"
    return Variant(
        base.name,
        f"gate: the team's configuration ({source}) on the case's {base.name} timeline",
        guarantee=gate.guarantee,
        expected_verdict="pass",
        client_profile=GATE_PROFILE,
        producer_config=producer,
        consumer_config=consumer,
        topic_config=topic,
        client_guarantee="idempotent" if idempotent else "at_least_once",
    )


def config_notes(gate: GateFile) -> tuple[str, ...]:
    """What of the team's client settings the run's clients do not get, and why (shown once per run)."""
    _, producer = _client_config(None, gate.producer)
    _, consumer = _client_config(None, gate.consumer.settings if gate.consumer else None)
    return (*(f"producer {n}" for n in producer), *(f"consumer {n}" for n in consumer))


def traffic_not_applicable(case: str, client_library: str = "librdkafka") -> str | None:
    """Why ``case``'s run does not take the gate file's ``[traffic]`` (``None``: it does)."""
    if client_library == "java":
        return "the Java client's producer takes a key count only, no traffic shape"
    return TRAFFIC_NOT_APPLICABLE.get(case)


def commit_strategy(gate: GateFile, client_library: str = "librdkafka") -> CommitStrategy | None:
    """How the application commits (the gate's ``[consumer] commit`` and its auto-commit settings), as the
    strategy every member of a case takes (:attr:`chaos.scenario.workers.RunWorkers.commit`); ``None``
    for ``transaction`` (a transform's members keep the case's) or without a ``[consumer]``."""
    if gate.consumer is None:
        return None
    settings = gate.consumer.settings
    auto_commit = flag(settings.get("enable.auto.commit"), True)
    auto_store = flag(settings.get("enable.auto.offset.store"), True)
    commit = gate.consumer.commit.value
    strategy: CommitStrategy | None
    if commit == "auto":  # the gate file holds it to auto commit with the automatic offset store
        strategy = "auto"
    elif commit == "after_processing":
        strategy = "store_after" if auto_commit and not auto_store else "commit_after"
    elif commit == "before_processing":
        strategy = "commit_before"
    else:
        strategy = None
    if strategy == "store_after" and client_library == "java":
        strategy = "commit_after"  # the Java client keeps no offset store: a commit after processing
    return strategy


def removal_notes(removals: Sequence[Removal], topic: str | None) -> tuple[str, ...]:
    """What the topic's log policy removed in a run, in words: ``compacted 340 (cleanup.policy=compact):
    superseded by a later value of their key, by design``; ``expired_unread 57 of expired 120
    (retention.ms=5000): removed by retention before the group read them``."""
    mine = [r for r in removals if r.topic == topic] or list(removals)
    notes: list[str] = []
    compacted = sum(r.compacted for r in mine)
    expired = sum(r.expired for r in mine)
    unread = sum(r.expired_unread for r in mine)
    policy = next((r for r in mine), None)
    if compacted and policy is not None:
        notes.append(
            f"compacted {compacted} (cleanup.policy={policy.cleanup_policy}): values superseded by a later "
            "value of their key, removed by the cleaner as compaction promises — not lost"
        )
    if expired and policy is not None:
        what = f"expired {expired}" + (f", {unread} of them unread by the group" if unread else "")
        retention = f"retention.ms={policy.retention_ms}"
        if policy.retention_bytes is not None and policy.retention_bytes >= 0:
            retention += f", retention.bytes={policy.retention_bytes}"
        deleted = any(r.deleted_to is not None for r in mine)
        cause = "retention or DeleteRecords" if deleted else "retention"
        notes.append(
            f"{what} ({retention}, cleanup.policy={policy.cleanup_policy}): removed by {cause}"
            + (" before the group read them: retention shorter than the group's outage" if unread else "")
        )
    return tuple(notes)


def gate_scenario(scenario: Scenario, variant: Variant) -> Scenario:
    """``scenario`` with ``variant`` as its only variant and no defaults of its own (the variant is
    complete): what a :class:`~chaos.scenario.runner.ScenarioRun` of the gate variant is opened on."""
    return replace(
        scenario,
        variants=(variant,),
        guarantee=None,
        expected_verdict=None,
        client=None,
        client_profile=None,
        client_guarantee=None,
        producer_config={},
        consumer_config={},
        topic_config={},
    )


# ---- one case -------------------------------------------------------------------------------------------

RunFactory = Callable[..., "ScenarioRun"]
Body = Callable[..., object]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line if len(line) <= 160 else line[:157] + "..."


def _reasons(result: ScenarioResult) -> tuple[str, ...]:
    problems = tuple(f"the audit could not establish: {p}" for p in result.audit.facts.problems)
    return (*result.evidence.reasons(), *problems)


def record_thresholds(run_dir: Path, results: tuple[ThresholdResult, ...]) -> None:
    """Write the thresholds of a finished run into its ``scenario.json`` (the report shows them)."""
    info = read_scenario(run_dir)
    if info is not None:
        write_scenario(run_dir, replace(info, thresholds=results))


@dataclass(frozen=True, eq=False)
class GateCase:
    """The ``variant`` parameter of a scenario test in a gate run: the case and the session."""

    scenario: Scenario
    session: GateSession

    def __repr__(self) -> str:
        return GATE_ID

    def run(self, factory: RunFactory, body: Body, fixtures: Mapping[str, Any]) -> None:
        """Run the case (and its retries), record it in the session; raise AssertionError unless it passed
        (the gate's message), or the harness error that stopped it."""
        session = self.session
        started = time.monotonic()
        try:
            variant = gate_variant(self.scenario, session.gate)
        except ChaosError as exc:
            session.record(self._result(TIMELINE, (self._broken(exc, 0.0),)))
            raise
        attempts: list[Attempt] = []
        error: Exception | None = None
        for number in range(1 + session.gate.retries):
            if number:
                outcome = attempts[-1].outcome
                print(f"\n{self.scenario.case_id}: {outcome}; retry {number} of {session.gate.retries}")
            attempt_started = time.monotonic()
            try:
                attempts.append(self._attempt(factory, variant, body, fixtures))
            except Exception as exc:
                attempts.append(self._broken(exc, time.monotonic() - attempt_started))
                error = exc
                break
            if attempts[-1].outcome not in ("fail", "unknown"):
                break
        result = session.record(self._result(variant.name, tuple(attempts)))
        print(f"\n{self.scenario.case_id} gate: {result.message()} ({time.monotonic() - started:.0f} s)")
        if error is not None:
            raise error
        if result.outcome != "pass" and not (result.outcome == "flaky" and session.allow_flaky):
            raise AssertionError(f"gate {result.message()}")

    def _result(self, timeline: str, attempts: tuple[Attempt, ...]) -> CaseResult:
        return CaseResult(
            case=self.scenario.case_id,
            scenario_id=self.scenario.scenario_id,
            nodeid=self.scenario.nodeid(),
            timeline=timeline,
            attempts=attempts,
            calibration=(),
            title=self.scenario.title,
        )

    def _broken(self, exc: BaseException, seconds: float) -> Attempt:
        return Attempt(
            run_id="-", verdict=None, error=f"{type(exc).__name__}: {_first_line(exc)}", seconds=seconds
        )

    def _traffic(self, run: ScenarioRun) -> tuple[str, ...]:
        """Hand the gate file's ``[traffic]`` to the run (every producer the case starts without a traffic
        of its own takes it), or say why this case's run does not take it."""
        traffic = self.session.gate.traffic
        if traffic is None:
            return ()
        why = traffic_not_applicable(self.scenario.case_id, getattr(run, "client_library", "librdkafka"))
        if why is not None:
            return (f"traffic not applicable: {why}",)
        run.traffic = traffic.for_run()
        return (f"traffic: {traffic.describe()}",)

    def _service(self, run: ScenarioRun) -> tuple[str, ...]:
        """Hand the team's service (``[service]``) to the run: a service case runs it."""
        service = self.session.gate.service
        if service is None:
            return ()
        run.team_service = service.spec
        return (f"the team's service: {service.describe()}",)

    def _commit(self, run: ScenarioRun) -> tuple[str, ...]:
        """Make every member of the run commit as the team's application does (its ``[consumer]``)."""
        strategy = commit_strategy(self.session.gate, getattr(run, "client_library", "librdkafka"))
        if strategy is None:
            return ()
        run.commit = strategy
        return (f"the members commit as the application does: {strategy}",)

    def _attempt(
        self, factory: RunFactory, variant: Variant, body: Body, fixtures: Mapping[str, Any]
    ) -> Attempt:
        started = time.monotonic()
        own: tuple[str, str] | None = None
        cut_short: str | None = None
        run: ScenarioRun
        with factory(gate_scenario(self.scenario, variant), variant.name) as run:
            for note in self.session.notes:
                run.note(f"gate: {note}")
            notes = (*self._traffic(run), *self._commit(run), *self._service(run))
            for note in notes:
                run.note(f"gate: {note}")
            try:
                body(run, **fixtures)
            except AssertionError as exc:  # the case's own check, written for its built-in variants
                own = (_first_line(exc), str(exc)[-2000:])
                if run.result is None:  # raised before the audit: the timeline did not run to its end
                    cut_short = own[0]
            result = run.result or run.finish()
        if own is not None:
            result.symptom(f"the case's own check: {own[0]} not met", False, own[1])
        limits = self.session.gate.thresholds_for(self.scenario.case_id)
        measured = measure(limits, result.audit.facts, result.events)
        record_thresholds(result.run_dir, measured.results())
        attempt = Attempt.of(
            result.run_id,
            result.verdict,
            failed_by=result.audit.failed_by,
            counts=result.audit.facts.counts(),
            measured=measured,
            reasons=_reasons(result) if result.verdict == "unknown" else (),
            own_checks=(own[0],) if own is not None and cut_short is None else (),
            report=self.session.relative(result.run_dir / PAGE_NAME),
            seconds=time.monotonic() - started,
            cut_short=cut_short,
            measures=observe(result.audit.facts, result.events),
            notes=(*notes, *removal_notes(result.audit.facts.removals, getattr(run, "topic", None))),
        )
        if attempt.outcome in ("fail", "unknown") and self.session.gate.retries:
            # before a retry: the run healed its faults; the retry starts on a cluster with full ISRs
            with contextlib.suppress(Exception):  # if it is not, the retry's own run fails loudly
                run.cluster.wait_healthy(60)
        return attempt


# ---- the session ----------------------------------------------------------------------------------------


@dataclass
class GateSession:
    """One gate run's state: the gate file and its lint, where outputs go, and each case's result.

    :param out: the output directory (the session's report directory): ``gate.json``, ``gate.md``, the
        run directories and the HTML index.
    :param junit: the JUnit XML path (default ``out/junit.xml``).
    :param baseline: a previous gate run (``--chaos-gate-baseline``) and the path it was read from.
    """

    gate: GateFile
    out: Path
    lint: Mapping[str, Any] = field(default_factory=dict)
    junit: Path | None = None
    calibrate: bool = False
    allow_flaky: bool = False
    notes: tuple[str, ...] = ()
    selected: tuple[str, ...] | None = None
    results: dict[str, CaseResult] = field(default_factory=dict)
    calibration: dict[str, list[Calibration]] = field(default_factory=dict)
    started_ts: float = field(default_factory=time.time)
    baseline: tuple[Path, GateReport] | None = None
    kafka_version: str = versions.KAFKA_VERSION
    lint_result: LintResult | None = None
    cases: tuple[str, ...] | None = None
    """``--cases`` (``--chaos-gate-cases``): the cases to run, over the gate file's."""
    lint_advisory: bool = False
    """``--lint-advisory`` or the gate file's ``lint_advisory``: the cases alone decide."""
    plan: CasePlan | None = None

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        out: Path,
        *,
        junit: Path | None,
        calibrate: bool,
        allow_flaky: bool,
        baseline: Path | None = None,
        cases: tuple[str, ...] | None = None,
        lint_advisory: bool = False,
    ) -> GateSession:
        """Read and lint the gate file (raises :class:`~chaos.gate.gatefile.GateFileError`: bad input), and
        read the baseline's gate.json (:class:`~chaos.gate.report.GateReportError`)."""
        from chaos.gate.gatefile import load_gate
        from chaos.gate.lint import lint_gate

        gate = load_gate(Path(path))
        old = (baseline, read_gate_file(baseline)) if baseline is not None else None
        check, lint = lint_gate(gate)
        summary = {**lint.to_dict(), "librdkafka": check.librdkafka, "notes": list(check.notes)}
        return cls(
            gate,
            out,
            summary,
            junit,
            calibrate,
            allow_flaky,
            notes=config_notes(gate),
            baseline=old,
            lint_result=lint,
            cases=cases,
            lint_advisory=lint_advisory or gate.lint_advisory,
        )

    def params(self, scenario: Scenario) -> list[object]:
        """The ``variant`` parameters of a scenario's test in this run: the gate variant (id ``gate``), and
        with calibration the case's built-in ``vulnerable`` and ``remediated`` variants."""
        params: list[object] = [pytest.param(GateCase(scenario, self), id=GATE_ID)]
        if self.calibrate:
            params += [name for name in CALIBRATION if name in scenario.variant_names]
        return params

    def select(self, catalog: tuple[str, ...]) -> tuple[str, ...]:
        """The cases this run replays among the collected ones (``GateFileError`` for a bad ``cases``)."""
        self.plan = plan_cases(self.gate, catalog, self.lint_result, self.cases)
        self.selected = self.plan.run
        return self.selected

    def record(self, result: CaseResult) -> CaseResult:
        """Keep a case's result; return it as the gate judges it (with the baseline: compared)."""
        self.results[result.case] = result
        if self.baseline is None:
            return result
        path, old = self.baseline
        comparison = compare_cases(old, (result,), self.gate.time_profile, str(path), self.gate.baseline)
        return replace(result, baseline=comparison.case(result.case))

    def record_calibration(self, case: str, calibration: Calibration) -> None:
        self.calibration.setdefault(case, []).append(calibration)

    def relative(self, path: Path) -> str:
        """``path`` relative to the output directory (as gate.json and gate.md link it)."""
        try:
            return Path(os.path.relpath(path, self.out)).as_posix()
        except ValueError:  # another drive (Windows)
            return path.as_posix()

    def configuration(self) -> dict[str, Any]:
        """The team's settings as gate.json records them (secrets are redacted on output)."""
        gate = self.gate
        data: dict[str, Any] = {
            "kafka_version": self.kafka_version,
            "producer": gate.producer.as_dict(),
            "topic": {s.key: s.value for s in gate.topic},
            "not_passed_to_the_run": list(self.notes),
        }
        if gate.traffic is not None:
            data["traffic"] = gate.traffic.to_dict()
        if gate.service is not None:
            data["service"] = gate.service.to_dict()
        if gate.consumer is not None:
            data["consumer"] = gate.consumer.settings.as_dict()
            data["commit"] = gate.consumer.commit.value
            data["transform"] = gate.consumer.is_transform
        return data

    def report(self, errors: tuple[str, ...] = ()) -> GateReport:
        """The gate's report now: every selected case (one that never ran is a harness error)."""
        cases: list[CaseResult] = []
        for case in self.selected or tuple(self.results):
            result = self.results.get(case)
            if result is None:
                result = CaseResult(case, "", "", TIMELINE, (), title="not run")
            cases.append(replace(result, calibration=tuple(self.calibration.get(case, ()))))
        gate = self.gate
        report = GateReport(
            gate_file=str(gate.path) if gate.path else "gate",
            guarantee=gate.guarantee,
            time_profile=gate.time_profile,
            cases=tuple(cases),
            lint=self.lint,
            configuration=self.configuration(),
            errors=errors,
            allow_flaky=self.allow_flaky,
            calibrate=self.calibrate,
            started_ts=self.started_ts,
            ended_ts=time.time(),
            plan=self.plan,
            lint_advisory=self.lint_advisory,
        )
        if self.baseline is None:
            return report
        path, old = self.baseline
        return report.against(old, str(path), gate.baseline)


def _scenario_of(item: pytest.Item) -> Scenario | None:
    scenario = getattr(getattr(item, "function", None), "scenario", None)
    return scenario if isinstance(scenario, Scenario) else None


def _variant_of(item: pytest.Item) -> object:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("variant") if callspec is not None else None


class GatePlugin:
    """The gate's pytest hooks, registered by the chaos plugin under ``--chaos-gate``.

    :param render_index: re-renders the HTML index of the output directory once ``gate.json`` is written
        (the index shows the gate's banner); the report package is above this one, so the plugin hands it in.
    """

    def __init__(self, session: GateSession, render_index: Callable[[Path], object] | None = None) -> None:
        self.session = session
        self.render_index = render_index
        self.headline: str | None = None
        self.written: tuple[Path, ...] = ()

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        gate = self.session.gate
        lint = self.session.lint
        if lint.get("kept"):
            kept = "kept"
        elif self.session.lint_advisory:
            kept = "NOT kept (advisory: the cases alone decide)"
        else:
            kept = "NOT kept: the gate fails (exit 1) whatever the cases show; they run to show what happens"
        lines = [
            f"chaos gate: {gate.path} claims {gate.guarantee}; lint: {kept}; time profile "
            f"{gate.time_profile}; retries {gate.retries}; output {self.session.out}",
            *(f"chaos gate: {note}" for note in self.session.notes),
        ]
        plan = self.session.plan
        if gate.traffic is not None:
            lines.append(f"chaos gate: traffic of every case's producers: {gate.traffic.describe()}")
            client = str(config.getoption("--chaos-client", None) or "librdkafka")
            for case in plan.run if plan is not None else ():
                why = traffic_not_applicable(case, client)
                if why is not None:
                    lines.append(f"chaos gate: traffic not applicable to {case}: {why}")
        if gate.service is not None:
            lines.append(
                f"chaos gate: the team's service, run by the service cases: {gate.service.describe()}"
            )
        if plan is not None:
            lines.append(f"chaos gate: cases {', '.join(plan.run) or 'none'} ({plan.describe()})")
            if plan.not_run:
                lines.append(f"chaos gate: named by the lint, not run: {plan.not_run_text()}")
        if self.session.baseline is not None:
            path, old = self.session.baseline
            lines.append(
                f"chaos gate: against the baseline {path} ({len(old.cases)} case(s), {old.verdict}): a "
                f"measure regresses when {describe_rule(gate.baseline)} than there"
            )
        return lines

    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        """Keep only the scenario tests of the selected cases."""
        found = {s.case_id: s for s in filter(None, map(_scenario_of, items))}
        catalog = tuple(case for case in found)
        try:
            selected = self.session.select(catalog)
        except GateFileError as exc:
            raise pytest.UsageError(f"chaos gate: {exc}") from None
        keep = [i for i in items if (s := _scenario_of(i)) is None or s.case_id in selected]
        dropped = [i for i in items if i not in keep]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """What the gate judges is what runs: a selected case that another filter (``-k``, a node id) left
        out is not reported as missing."""
        running = {s.case_id for s in map(_scenario_of, session.items) if s is not None}
        self.session.selected = tuple(c for c in self.session.selected or () if c in running)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report: pytest.TestReport = yield
        scenario = _scenario_of(item)
        if scenario is None:
            return report
        variant = _variant_of(item)
        failed_setup = report.when == "setup" and report.failed
        if isinstance(variant, GateCase):
            if failed_setup and scenario.case_id not in self.session.results:
                error = Attempt("-", None, error=f"setup failed: {_short(report)}")
                self.session.record(
                    CaseResult(scenario.case_id, scenario.scenario_id, item.nodeid, TIMELINE, (error,))
                )
        elif isinstance(variant, str) and (report.when == "call" or failed_setup):
            expected = scenario.variant(variant).expected_verdict or "?"
            detail = "reached it" if report.passed else _short(report)
            self.session.record_calibration(
                scenario.case_id, Calibration(variant, expected, report.passed, detail)
            )
        return report

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> Generator[None, None, None]:
        """Outermost: after the leak check and pytest's summary, write the gate's files and make the
        session's exit status the gate's (0 pass, 1 fail, 2 harness error, 3 inconclusive)."""
        before = session.exitstatus
        try:
            yield
        finally:
            # --collect-only runs nothing; a usage error (bad input) stops before any case: no gate files
            if not session.config.option.collectonly and exitstatus != pytest.ExitCode.USAGE_ERROR:
                self._finish_run(session, exitstatus, before)

    def _finish_run(self, session: pytest.Session, exitstatus: int, before: int) -> None:
        """The session's own harness errors (pytest interrupted, the leak check, nothing collected), then
        :meth:`finish`."""
        errors: list[str] = []
        if exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR):
            errors.append(f"pytest ended with {pytest.ExitCode(exitstatus).name} (exit {int(exitstatus)})")
        if session.exitstatus != before and before in (
            pytest.ExitCode.OK,
            pytest.ExitCode.NO_TESTS_COLLECTED,
        ):
            errors.append("the session's leak check failed it: resources were left behind (see above)")
        if not self.session.selected and not self.session.results:
            errors.append("no gate case was collected: run the catalog (pytest -m chaos) with --chaos-gate")
        self.finish(session, tuple(errors))

    def finish(self, session: pytest.Session, errors: tuple[str, ...]) -> None:
        report = self.session.report(errors)
        try:
            self.written = write_gate(self.session.out, report, self.session.junit)
            if self.render_index is not None:
                self.render_index(self.session.out)
        except Exception as exc:
            report = replace(report, errors=(*report.errors, f"gate files not written: {exc!r}"))
        session.exitstatus = report.exit_code
        self.headline = report.headline()
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_sep("=", "chaos gate")
            colour = {"pass": "green", "fail": "red"}.get(report.verdict, "yellow")
            reporter.write_line(self.headline, **{colour: True})
            for case in report.cases:
                reporter.write_line(f"  {case.message()}")
            for error in report.errors:
                reporter.write_line(f"  harness: {error}", yellow=True)
            for path in self.written:
                reporter.write_line(f"  {path}")


def _short(report: pytest.TestReport) -> str:
    text = report.longreprtext.strip().splitlines()
    return text[-1][:300] if text else report.outcome


def split_cases(text: str) -> tuple[str, ...]:
    """``--cases L2,L6`` (commas or spaces) as a tuple of catalog ids, in the order given."""
    return tuple(part for part in text.replace(",", " ").split() if part)


def stale_outputs(out: Path) -> tuple[Path, ...]:
    """A previous gate's files in ``out`` (removed when a new gate run starts, so no banner is stale)."""
    return tuple(p for p in (gate_path(out), out / GATE_MD_NAME, out / JUNIT_NAME) if p.exists())


def configure_gate(config: pytest.Config, render_index: Callable[[Path], object] | None = None) -> None:
    """Under ``--chaos-gate GATE_FILE``: read and lint the gate file (bad input is a usage error, before
    anything starts) and the baseline's gate.json (``--chaos-gate-baseline``: read now, so a previous gate's
    files in the output directory may be it), make its time profile the session's, default the report
    directory to ``reports/gate/``, remove a previous gate's files there, and register the
    :class:`GatePlugin`."""
    from chaos.paths import reports_dir

    path = config.getoption("--chaos-gate", None)
    baseline = config.getoption("--chaos-gate-baseline", None)
    if not path:
        for option in ("--chaos-calibrate", "--chaos-gate-baseline", "--chaos-gate-cases"):
            if config.getoption(option, None):
                raise pytest.UsageError(f"chaos: {option} runs with a gate: add --chaos-gate GATE_FILE")
        return
    option = config.getoption("--chaos-report-dir", None)
    if option is None and not os.environ.get("CHAOS_REPORT_DIR"):
        config.option.chaos_report_dir = str(reports_dir(config.rootpath) / "gate")
    out = Path(config.option.chaos_report_dir or reports_dir(config.rootpath)).expanduser().absolute()
    junit = config.getoption("--chaos-gate-junit", None)
    chosen = config.getoption("--chaos-gate-cases", None)
    try:
        session = GateSession.load(
            path,
            out,
            junit=Path(junit).expanduser().absolute() if junit else None,
            calibrate=bool(config.getoption("--chaos-calibrate", False)),
            allow_flaky=bool(config.getoption("--chaos-gate-allow-flaky", False)),
            baseline=Path(baseline).expanduser().absolute() if baseline else None,
            cases=split_cases(chosen) if chosen else None,
            lint_advisory=bool(config.getoption("--chaos-gate-lint-advisory", False)),
        )
    except GateFileError as exc:
        raise pytest.UsageError(f"chaos gate: {path}: the gate file cannot be used:\n{exc}") from None
    except GateReportError as exc:
        raise pytest.UsageError(f"chaos: --chaos-gate-baseline {baseline}: {exc}") from None
    config.option.chaos_profile = session.gate.time_profile
    given = config.getoption("--kafka-version", None)
    wanted = session.gate.kafka_version
    if wanted is not None and given is not None and given != wanted:
        raise pytest.UsageError(
            f"chaos gate: {path} sets kafka_version {wanted!r} and --kafka-version says {given!r}: "
            "drop one of them"
        )
    if wanted is not None:
        config.option.kafka_version = wanted
    session.kafka_version = versions.chosen_kafka_version(config.getoption("--kafka-version", None))
    for stale in stale_outputs(out):
        stale.unlink()
    config.pluginmanager.register(GatePlugin(session, render_index), GATE_PLUGIN)
