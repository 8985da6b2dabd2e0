"""Render a run directory into one self-contained HTML page, and an index page per run root.

A page reads ``scenario.json`` (:class:`~chaos.report.inputs.ScenarioInfo`), the history
(:func:`chaos.history.load_history`: Parquet, or the JSONL segments of a run that crashed), ``audit.json``
(:class:`~chaos.audit.verdict.AuditResult`), ``evidence.json`` (:class:`~chaos.run.evidence.Evidence`) and the
broker logs. Whatever is missing is said on the page; the page never computes anomalies itself. The verdict
it shows is the run's (:func:`run_verdict`): the audit's, or ``unknown`` when a precondition of the case did
not hold. plotly.js is one file per report tree (:mod:`chaos.report.assets`) that each page loads by a
relative path, so a page opens from ``file://`` without any network.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from chaos.errors import ChaosError
from chaos.report.assets import asset_root, ensure_plotly, plotly_path, plotly_version, relative_url
from chaos.report.inputs import (
    ExpectedSymptom,
    InvalidReportInput,
    ReportError,
    ScenarioInfo,
    read_audit,
    read_scenario,
)
from chaos.run.evidence import EvidenceError, read_evidence
from chaos.run.files import write_atomic
from chaos.run.layout import (
    ASSETS_DIR,
    AUDIT_NAME,
    EVIDENCE_NAME,
    HISTORY_DIR,
    INDEX_NAME,
    LOGS_DIR,
    PAGE_NAME,
    SCENARIO_NAME,
    SUMMARY_NAME,
)

if TYPE_CHECKING:
    import jinja2

    from chaos.audit.facts import ConsumeGap
    from chaos.audit.verdict import AuditResult
    from chaos.report.story import Story
    from chaos.report.symptoms import SymptomMatch
    from chaos.report.timeline import FaultSpan, Timeline
    from chaos.run.evidence import Check, Evidence
    from chaos.run.terms import Verdict

MAX_RUN_DEPTH: Final = 5
_SKIP_DIRS: Final = frozenset({HISTORY_DIR, LOGS_DIR, ASSETS_DIR, "__pycache__"})


@dataclass(frozen=True)
class RunContext:
    """What the pytest plugin knows about the test that produced a run (all optional)."""

    nodeid: str | None = None
    outcome: str | None = None
    seed: int | None = None
    profile: str | None = None


@dataclass(frozen=True)
class RunSummary:
    """One run as the index lists it (``<run_dir>/report.json``)."""

    run_dir: str
    scenario_id: str
    title: str
    case_id: str | None
    verdict: str
    guarantee: str | None
    failed_by: tuple[str, ...]
    outcome: str | None
    started_ts: float | None
    duration_s: float | None
    missing: tuple[str, ...]
    page: str | None
    reasons: tuple[str, ...] = ()
    """Why the run's evidence makes its verdict ``unknown`` (:func:`run_verdict`)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_dir": self.run_dir,
            "scenario_id": self.scenario_id,
            "title": self.title,
            "case_id": self.case_id,
            "verdict": self.verdict,
            "guarantee": self.guarantee,
            "failed_by": list(self.failed_by),
            "outcome": self.outcome,
            "started_ts": self.started_ts,
            "duration_s": self.duration_s,
            "missing": list(self.missing),
            "page": self.page,
            "reasons": list(self.reasons),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunSummary:
        return cls(
            str(data["run_dir"]),
            str(data["scenario_id"]),
            str(data.get("title") or ""),
            data.get("case_id"),
            str(data.get("verdict") or "unknown"),
            data.get("guarantee"),
            tuple(data.get("failed_by") or ()),
            data.get("outcome"),
            data.get("started_ts"),
            data.get("duration_s"),
            tuple(data.get("missing") or ()),
            data.get("page"),
            tuple(data.get("reasons") or ()),
        )


@dataclass(frozen=True)
class SymptomRow:
    """An expected symptom's row on the page: what the report found of it, and the run's own check of it
    (``None`` for a ``broker_log`` symptom, which only the report looks for, or a run without evidence)."""

    match: SymptomMatch
    check: Check | None


