"""The full gate run's results and the files a CI reads: ``gate.json`` (this module is its one owner),
``gate.md`` (a CI step summary or PR comment) and JUnit XML (one testcase per case).

Pure: built from per-case results (:class:`CaseResult`, each a list of :class:`Attempt`\\ s) by whoever ran
the cases (:mod:`chaos.gate.driver`). The gate's verdict and exit code:

- **1 failed**: the lint proves the configuration cannot keep the claim (unless the lint is advisory:
  ``--lint-advisory``), a case failed (an anomaly the claimed guarantee forbids, a threshold exceeded, or
  with ``--baseline`` a measure that regressed against the previous gate run), or one was *flaky* (failed,
  then passed on a retry) and the run does not allow flaky cases;
- **2 harness error**: a case could not be run, or the run itself broke (never a verdict);
- **3 inconclusive**: a case's verdict is ``unknown`` (a precondition did not hold, facts the audit could
  not establish), a threshold it could not measure, or a calibration run that did not show the fault;
- **0 passed**: every case passed.

A failed case (or the lint's proof) outranks a harness error (what was observed failing stays failed),
which outranks an inconclusive one.
"""

from __future__ import annotations

import ast
import json
import os
import re
import socket
import time
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Literal

from chaos.errors import ChaosError
from chaos.gate.baseline import (
    MEASURES,
    BaselineComparison,
    CaseComparison,
    CaseMeasures,
    Measure,
    compare,
    regression_lines,
)
from chaos.gate.cases import CasePlan
from chaos.gate.gatefile import Baseline
from chaos.gate.redact import redact
from chaos.gate.thresholds import Measured, Measurement
from chaos.run.files import write_atomic
from chaos.run.layout import GATE_MD_NAME, GATE_NAME, JUNIT_NAME

GATE_FORMAT: Final = 1

AttemptOutcome = Literal["pass", "fail", "unknown", "error"]
CaseOutcome = Literal["pass", "fail", "flaky", "unknown", "error"]
GateVerdict = Literal["pass", "fail", "error", "inconclusive"]
EXIT_CODES: Final[Mapping[str, int]] = MappingProxyType({"pass": 0, "fail": 1, "error": 2, "inconclusive": 3})


class GateReportError(ChaosError):
    """A ``gate.json`` that cannot be read; the message names the file and the fix."""


_LIST_REPR: Final = re.compile(r"[\[(]'[^'\[\]()]*'(?:, '[^'\[\]()]*')*,?[\])]")
_VALUE_ID: Final = re.compile(r"[^\s:']+:([^\s:']+:\d+)")


def sentence(text: str) -> str:
    """``text`` with every Python list of strings written as words: value ids without their run id
    (``values producer-0:12, producer-0:13, producer-0:14 and 58 more``), other strings joined by commas —
    what a reason of a case (its precondition's detail) reads as in gate.md, JUnit and the index."""

    def words(match: re.Match[str]) -> str:
        try:
            items = ast.literal_eval(match.group(0))
        except (ValueError, SyntaxError):
            return match.group(0)
        if isinstance(items, str):
            items = (items,)
        shown = [str(i) for i in items]
        ids = [_VALUE_ID.fullmatch(i) for i in shown]
        if shown and all(ids):
            short = [m.group(1) for m in ids if m is not None]
            more = f" and {len(short) - 3} more" if len(short) > 3 else ""
            return f"value{'s' if len(short) > 1 else ''} {', '.join(short[:3])}{more}"
        return ", ".join(shown) if shown else "none"

    return _LIST_REPR.sub(words, text)


@dataclass(frozen=True)
class ThresholdRow:
    """One threshold of one attempt as ``gate.json`` records it (``observed`` null: not measured)."""

    name: str
    limit: float
    observed: float | None
    passed: bool
    unit: str = ""
    window: str | None = None
    note: str = ""

    @classmethod
    def of(cls, m: Measurement) -> ThresholdRow:
        return cls(m.name, m.limit, m.observed, m.passed, m.unit, m.window, m.note)

    def measurement(self) -> Measurement:
        return Measurement(self.name, self.limit, self.observed, self.window, self.note)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "limit": self.limit,
            "observed": self.observed,
            "passed": self.passed,
            "unit": self.unit,
            "window": self.window,
            "note": self.note,
        }


