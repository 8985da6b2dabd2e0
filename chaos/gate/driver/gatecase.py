"""One catalog case of a gate run: run with the team's variant, judged by the verdict and the thresholds,
retried up to the gate file's ``retries``."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chaos.errors import ChaosError
from chaos.gate.baseline import observe
from chaos.gate.driver.variant import (
    GATE_ID,
    TIMELINE,
    commit_strategy,
    gate_scenario,
    gate_variant,
    removal_notes,
    traffic_not_applicable,
)
from chaos.gate.report import Attempt, CaseResult
from chaos.gate.thresholds import measure
from chaos.run.layout import PAGE_NAME
from chaos.run.manifest import ThresholdResult, read_scenario, write_scenario
from chaos.scenario.model import Scenario, Variant

if TYPE_CHECKING:
    from chaos.gate.driver.session import GateSession
    from chaos.scenario.result import ScenarioResult
    from chaos.scenario.runner import ScenarioRun

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
        run.workers.traffic = traffic.for_run()
        return (f"traffic: {traffic.describe()}",)

    def _service(self, run: ScenarioRun) -> tuple[str, ...]:
        """Hand the team's service (``[service]``) to the run: a service case runs it."""
        service = self.session.gate.service
        if service is None:
            return ()
        run.workers.team_service = service.spec
        return (f"the team's service: {service.describe()}",)

    def _commit(self, run: ScenarioRun) -> tuple[str, ...]:
        """Make every member of the run commit as the team's application does (its ``[consumer]``)."""
        strategy = commit_strategy(self.session.gate, getattr(run, "client_library", "librdkafka"))
        if strategy is None:
            return ()
        run.workers.commit = strategy
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