@dataclass(frozen=True)
class RenderedRun:
    """A page written: where, what it says, its size and how long rendering took."""

    page: Path
    summary: RunSummary
    bytes: int
    seconds: float
    warnings: tuple[str, ...] = field(default=())


# ------------------------------------------------------------------------------------------ environment


@cache
def _environment() -> jinja2.Environment:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("chaos.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["utc"] = format_utc
    env.filters["secs"] = format_seconds
    env.filters["num"] = format_number
    env.filters["has_han"] = has_han
    env.filters["event"] = _describe_event
    return env


def has_han(text: str | None) -> bool:
    """Whether ``text`` holds Chinese characters (CJK unified ideographs), so its element says ``lang="zh"``
    and the browser picks a CJK font for it."""
    return text is not None and any("\u3400" <= ch <= "\u9fff" or "\uf900" <= ch <= "\ufaff" for ch in text)


def _describe_event(line: Any) -> str:
    from chaos.report.attribution import describe_event

    return describe_event(line)


def format_utc(ts: float | None) -> str:
    if ts is None:
        return "—"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def format_seconds(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.3f} s" if abs(value) < 10 else f"{value:.1f} s"


def format_number(value: float | int | None, digits: int = 1) -> str:
    if value is None:
        return "—"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.{digits}f}"


# ------------------------------------------------------------------------------------------- discovery


def is_run_dir(path: Path) -> bool:
    """A directory that holds a history, a ``scenario.json`` or an ``audit.json``."""
    from chaos.history import RunDir

    return path.is_dir() and (
        RunDir.of(path).has_history() or (path / SCENARIO_NAME).exists() or (path / AUDIT_NAME).exists()
    )


def find_runs(root: str | os.PathLike[str], max_depth: int = MAX_RUN_DEPTH) -> list[Path]:
    """Every run directory at or below ``root`` (not descending into a run's ``history``/``logs``)."""
    base = Path(root)
    found: list[Path] = []

    def walk(path: Path, depth: int) -> None:
        if is_run_dir(path):
            found.append(path)
        if depth >= max_depth:
            return
        try:
            children = sorted(p for p in path.iterdir() if p.is_dir() and p.name not in _SKIP_DIRS)
        except OSError:
            return
        for child in children:
            if not child.name.startswith("."):
                walk(child, depth + 1)

    walk(base, 0)
    return found


# ------------------------------------------------------------------------------------------------ page


def reproduce_command(info: ScenarioInfo | None, context: RunContext | None) -> str | None:
    """The command that runs the scenario again with the same seed and profile."""
    if info is not None and info.command:
        return info.command
    nodeid = (info.nodeid if info is not None else None) or (context.nodeid if context else None)
    seed = info.seed if info is not None and info.seed is not None else (context.seed if context else None)
    profile = (info.time_profile if info is not None else None) or (context.profile if context else None)
    if nodeid:
        parts = [".venv/bin/pytest", nodeid]
    elif info is not None:
        parts = [".venv/bin/pytest", "-m", "chaos", "scenarios", "-k", info.scenario_id]
    else:
        return None
    if seed is not None:
        parts.append(f"--chaos-seed={seed}")
    if profile:
        parts.append(f"--chaos-profile={profile}")
    if info is not None and info.brokers is not None:
        parts.append(f"--chaos-brokers={info.brokers}")
    if info is not None and info.kafka_version is not None:
        parts.append(f"--kafka-version={info.kafka_version}")
    return shlex.join(parts)


def replay_command(run_dir: Path) -> str | None:
    """``chaos replay RUN_DIR`` for a run that ran a fault plan (it left ``plan.json``), else None."""
    from chaos.run.layout import PLAN_NAME

    if not (run_dir / PLAN_NAME).is_file():
        return None
    return shlex.join([".venv/bin/chaos", "replay", str(run_dir)])


