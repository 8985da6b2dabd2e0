"""One gate run's state: the gate file and its lint, the outputs' place, each case's result."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from chaos import versions
from chaos.gate.cases import CasePlan, plan_cases
from chaos.gate.driver.variant import TIMELINE, config_notes
from chaos.gate.gatefile import GateFile, load_gate
from chaos.gate.lint import LintResult, lint_gate
from chaos.gate.report import Calibration, CaseResult, GateReport, compare_cases, read_gate_file


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