@dataclass(frozen=True)
class Attempt:
    """One run of a case with the team's configuration.

    :param verdict: the run's verdict (the audit against the claimed guarantee; ``unknown`` when a
        precondition did not hold), or ``None`` when the run broke before one (``error`` says why).
    :param anomalies: the audit's non-zero anomaly counts; ``failed_by`` those the guarantee forbids.
    :param reasons: why the verdict is ``unknown`` (unmet preconditions, facts not established).
    :param own_checks: the case's own assertions (written for its built-in variants) that did not hold
        after the run was audited: evidence, never the verdict.
    :param cut_short: the assertion (a wait that timed out, a workload check) that stopped the case's
        timeline before its end: what was audited may fail, but cannot pass (inconclusive).
    :param report: the run's HTML report, relative to the gate's output directory.
    :param measures: every measure a baseline compares (:data:`~chaos.gate.baseline.MEASURES`), judged by
        a threshold or not.
    """

    run_id: str
    verdict: str | None
    failed_by: tuple[str, ...] = ()
    anomalies: Mapping[str, int] = field(default_factory=dict)
    thresholds: tuple[ThresholdRow, ...] = ()
    not_applicable: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    own_checks: tuple[str, ...] = ()
    report: str | None = None
    error: str | None = None
    seconds: float | None = None
    cut_short: str | None = None
    measures: tuple[Measure, ...] = ()
    notes: tuple[str, ...] = ()
    """What the gate changed in the case's run or the log policy did there, in words: the team's traffic
    (or why the case does not take it), values compacted or expired on purpose."""

    def __post_init__(self) -> None:
        if self.verdict not in (None, "pass", "fail", "unknown"):
            raise GateReportError(
                f"Attempt.verdict: expected pass, fail, unknown or None; got {self.verdict!r}"
            )
        if self.verdict is None and not self.error:
            raise GateReportError("Attempt: a run without a verdict needs the error that stopped it")
        object.__setattr__(self, "anomalies", MappingProxyType(dict(self.anomalies)))

    @classmethod
    def of(
        cls,
        run_id: str,
        verdict: str,
        *,
        failed_by: Sequence[str],
        counts: Mapping[str, int],
        measured: Measured,
        reasons: Sequence[str] = (),
        own_checks: Sequence[str] = (),
        report: str | None = None,
        seconds: float | None = None,
        cut_short: str | None = None,
        measures: Sequence[Measure] = (),
        notes: Sequence[str] = (),
    ) -> Attempt:
        """An attempt from a finished run's verdict, audit counts, measured thresholds and measures."""
        return cls(
            run_id,
            verdict,
            tuple(failed_by),
            {k: v for k, v in counts.items() if v},
            tuple(ThresholdRow.of(m) for m in measured.measurements),
            measured.not_applicable,
            tuple(reasons),
            tuple(own_checks),
            report,
            None,
            seconds,
            cut_short,
            tuple(measures),
            tuple(notes),
        )

    @property
    def outcome(self) -> AttemptOutcome:
        if self.verdict is None:
            return "error"
        if self.verdict == "fail" or any(t.observed is not None and not t.passed for t in self.thresholds):
            return "fail"
        if self.verdict == "unknown" or self.cut_short or any(t.observed is None for t in self.thresholds):
            return "unknown"
        return "pass"

    def problems(self) -> list[str]:
        """What made this attempt not pass, with numbers: forbidden anomalies, broken and unmeasured
        thresholds, why it is inconclusive, the harness error."""
        lines = [f"{name}: {self.anomalies.get(name, 0)} (forbidden)" for name in self.failed_by]
        if "expired_unread" in self.failed_by:
            lines += [note for note in self.notes if note.startswith("expired ")]
        lines += [f"threshold {t.measurement().describe()}" for t in self.thresholds if not t.passed]
        lines += [f"inconclusive: {reason}" for reason in self.reasons]
        if self.cut_short:
            lines.append(f"inconclusive: the case's timeline stopped before its end ({self.cut_short})")
        if self.error:
            lines.append(f"harness error: {self.error}")
        return [sentence(line) for line in lines]

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "outcome": self.outcome,
            "verdict": self.verdict,
            "failed_by": list(self.failed_by),
            "anomalies": dict(self.anomalies),
            "thresholds": [t.to_dict() for t in self.thresholds],
            "not_applicable": list(self.not_applicable),
            "reasons": list(self.reasons),
            "own_checks": list(self.own_checks),
            "report": self.report,
            "error": self.error,
            "seconds": self.seconds,
            "cut_short": self.cut_short,
            "measures": {m.name: m.to_dict() for m in self.measures},
            "notes": list(self.notes),
        }

    def observed(self) -> tuple[Measure, ...]:
        """The measures a baseline compares: those recorded, else (a gate.json written before measures
        were) the thresholds' observed values."""
        if self.measures:
            return self.measures
        return tuple(
            Measure(t.name, t.observed, t.window, t.note) for t in self.thresholds if t.name in MEASURES
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Attempt:
        measures = data.get("measures", {})
        return cls(
            str(data["run_id"]),
            data.get("verdict"),
            tuple(data.get("failed_by", ())),
            dict(data.get("anomalies", {})),
            tuple(ThresholdRow(**t) for t in data.get("thresholds", ())),
            tuple(data.get("not_applicable", ())),
            tuple(data.get("reasons", ())),
            tuple(data.get("own_checks", ())),
            data.get("report"),
            data.get("error"),
            data.get("seconds"),
            data.get("cut_short"),
            tuple(Measure.from_dict(n, measures[n]) for n in MEASURES if n in measures),
            tuple(data.get("notes", ())),
        )


@dataclass(frozen=True)
class Calibration:
    """A built-in variant of the case run beside the gate (``--calibrate``): did it reach its expected
    verdict on this machine (the ``vulnerable`` one failing shows the fault has teeth)?"""

    variant: str
    expected: str
    matched: bool
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            "expected": self.expected,
            "matched": self.matched,
            "detail": self.detail,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Calibration:
        return cls(
            str(data["variant"]), str(data["expected"]), bool(data["matched"]), str(data.get("detail", ""))
        )


@dataclass(frozen=True)
class CaseResult:
    """One catalog case in the gate: its attempts (the first, then the retries of a failure) and, with
    ``--calibrate``, its built-in variants' runs.

    :param timeline: the built-in variant whose fault and workload timeline the team's configuration ran.
    :param baseline: with ``--baseline``, its last attempt's measures against the previous gate run's.
    """

    case: str
    scenario_id: str
    nodeid: str
    timeline: str
    attempts: tuple[Attempt, ...]
    calibration: tuple[Calibration, ...] = ()
    title: str = ""
    baseline: CaseComparison | None = None

    @property
    def retries(self) -> int:
        return max(0, len(self.attempts) - 1)

    @property
    def outcome(self) -> CaseOutcome:
        """``flaky``: failed, then passed on a retry. A failure anywhere is never hidden by a later error
        or inconclusive attempt. A pass whose calibration did not reach its expected verdicts is
        ``unknown``: the fault did not show its teeth on this machine. A regression against the baseline
        is a failure."""
        if not self.attempts:
            return "error"
        if self.baseline is not None and self.baseline.regressed:
            return "fail"
        failed = any(a.outcome == "fail" for a in self.attempts)
        last = self.attempts[-1].outcome
        if last == "pass":
            if failed:
                return "flaky"
            return "pass" if all(c.matched for c in self.calibration) else "unknown"
        if failed:
            return "fail"
        return last

    @property
    def last(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None

    def problems(self) -> list[str]:
        """Why the case is not a pass, with numbers; every attempt's problems for a flaky or failed one."""
        lines: list[str] = []
        if self.outcome == "flaky":
            lines.append(
                f"flaky: failed {sum(a.outcome == 'fail' for a in self.attempts)} time(s), then passed on "
                f"retry {self.retries}"
            )
        for number, attempt in enumerate(self.attempts, 1):
            label = f"attempt {number} ({attempt.run_id}): " if len(self.attempts) > 1 else ""
            lines += [f"{label}{line}" for line in attempt.problems()]
        lines += [
            f"calibration: {c.variant} did not reach its expected verdict {c.expected} ({c.detail})"
            for c in self.calibration
            if not c.matched
        ]
        return [*lines, *regression_lines(self.baseline)]

    def measured(self) -> CaseMeasures:
        """What a baseline compares of this case: its timeline and its last attempt's measures."""
        return CaseMeasures(self.timeline, self.last.observed() if self.last else ())

    def message(self) -> str:
        """One paragraph for a JUnit failure or a PR comment: the outcome, the problems, the report."""
        text = f"{self.case}: {self.outcome}"
        problems = self.problems()
        if problems:
            text += " — " + "; ".join(problems)
        report = self.last.report if self.last else None
        return text + (f" (report: {report})" if report else "")

    def to_dict(self) -> dict[str, Any]:
        last = self.last
        return {
            "case": self.case,
            "scenario_id": self.scenario_id,
            "title": self.title,
            "nodeid": self.nodeid,
            "timeline": self.timeline,
            "outcome": self.outcome,
            "verdict": last.verdict if last else None,
            "anomalies": dict(last.anomalies) if last else {},
            "thresholds": [t.to_dict() for t in last.thresholds] if last else [],
            "retries": self.retries,
            "flaky": self.outcome == "flaky",
            "report": last.report if last else None,
            "measures": {m.name: m.to_dict() for m in self.measured().measures},
            "baseline": self.baseline.to_dict() if self.baseline else None,
            "attempts": [a.to_dict() for a in self.attempts],
            "calibration": [c.to_dict() for c in self.calibration],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CaseResult:
        return cls(
            str(data["case"]),
            str(data["scenario_id"]),
            str(data["nodeid"]),
            str(data["timeline"]),
            tuple(Attempt.from_dict(a) for a in data.get("attempts", ())),
            tuple(Calibration.from_dict(c) for c in data.get("calibration", ())),
            str(data.get("title", "")),
        )


@dataclass(frozen=True)
class GateReport:
    """A whole gate run: what was claimed, the lint, each case, and the session's own errors.

    :param configuration: the team's settings as the gate file gave them (secrets redacted on output).
    :param errors: harness errors of the run itself (pytest interrupted, resources left behind, no case
        collected) — each makes the gate exit 2 unless a case failed.
    :param allow_flaky: a flaky case does not fail the gate (it is still reported as flaky).
    :param baseline: with ``--baseline``, every case against the previous gate run (:meth:`against`);
        each case's own comparison is attached to it, so a regression fails that case.
    """

    gate_file: str
    guarantee: str
    time_profile: str
    cases: tuple[CaseResult, ...]
    lint: Mapping[str, Any] = field(default_factory=dict)
    configuration: Mapping[str, Any] = field(default_factory=dict)
    errors: tuple[str, ...] = ()
    allow_flaky: bool = False
    calibrate: bool = False
    started_ts: float | None = None
    ended_ts: float | None = None
    baseline: BaselineComparison | None = None
    plan: CasePlan | None = None
    lint_advisory: bool = False

    def __post_init__(self) -> None:
        if self.baseline is not None:
            cases = tuple(replace(c, baseline=self.baseline.case(c.case)) for c in self.cases)
            object.__setattr__(self, "cases", cases)

    def against(self, old: GateReport, source: str, rule: Baseline) -> GateReport:
        """This report with every case compared with the same case of ``old`` (a previous gate run read
        from ``source``) by ``rule``, the gate file's ``[baseline]``."""
        return replace(self, baseline=compare_cases(old, self.cases, self.time_profile, source, rule))

    @property
    def lint_not_kept(self) -> bool:
        """The lint proved the configuration cannot keep the claim."""
        return bool(self.lint) and self.lint.get("kept") is False

    @property
    def lint_fails(self) -> bool:
        """The lint's proof fails the run (it is not advisory)."""
        return self.lint_not_kept and not self.lint_advisory

    def lint_rules(self) -> tuple[str, ...]:
        """The rules that break the claim."""
        return tuple(str(v.get("rule")) for v in self.lint.get("violations", ()))

    def lint_named(self) -> tuple[str, ...]:
        """The cases the lint names ("shown by") for the rules that break the claim."""
        named: dict[str, None] = {}
        for violation in self.lint.get("violations", ()):
            named.update(dict.fromkeys(str(c) for c in violation.get("cases", ())))
        return tuple(named)

    def reproduced(self) -> tuple[str, ...]:
        """The lint's cases that ran and failed: the run showed what the lint found."""
        named = set(self.lint_named())
        return tuple(c.case for c in self.cases if c.case in named and c.outcome in ("fail", "flaky"))

    def lint_line(self) -> str:
        """The lint's result in one sentence, beside the cases': ``lint: at_least_once NOT KEPT by the
        configuration (commit_before_processing; shown by L6) — the run did not reproduce it``."""
        lint = self.lint
        if not lint:
            return "lint: not recorded"
        if not self.lint_not_kept:
            return f"lint: {self.guarantee} kept by the configuration"
        named = self.lint_named()
        ran = [c for c in named if any(case.case == c for case in self.cases)]
        if self.reproduced():
            shown = f"the run did reproduce it ({', '.join(self.reproduced())} failed)"
        elif ran:
            shown = f"the run did not reproduce it ({', '.join(ran)} ran)"
        else:
            shown = "the run did not reproduce it (none of its cases ran)"
        text = (
            f"lint: {self.guarantee} NOT KEPT by the configuration ({', '.join(self.lint_rules())}; shown by "
            f"{', '.join(named) or 'no case'}) — {shown}"
        )
        text += (
            "; advisory (--lint-advisory): the cases alone decide"
            if self.lint_advisory
            else "; this alone fails the gate"
        )
        return text

    def cases_line(self) -> str:
        """Which cases ran and why, and the lint's cases that did not (empty without a plan)."""
        plan = self.plan
        if plan is None:
            return ""
        text = f"cases: {plan.describe()}"
        if plan.not_run:
            text += f"; named by the lint, not run: {plan.not_run_text()}"
        return text

    @property
    def verdict(self) -> GateVerdict:
        outcomes = [c.outcome for c in self.cases]
        if "fail" in outcomes or ("flaky" in outcomes and not self.allow_flaky) or self.lint_fails:
            return "fail"
        if self.errors or "error" in outcomes or not outcomes:
            return "error"
        if "unknown" in outcomes:
            return "inconclusive"
        return "pass"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    def counts(self) -> dict[str, int]:
        found = {o: 0 for o in ("pass", "fail", "flaky", "unknown", "error")}
        for case in self.cases:
            found[case.outcome] += 1
        return found

    def headline(self) -> str:
        """``gate FAILED (exit 1): claims at_least_once; 2 of 5 cases failed (ISR2, L2)``."""
        word = {"pass": "PASSED", "fail": "FAILED", "error": "ERROR", "inconclusive": "INCONCLUSIVE"}
        counts = self.counts()
        parts = [
            f"{n} {o}"
            + (f" ({', '.join(c.case for c in self.cases if c.outcome == o)})" if o != "pass" else "")
            for o, n in counts.items()
            if n
        ]
        cases = "; ".join(parts) if parts else "no case ran"
        regressed = self.baseline.regressed if self.baseline else ()
        lint = ""
        if self.lint_not_kept:
            reproduced = "did" if self.reproduced() else "did not"
            advisory = ", advisory" if self.lint_advisory else ""
            rules = ", ".join(self.lint_rules())
            lint = f"; lint: NOT KEPT ({rules}{advisory}; the run {reproduced} reproduce it)"
        elif self.lint:
            lint = "; lint: kept"
        added = self.plan.added_by_lint if self.plan else ()
        return (
            f"gate {word[self.verdict]} (exit {self.exit_code}): claims {self.guarantee}; "
            f"{len(self.cases)} case(s): {cases}"
            + (f" (added by the lint: {', '.join(added)})" if added else "")
            + lint
            + (f"; regressed against the baseline: {', '.join(regressed)}" if regressed else "")
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": GATE_FORMAT,
            "gate_file": self.gate_file,
            "guarantee": self.guarantee,
            "time_profile": self.time_profile,
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "headline": self.headline(),
            "counts": self.counts(),
            "allow_flaky": self.allow_flaky,
            "calibrate": self.calibrate,
            "lint": redact(dict(self.lint)),
            "configuration": redact(dict(self.configuration)),
            "errors": list(self.errors),
            "cases": [c.to_dict() for c in self.cases],
            "started_ts": self.started_ts,
            "ended_ts": self.ended_ts,
            "baseline": self.baseline.to_dict() if self.baseline else None,
            "plan": self.plan.to_dict() if self.plan else None,
            "lint_advisory": self.lint_advisory,
            "lint_line": self.lint_line(),
        }

    def to_json(self) -> str:
        return (
            json.dumps(self.to_dict(), indent=2, sort_keys=True, allow_nan=False, ensure_ascii=False) + "\n"
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GateReport:
        if data.get("format") != GATE_FORMAT:
            raise GateReportError(
                f"gate.json: format {data.get('format')!r}; this harness reads format {GATE_FORMAT}"
            )
        return cls(
            str(data["gate_file"]),
            str(data["guarantee"]),
            str(data.get("time_profile", "")),
            tuple(CaseResult.from_dict(c) for c in data.get("cases", ())),
            dict(data.get("lint", {})),
            dict(data.get("configuration", {})),
            tuple(data.get("errors", ())),
            bool(data.get("allow_flaky", False)),
            bool(data.get("calibrate", False)),
            data.get("started_ts"),
            data.get("ended_ts"),
            BaselineComparison.from_dict(data["baseline"]) if data.get("baseline") else None,
            CasePlan.from_dict(data["plan"]) if data.get("plan") else None,
            bool(data.get("lint_advisory", False)),
        )

    # ---- gate.md -------------------------------------------------------------------------------------

    def markdown(self) -> str:
        """A short Markdown summary for a CI step summary or a PR comment."""
        mark = {"pass": "✅", "fail": "❌", "error": "⚠️", "inconclusive": "❔"}[self.verdict]
        lines = [f"## {mark} chaos {self.headline()}", ""]
        lines.append(f"Gate file `{self.gate_file}` · time profile `{self.time_profile}`")
        lint = self.lint
        if lint:
            if self.lint_not_kept:
                reproduced = "did" if self.reproduced() else "did not"
                rules = ", ".join(f"`{r}`" for r in self.lint_rules())
                decides = (
                    "advisory (`--lint-advisory`): the cases alone decide"
                    if self.lint_advisory
                    else "this alone fails the gate (exit 1)"
                )
                shown = ", ".join(self.lint_named())
                lines.append(
                    f"Lint (before any container): {self.guarantee} **NOT KEPT by the configuration (lint)** "
                    f"— the run {reproduced} reproduce it ({rules}; shown by {shown}); {decides}"
                )
            else:
                lines.append(f"Lint (before any container): {self.guarantee} is kept by the configuration")
            lines[-1] += f"; the strongest guarantee the settings keep: `{lint.get('strongest') or 'none'}`"
        plan = self.plan
        if plan is not None:
            lines.append(f"Cases: {plan.describe()}")  # names the lint's added cases
            if plan.not_run:
                lines.append(f"Named by the lint, not run: {_cell(plan.not_run_text())}")
        lines += ["", "| case | result | verdict | anomalies | thresholds | retries | report |"]
        lines.append("|---|---|---|---|---|---|---|")
        for case in self.cases:
            last = case.last
            anomalies = ", ".join(
                f"{k} {v}" + (" (forbidden)" if last and k in last.failed_by else "")
                for k, v in (last.anomalies.items() if last else ())
            )
            thresholds = "<br>".join(
                ("✓ " if t.passed else "✗ ") + t.measurement().describe()
                for t in (last.thresholds if last else ())
            )
            report = f"[report]({last.report})" if last and last.report else "—"
            verdict = (last.verdict or "error") if last else "error"
            lines.append(
                f"| {case.case} | **{case.outcome}** | {verdict} | {_cell(anomalies or 'none')} | "
                f"{_cell(thresholds or '—')} | {case.retries} | {report} |"
            )
        trouble = [c for c in self.cases if c.outcome != "pass"]
        if trouble or self.errors or self.lint_fails:
            lines += ["", "### Why", ""]
            if self.lint_fails:
                lines.append(f"- **lint**: {_cell(self.lint_line())}")
            lines += [
                f"- **{c.case}** ({c.outcome}): {_cell('; '.join(c.problems()) or '—')}" for c in trouble
            ]
            lines += [f"- harness: {_cell(e)}" for e in self.errors]
        noted = [(c.case, c.last.notes) for c in self.cases if c.last is not None and c.last.notes]
        if noted:
            lines += ["", "### How each case ran", ""]
            lines += [f"- **{case}**: {_cell('; '.join(notes))}" for case, notes in noted]
        lines += self._baseline_markdown()
        lines += self._calibration_markdown()
        if self.lint_not_kept and not self.reproduced():
            lines += [
                "",
                "> The lint says the settings cannot keep the claim; the cases run did not show it. "
                "See `chaos gate --check-only` for the rules, the cases that show them and the fix.",
            ]
        return "\n".join(lines) + "\n"

    def _calibration_markdown(self) -> list[str]:
        """The *Calibration* section (``--calibrate``): did each built-in variant reach its verdict here?"""
        rows = [(case.case, c) for case in self.cases for c in case.calibration]
        if not rows:
            return []
        lines = [
            "",
            "### Calibration",
            "",
            "The case's built-in variants on this machine: the `vulnerable` one reaching its expected "
            "verdict shows the fault has teeth.",
            "",
            "| case | variant | expected verdict | reached |",
            "|---|---|---|---|",
        ]
        for case_id, c in rows:
            reached = "yes" if c.matched else f"**no** ({_cell(c.detail or 'not reached')})"
            lines.append(f"| {case_id} | {c.variant} | {c.expected} | {reached} |")
        return lines

    def _baseline_markdown(self) -> list[str]:
        """The *Against the baseline* section: one row per measure of each case (or why not compared)."""
        baseline = self.baseline
        if baseline is None:
            return []
        regressed = baseline.regressed
        result = (
            f"**{len(regressed)} case(s) regressed** ({', '.join(regressed)})"
            if regressed
            else "no regression"
        )
        lines = [
            "",
            "### Against the baseline",
            "",
            f"`{baseline.source}`: a measure regresses when {baseline.rule()} than there. {result}.",
            "",
            "| case | measure | old | new | allowed | regressed |",
            "|---|---|---|---|---|---|",
        ]
        for case in baseline.cases:
            if not case.measures:
                lines.append(f"| {case.case} | — | — | — | — | not compared: {_cell(case.note)} |")
            for m in case.measures:
                old, new, allowed = m.cells()
                if m.compared:
                    mark = "**yes**" if m.regressed else "no"
                else:
                    mark = f"not compared: {_cell(m.note)}"
                lines.append(f"| {case.case} | {m.name} | {old} | {new} | {allowed} | {mark} |")
        return lines

    # ---- JUnit ---------------------------------------------------------------------------------------

    def junit_xml(self) -> str:
        """JUnit XML: one testsuite, one testcase per case. A failed or flaky case is a ``failure`` (flaky:
        ``type="flaky"``), an inconclusive one an ``error`` of ``type="inconclusive"``, a harness error an
        ``error``; the message holds the failing anomalies and thresholds with numbers and the report. When
        the lint's proof fails the gate, a testcase ``lint`` fails (``type="lint"``) with its rules."""
        counts = self.counts()
        flaky_fails = 0 if self.allow_flaky else counts["flaky"]
        lint_case = 1 if self.lint_fails else 0  # the lint's proof fails the gate: a testcase of its own
        failures = counts["fail"] + flaky_fails + (1 if self.lint_fails else 0)
        errors = counts["error"] + counts["unknown"]
        duration = sum(a.seconds or 0.0 for c in self.cases for a in c.attempts)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(self.started_ts or time.time()))
        name = f"chaos gate {self.gate_file} (claims {self.guarantee})"
        common = {"tests": str(len(self.cases) + lint_case), "failures": str(failures), "errors": str(errors)}
        root = ET.Element("testsuites", {"name": name, **common, "time": f"{duration:.3f}"})
        suite = ET.SubElement(
            root,
            "testsuite",
            {
                "name": name,
                **common,
                "skipped": "0",
                "time": f"{duration:.3f}",
                "timestamp": stamp,
                "hostname": socket.gethostname() or "localhost",
            },
        )
        props = ET.SubElement(suite, "properties")
        for key, value in (
            ("gate_file", self.gate_file),
            ("guarantee", self.guarantee),
            ("time_profile", self.time_profile),
            ("verdict", self.verdict),
            ("exit_code", str(self.exit_code)),
            ("lint_kept", str(bool(self.lint.get("kept"))).lower() if self.lint else "unknown"),
            ("lint_advisory", str(self.lint_advisory).lower()),
        ):
            ET.SubElement(props, "property", {"name": key, "value": value})
        classname = f"chaos.gate.{Path(self.gate_file).stem or 'gate'}"
        if self.lint_fails:
            element = ET.SubElement(
                suite, "testcase", {"classname": classname, "name": "lint", "time": "0.000"}
            )
            failure = ET.SubElement(element, "failure", {"message": self.lint_line(), "type": "lint"})
            failure.text = "\n".join(
                f"{v.get('rule')}: {v.get('why')} (fix: {v.get('fix')})"
                for v in self.lint.get("violations", ())
            )
            ET.SubElement(element, "system-out").text = "\n".join(
                filter(None, (self.lint_line(), self.cases_line()))
            )
        for case in self.cases:
            seconds = sum(a.seconds or 0.0 for a in case.attempts)
            element = ET.SubElement(
                suite, "testcase", {"classname": classname, "name": case.case, "time": f"{seconds:.3f}"}
            )
            outcome = case.outcome
            message = case.message()
            detail = "\n".join(case.problems())
            if outcome == "fail" or (outcome == "flaky" and not self.allow_flaky):
                failure = ET.SubElement(element, "failure", {"message": message, "type": outcome})
                failure.text = detail
            elif outcome in ("unknown", "error"):
                kind = "inconclusive" if outcome == "unknown" else "error"
                error = ET.SubElement(element, "error", {"message": message, "type": kind})
                error.text = detail
            out = [f"outcome: {outcome}", f"timeline: {case.timeline}", f"retries: {case.retries}"]
            out += [f"report: {a.report}" for a in case.attempts if a.report]
            out += [f"own check not met: {sentence(c)}" for a in case.attempts for c in a.own_checks]
            ET.SubElement(element, "system-out").text = "\n".join(out)
        if self.errors:
            ET.SubElement(suite, "system-err").text = "\n".join(self.errors)
        ET.indent(root)
        return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def compare_cases(
    old: GateReport, cases: Sequence[CaseResult], time_profile: str, source: str, rule: Baseline
) -> BaselineComparison:
    """``cases`` (of a gate run in ``time_profile``) against the same cases of ``old``, read from
    ``source``: the last attempt's measures of each."""
    return compare(
        {c.case: c.measured() for c in old.cases},
        {c.case: c.measured() for c in cases},
        rule,
        source=source,
        old_profile=old.time_profile,
        new_profile=time_profile,
    )


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def gate_path(root: str | os.PathLike[str]) -> Path:
    return Path(root) / GATE_NAME


def write_gate(
    root: str | os.PathLike[str], report: GateReport, junit: str | os.PathLike[str] | None = None
) -> tuple[Path, Path, Path]:
    """Write ``gate.json``, ``gate.md`` (in ``root``) and the JUnit XML (``junit``, default
    ``root/junit.xml``); returns their paths."""
    base = Path(root)
    junit_path = Path(junit) if junit is not None else base / JUNIT_NAME
    junit_path.parent.mkdir(parents=True, exist_ok=True)
    written = (
        write_atomic(gate_path(base), report.to_json()),
        write_atomic(base / GATE_MD_NAME, report.markdown()),
        write_atomic(junit_path, report.junit_xml()),
    )
    return written


def read_gate(root: str | os.PathLike[str]) -> GateReport | None:
    """The ``gate.json`` in ``root``, or ``None`` when there is none."""
    path = gate_path(root)
    return read_gate_file(path, fix="delete it or rerun the gate") if path.is_file() else None


BASELINE_FIX: Final = (
    "give the gate.json a `chaos gate` run wrote (in its --out directory, default reports/gate/)"
)


def read_gate_file(path: str | os.PathLike[str], fix: str = BASELINE_FIX) -> GateReport:
    """The ``gate.json`` at ``path`` (by default a previous gate run's, for ``--baseline``). Raises
    :class:`GateReportError` naming the file and ``fix`` when it is missing, unreadable, not JSON, or not a
    gate.json this harness wrote."""
    file = Path(path)
    if not file.is_file():
        problem = "is a directory" if file.is_dir() else "does not exist"
        raise GateReportError(f"{file}: {problem}; {fix}")
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise GateReportError(f"{file}: cannot be read ({exc}); {fix}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise GateReportError(f"{file}: not JSON ({exc}); {fix}") from None
    if not isinstance(data, dict):
        raise GateReportError(f"{file}: not a gate.json (a JSON {type(data).__name__}); {fix}")
    try:
        return GateReport.from_dict(data)
    except GateReportError as exc:
        raise GateReportError(f"{file}: {exc}; {fix}") from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise GateReportError(
            f"{file}: not a gate.json this harness wrote ({type(exc).__name__}: {exc}); {fix}"
        ) from None