def _missing(
    info: ScenarioInfo | None,
    scenario_error: str | None,
    history: Any,
    history_error: str | None,
    timeline: Timeline | None,
    audit: AuditResult | None,
    audit_error: str | None,
    log_dir: Path,
    logs: list[Path],
    evidence_error: str | None,
) -> list[str]:
    out = []
    if scenario_error:
        out.append(
            f"scenario.json is unreadable ({scenario_error}): configuration, expected symptoms and "
            f"remediation are not shown"
        )
    elif info is None:
        out.append(
            "no scenario.json: the scenario, its configuration, expected symptoms and remediation "
            "were not recorded"
        )
    elif info.ended_ts is None:
        out.append(
            "the scenario did not record its end (no ended_ts in scenario.json): it crashed or is "
            "still running"
        )
    if history_error:
        out.append(f"no readable history ({history_error}): no timeline, no symptoms from client events")
    elif history is not None:
        if history.source == "jsonl":
            out.append(
                "the history was never closed (JSONL segments only, no events.parquet): the run "
                "crashed or is still running; events after the last flush are lost"
            )
        if history.torn_lines:
            out.append(f"{history.torn_lines} torn history line(s) skipped (the writer was killed mid-line)")
        if timeline is not None and history.table.num_rows and "drain_end" not in timeline.kind_counts:
            out.append("no final drain in the history (no drain_end event): the run ended before it")
    if audit_error:
        out.append(f"audit.json is unreadable ({audit_error}): verdict unknown")
    elif audit is None:
        out.append(
            "no audit result (audit.json): the anomalies and the verdict are unknown — run "
            "`chaos audit RUN_DIR`"
        )
    if not logs:
        out.append(f"no broker logs in {log_dir.name}/: broker-log symptoms and log excerpts are not shown")
    if evidence_error:
        out.append(f"{EVIDENCE_NAME} is unreadable ({evidence_error}): the run's checks are not shown")
    return out


def read_run_evidence(run_dir: Path) -> tuple[Evidence | None, str | None]:
    """The run's ``evidence.json`` (``None``: it wrote none), or the error that kept it from being read."""
    try:
        return read_evidence(run_dir), None
    except EvidenceError as exc:
        return None, str(exc)


def run_verdict(
    audit: AuditResult | None, evidence: Evidence | None, evidence_error: str | None = None
) -> tuple[Verdict, tuple[str, ...]]:
    """The run's verdict and, when the evidence makes it ``unknown``, why.

    The audit's verdict (``unknown`` without one), unless a precondition of the case did not hold
    (:meth:`Evidence.verdict`) or ``evidence.json`` is unreadable (its preconditions cannot be checked):
    then ``unknown`` — inconclusive, never the audit's pass."""
    if evidence_error is not None:
        return "unknown", (f"{EVIDENCE_NAME} is unreadable: the case's preconditions cannot be checked",)
    audit_verdict: Verdict = audit.verdict if audit is not None else "unknown"
    if evidence is None:
        return audit_verdict, ()
    return evidence.verdict(audit_verdict), evidence.reasons()


def symptom_rows(
    matches: Iterable[SymptomMatch], evidence: Evidence | None
) -> tuple[list[SymptomRow], tuple[Check, ...]]:
    """Each expected symptom's match with the run's check of the same symptom (the runner records one per
    ``error_code`` / ``client_log`` symptom, named by ``ExpectedSymptom.check_description``), and the
    run's other checks — so no symptom is listed twice."""

    others = list(evidence.checks) if evidence is not None else []
    rows = []
    for match in matches:
        check = None
        if match.symptom.kind != "broker_log":
            wanted = match.symptom.check_description
            check = next((c for c in others if c.kind == "symptom" and c.description == wanted), None)
            if check is not None:
                others.remove(check)
        rows.append(SymptomRow(match, check))
    return rows, tuple(others)


