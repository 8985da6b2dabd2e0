"""The gate's pytest side: the gate file read under ``--chaos-gate``, the cases selected, the calibration
recorded, and ``gate.json`` / ``gate.md`` / JUnit written at the session's end with its exit status."""

from __future__ import annotations

import os
from collections.abc import Generator
from dataclasses import replace
from pathlib import Path

import pytest

from chaos import versions
from chaos.gate.baseline import describe_rule
from chaos.gate.cases import split_cases
from chaos.gate.driver.gatecase import GateCase
from chaos.gate.driver.session import GateSession
from chaos.gate.driver.variant import CALIBRATION, GATE_ID, TIMELINE, traffic_not_applicable
from chaos.gate.gatefile import GateFileError
from chaos.gate.report import Attempt, Calibration, CaseResult, GateReportError, gate_path, write_gate
from chaos.report.render import render_index
from chaos.run.layout import GATE_MD_NAME, JUNIT_NAME
from chaos.scenario.api import GATE_PLUGIN
from chaos.scenario.model import Scenario


def _scenario_of(item: pytest.Item) -> Scenario | None:
    scenario = getattr(getattr(item, "function", None), "scenario", None)
    return scenario if isinstance(scenario, Scenario) else None


def _variant_of(item: pytest.Item) -> object:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("variant") if callspec is not None else None


class GatePlugin:
    """The gate's pytest hooks, registered by the chaos plugin under ``--chaos-gate``; once ``gate.json``
    is written the output directory's HTML index is rendered again (it shows the gate's banner)."""

    def __init__(self, session: GateSession) -> None:
        self.session = session
        self.headline: str | None = None
        self.written: tuple[Path, ...] = ()

    def params(self, scenario: Scenario) -> list[object]:
        """The ``variant`` parameters of a scenario's test in this run: the gate variant (id ``gate``), and
        with calibration the case's built-in ``vulnerable`` and ``remediated`` variants."""
        params: list[object] = [pytest.param(GateCase(scenario, self.session), id=GATE_ID)]
        if self.session.calibrate:
            params += [name for name in CALIBRATION if name in scenario.variant_names]
        return params

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
            render_index(self.session.out)
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


def stale_outputs(out: Path) -> tuple[Path, ...]:
    """A previous gate's files in ``out`` (removed when a new gate run starts, so no banner is stale)."""
    return tuple(p for p in (gate_path(out), out / GATE_MD_NAME, out / JUNIT_NAME) if p.exists())


def configure_gate(config: pytest.Config) -> None:
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
    config.pluginmanager.register(GatePlugin(session), GATE_PLUGIN)