def _summary(
    run_dir: Path,
    info: ScenarioInfo | None,
    audit: AuditResult | None,
    timeline: Timeline | None,
    context: RunContext | None,
    missing: list[str],
    page: str | None,
    verdict: tuple[Verdict, tuple[str, ...]],
) -> RunSummary:
    started = (
        info.started_ts
        if info is not None and info.started_ts is not None
        else (timeline.t0 if timeline is not None else None)
    )
    if info is not None and info.started_ts is not None and info.ended_ts is not None:
        duration: float | None = info.ended_ts - info.started_ts
    else:
        duration = timeline.duration_s if timeline is not None else None
    outcome = (context.outcome if context is not None and context.outcome else None) or (
        info.outcome if info is not None else None
    )
    return RunSummary(
        run_dir=str(run_dir),
        scenario_id=info.scenario_id if info is not None else run_dir.name,
        title=info.title if info is not None else "",
        case_id=info.case_id if info is not None else None,
        verdict=verdict[0],
        guarantee=audit.guarantee if audit is not None else (info.guarantee if info is not None else None),
        failed_by=audit.failed_by if audit is not None else (),
        outcome=outcome,
        started_ts=started,
        duration_s=duration,
        missing=tuple(missing),
        page=page,
        reasons=verdict[1],
    )


def build_page(
    run_dir: str | os.PathLike[str],
    context: RunContext | None = None,
    root: str | os.PathLike[str] | None = None,
) -> tuple[str, RunSummary]:
    """The HTML of one run's page and its summary (nothing written). The page loads plotly.js from the
    report tree rooted at ``root`` (default: :func:`~chaos.report.assets.asset_root` of the run dir)."""
    from chaos.cluster.logs import log_files
    from chaos.errors import HistoryError
    from chaos.history import RunDir, load_history
    from chaos.report.explain import ANOMALY_HINTS, explain
    from chaos.report.symptoms import history_symptoms, scan_logs
    from chaos.report.timeline import STALL_SHADE_S, build_timeline, figures_json

    path = Path(run_dir)
    if not path.is_dir():
        raise ReportError(f"{path} is not a directory; pass a run directory (one holding history/)")

    info: ScenarioInfo | None = None
    scenario_error = None
    try:
        info = read_scenario(path)
    except InvalidReportInput as exc:
        scenario_error = str(exc)

    audit: AuditResult | None = None
    audit_error = None
    try:
        audit = read_audit(path)
    except InvalidReportInput as exc:
        audit_error = str(exc)

    evidence, evidence_error = read_run_evidence(path)

    history = None
    history_error = None
    timeline = None
    if RunDir.of(path).has_history():
        try:
            history = load_history(path)
            consumer = audit.facts.availability.consumer if audit is not None else None
            timeline = build_timeline(history.table, consumer)
        except HistoryError as exc:
            history_error = str(exc)
    else:
        history_error = f"nothing under {path.name}/history/"

    log_dir = path / (info.log_dir if info is not None else LOGS_DIR)
    logs = log_files(log_dir)
    symptoms: tuple[ExpectedSymptom, ...] = info.expected_symptoms if info is not None else ()
    spans = timeline.faults if timeline is not None else ()
    log_matches, excerpts = scan_logs(logs, symptoms, spans, info.started_ts if info is not None else None)
    table = history.table if history is not None and history_error is None else None
    matches: list[SymptomMatch] = history_symptoms(table, symptoms, timeline.t0 if timeline else None)
    matches += log_matches
    order = {id(s): i for i, s in enumerate(symptoms)}
    matches.sort(key=lambda m: order.get(id(m.symptom), 0))
    rows, other_checks = symptom_rows(matches, evidence)

    missing = _missing(
        info,
        scenario_error,
        history,
        history_error,
        timeline,
        audit,
        audit_error,
        log_dir,
        logs,
        evidence_error,
    )
    verdict = run_verdict(audit, evidence, evidence_error)
    summary = _summary(path, info, audit, timeline, context, missing, PAGE_NAME, verdict)

    failing: list[str] = []
    if audit is not None:
        failing += [f"anomaly {name}: {audit.facts.anomaly(name).count}" for name in audit.failed_by]
        failing += [f"not established: {p}" for p in audit.facts.problems]
    if info is not None:
        failing += [
            f"threshold {t.name}: {format_number(t.observed, 3)} {t.unit} (limit {t.limit} {t.unit})"
            for t in info.thresholds
            if not t.passed
        ]
    hints: list[str] = list(info.remediation) if info is not None else []
    generic = [
        (name, ANOMALY_HINTS[name]) for name in (audit.failed_by if audit else ()) if name in ANOMALY_HINTS
    ]

    plan_steps: list[dict[str, Any]] = []
    if info is not None and info.plan is not None:
        for step in info.plan.get("steps", ()) or ():
            if isinstance(step, dict):
                plan_steps.append(
                    {
                        "at_s": step.get("at_s"),
                        "duration_s": step.get("duration_s"),
                        "kind": step.get("kind"),
                        "target": json.dumps(step.get("target"), sort_keys=True),
                        "params": json.dumps(step.get("params", {}), sort_keys=True),
                    }
                )

    charts = timeline.charts if timeline is not None else ()
    anomaly_rows = _anomaly_rows(audit, explain, spans, logs)
    story = _story(summary, audit, anomaly_rows, spans, timeline, info, evidence)
    model = {
        "run_dir": str(path),
        "run_name": path.name,
        "info": info,
        "summary": summary,
        "audit": audit,
        "anomaly_rows": anomaly_rows,
        "story": story,
        "expectation": _expectation(summary.verdict, info),
        "consumer_view": _consumer_view(audit, timeline),
        "failing": failing,
        "missing": missing,
        "timeline": timeline,
        "charts": charts,
        "figures_json": figures_json(charts),
        "plan_steps": plan_steps,
        "symptom_rows": rows,
        "evidence": evidence,
        "other_checks": other_checks,
        "excerpts": excerpts,
        "log_files": [(p.name, relative_url(p, path)) for p in logs],
        "log_dir": log_dir.name,
        "hints": hints,
        "generic_hints": generic,
        "command": reproduce_command(info, context),
        "replay_command": replay_command(path),
        "rerun_commands": [
            shlex.join(
                [".venv/bin/chaos", "audit", str(path)]
                + (["--guarantee", summary.guarantee] if summary.guarantee else [])
                + [f"--stream={p}={g}" for p, g in (audit.streams if audit is not None else ())]
            ),
            shlex.join([".venv/bin/chaos", "report", str(path)]),
        ],
        "history": history,
        "context": context,
        "plotly_src": relative_url(plotly_path(Path(root) if root is not None else asset_root(path)), path),
        "plotly_version": plotly_version(),
        "stall_min_s": STALL_SHADE_S,
        "generated": format_utc(time.time()),
    }
    html = _environment().get_template("scenario.html.j2").render(**model)
    return html, summary


def _story(
    summary: RunSummary,
    audit: AuditResult | None,
    anomaly_rows: list[dict[str, Any]],
    spans: Sequence[FaultSpan],
    timeline: Timeline | None,
    info: ScenarioInfo | None,
    evidence: Evidence | None,
) -> Story:
    """The story ("What happened", "What to change": :mod:`chaos.report.story`) from the page's facts."""
    from chaos.report.story import StoryFacts, tell

    return tell(
        StoryFacts(
            verdict=summary.verdict,
            guarantee=summary.guarantee,
            audit=audit,
            groups={a["name"]: a["groups"] for a in anomaly_rows if a["status"] == "fails"},
            spans=spans,
            t0=timeline.t0 if timeline is not None else None,
            mono0=timeline.mono0 if timeline is not None else None,
            thresholds=info.thresholds if info is not None else (),
            checks=evidence.checks if evidence is not None else (),
            reasons=summary.reasons,
            remediation=info.remediation if info is not None else (),
        )
    )


def _expectation(verdict: str, info: ScenarioInfo | None) -> dict[str, Any]:
    """Whether the run's verdict is what its variant expects: ``matches`` ``True`` / ``False``, ``None`` when
    the expected verdict is not recorded (a run written before it, or a run without a variant)."""
    variant = info.variant if info is not None else None
    expected = info.expected_verdict if info is not None else None
    return {
        "matches": None if expected is None else verdict == expected,
        "variant": variant,
        "expected": expected,
    }


def _consumer_view(audit: AuditResult | None, timeline: Timeline | None) -> dict[str, Any]:
    """The availability section's consumer side: one row per partition (``topic-partition``, its longest
    stall, its longest handover) and the faults active during the longest stall, and during a service's
    longest input stall."""
    if audit is None:
        return {"rows": [], "longest_while": "", "service_while": ""}
    consumer = audit.facts.availability.consumer
    gaps = {(g.topic, g.partition): g for g in consumer.gaps}
    handovers = {(h.topic, h.partition): h for h in consumer.handovers}
    rows = [(f"{t}-{p}", gaps.get((t, p)), handovers.get((t, p))) for t, p in sorted(gaps.keys() | handovers)]

    def active(gap: ConsumeGap | None) -> str:
        during: tuple[str, ...] = ()
        if gap is not None and timeline is not None:
            from chaos.report.timeline import faults_during

            during = faults_during(timeline.faults, gap.start_mono, gap.end_mono)
        return "during " + ", ".join(during) if during else "no fault active"

    return {
        "rows": rows,
        "longest_while": active(consumer.longest_gap()),
        "service_while": active(consumer.longest_service_gap()),
    }


def _anomaly_rows(
    audit: AuditResult | None, explain: Any, spans: Sequence[FaultSpan], logs: Sequence[Path]
) -> list[dict[str, Any]]:
    """The anomaly table's rows; each failing anomaly's examples paired with what happened around them
    (:func:`chaos.report.attribution.attribute`)."""
    if audit is None:
        return []
    from chaos.report.attribution import attribute, group_examples, partition_events

    events: dict[str, list[Any]] = {}  # a topic's broker lines, read once

    def events_of(topic: str | None) -> list[Any]:
        if topic is None:
            return []
        if topic not in events:
            events[topic] = partition_events(logs, topic)
        return events[topic]

    out = []
    for name, report in audit.facts.anomalies:
        status = "fails" if name in audit.failed_by else ("expected" if report.count else "none")
        around = [
            attribute(e, spans, events_of(e.topic) if status == "fails" else []) for e in report.examples
        ]
        out.append(
            {
                "name": name,
                "count": report.count,
                "status": status,
                "text": explain(name),
                "examples": list(zip(report.examples, around, strict=True)),
                "groups": group_examples(list(zip(report.examples, around, strict=True))),
                "more": report.count - len(report.examples),
                "by_producer": report.by_producer if audit.streams else (),
            }
        )
    return out


def _write(target: Path, text: str) -> int:
    write_atomic(target, text)
    return len(text.encode("utf-8"))


def render_run(
    run_dir: str | os.PathLike[str],
    context: RunContext | None = None,
    root: str | os.PathLike[str] | None = None,
) -> RenderedRun:
    """Write ``<run_dir>/report.html`` (and ``report.json``, the summary the index reads), and plotly.js
    under the report tree's ``root`` if it is not there yet (default root:
    :func:`~chaos.report.assets.asset_root` of the run dir)."""
    started = time.perf_counter()
    path = Path(run_dir)
    tree = Path(root) if root is not None else asset_root(path)
    html, summary = build_page(path, context, tree)
    ensure_plotly(tree)
    size = _write(path / PAGE_NAME, html)
    _write(path / SUMMARY_NAME, json.dumps(summary.to_dict(), indent=2, sort_keys=True) + "\n")
    return RenderedRun(path / PAGE_NAME, summary, size, time.perf_counter() - started)


# ----------------------------------------------------------------------------------------------- index


def _light_summary(run_dir: Path) -> RunSummary:
    """A summary of a run whose page was never rendered, without reading its history."""
    info = audit = None
    missing = ["no report page yet: run `chaos report` on this directory"]
    try:
        info = read_scenario(run_dir)
    except InvalidReportInput as exc:
        missing.append(str(exc))
    try:
        audit = read_audit(run_dir)
    except InvalidReportInput as exc:
        missing.append(str(exc))
    evidence, evidence_error = read_run_evidence(run_dir)
    if evidence_error:
        missing.append(evidence_error)
    verdict = run_verdict(audit, evidence, evidence_error)
    return _summary(run_dir, info, audit, None, None, missing, None, verdict)


def load_summary(run_dir: Path) -> RunSummary:
    """The run's ``report.json`` if its page exists, else a light summary from its JSON inputs."""
    path = run_dir / SUMMARY_NAME
    if path.exists() and (run_dir / PAGE_NAME).exists():
        try:
            return RunSummary.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            pass
    return _light_summary(run_dir)


def gate_banner(root: Path) -> dict[str, Any] | None:
    """What the index's gate banner shows, from ``<root>/gate.json`` (a gate run's output directory);
    ``None`` when there is none."""
    from chaos.gate.report import GateReportError, read_gate
    from chaos.run.layout import GATE_MD_NAME

    try:
        report = read_gate(root)
    except GateReportError as exc:
        return {"css": "unknown", "word": "unreadable", "headline": str(exc), "cases": [], "md": None}
    if report is None:
        return None
    css = {"pass": "pass", "fail": "fail"}.get(report.verdict, "unknown")
    cases = [
        {
            "case": c.case,
            "outcome": c.outcome,
            "message": c.message(),
            "report": c.last.report if c.last else None,
        }
        for c in report.cases
    ]
    md = GATE_MD_NAME if (root / GATE_MD_NAME).exists() else None
    lint = " · ".join(filter(None, (report.lint_line() if report.lint else "", report.cases_line())))
    return {
        "css": css,
        "word": report.verdict,
        "headline": report.headline(),
        "lint": lint,
        "cases": cases,
        "md": md,
    }


def render_index(root: str | os.PathLike[str], runs: Iterable[Path] | None = None) -> Path:
    """Write ``<root>/index.html`` listing every run under ``root`` with its verdict, duration and link."""
    base = Path(root)
    base.mkdir(parents=True, exist_ok=True)
    entries: list[dict[str, Any]] = []
    for run in sorted(runs if runs is not None else find_runs(base)):
        summary = load_summary(run)
        rel = os.path.relpath(run, base)
        link = relative_url(run / PAGE_NAME, base) if summary.page else None
        entries.append({"summary": summary, "rel": rel, "link": link})
    counts = {v: sum(1 for e in entries if e["summary"].verdict == v) for v in ("pass", "fail", "unknown")}
    html = (
        _environment()
        .get_template("index.html.j2")
        .render(
            root=str(base),
            entries=entries,
            counts=counts,
            generated=format_utc(time.time()),
            gate=gate_banner(base),
        )
    )
    target = base / INDEX_NAME
    _write(target, html)
    return target


def render_tree(path: str | os.PathLike[str]) -> tuple[list[RenderedRun], Path | None]:
    """``chaos report PATH``: a run directory gets its page; any other directory gets a page for every run
    under it and an index. The pages share the plotly.js of the report tree ``PATH`` is in
    (:func:`~chaos.report.assets.asset_root`), else of ``PATH``."""
    base = Path(path)
    if not base.is_dir():
        raise ReportError(f"{base} is not a directory")
    root = asset_root(base)
    if is_run_dir(base) and not any(r != base for r in find_runs(base, max_depth=2)):
        return [render_run(base, root=root)], None
    runs = find_runs(base)
    rendered = [render_run(run, root=root) for run in runs]
    return rendered, render_index(base, runs)


def report_after_test(
    run_dir: str | os.PathLike[str], root: str | os.PathLike[str], context: RunContext
) -> tuple[list[RenderedRun], Path | None]:
    """For the pytest plugin, after a test: render every run at or below the test's ``run_dir`` that holds
    a history (sharing the plotly.js of ``root``, the report tree's root), then the index of ``root``.
    Returns nothing to render (``[], None``) for a test that recorded no history."""
    from chaos.history import RunDir

    runs = [r for r in find_runs(run_dir, max_depth=3) if RunDir.of(r).has_history()]
    if not runs:
        return [], None
    rendered = []
    for run in runs:
        try:
            rendered.append(render_run(run, context, root))
        except (ChaosError, OSError) as exc:
            raise ReportError(f"report of {run} failed: {exc}") from exc
    return rendered, render_index(root)
