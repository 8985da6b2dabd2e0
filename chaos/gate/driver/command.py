"""``chaos gate GATE_FILE``: the lint first, before any container starts; then (unless ``--check-only``)
pytest in-process over the catalog with ``--chaos-gate``, whose ``gate.json`` gives the exit code."""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from chaos.cluster.engine import docker_client
from chaos.gate.baseline import describe_rule
from chaos.gate.cases import plan_cases
from chaos.gate.gatefile import NOT_SET_SOURCE, load_gate
from chaos.gate.lint import Finding, lint_gate
from chaos.gate.report import read_gate, read_gate_file
from chaos.paths import reports_dir
from chaos.progress import say
from chaos.scenario import discover, scenarios_dir


@dataclass(frozen=True)
class GateOptions:
    """``chaos gate``'s arguments (see ``chaos gate --help``)."""

    gate_file: str
    out: str | None = None
    junit: str | None = None
    calibrate: bool = False
    allow_flaky: bool = False
    seed: int | None = None
    baseline: str | None = None
    cases: tuple[str, ...] | None = None
    lint_advisory: bool = False


def run_gate(options: GateOptions) -> int:
    """The full run: pytest in-process over the catalog with ``--chaos-gate``; the exit code is gate.json's
    (2 when the run wrote none: it broke before the gate could judge)."""
    docker_client()  # no engine: exit 2 with the fix now, not one error per case
    catalog = scenarios_dir()
    target = Path(options.out).expanduser().absolute() if options.out else reports_dir() / "gate"
    args = [
        str(catalog),
        "-m",
        "chaos",
        "--rootdir",
        str(catalog.parent),
        "-o",
        f"cache_dir={Path.cwd() / '.pytest_cache'}",
        "--chaos-report-dir",
        str(target),
        "--chaos-gate",
        str(Path(options.gate_file).absolute()),
    ]
    if options.junit:
        args += ["--chaos-gate-junit", str(Path(options.junit).expanduser().absolute())]
    if options.calibrate:
        args.append("--chaos-calibrate")
    if options.allow_flaky:
        args.append("--chaos-gate-allow-flaky")
    if options.seed is not None:
        args += ["--chaos-seed", str(options.seed)]
    if options.baseline:
        args += ["--chaos-gate-baseline", str(Path(options.baseline).expanduser().absolute())]
    if options.cases is not None:
        args += ["--chaos-gate-cases", ",".join(options.cases)]
    if options.lint_advisory:
        args.append("--chaos-gate-lint-advisory")
    started = time.time()
    say(f"pytest {shlex.join(args)}", "dim")
    status = int(pytest.main(args))
    report = read_gate(target)
    if report is None or (report.started_ts or 0) < started - 1:
        say(
            f"error: the gate wrote no result in {target} (pytest exit {status}): harness error, exit 2",
            "red",
        )
        return 2
    say(report.headline(), {0: "green", 1: "red"}.get(report.exit_code, "yellow"))
    say(f"{target / 'gate.md'} · {target / 'gate.json'} · {target / 'index.html'}")
    return report.exit_code


def check_gate(options: GateOptions, *, full: bool = False) -> int:
    """The lint (``--check-only``, and the full run's first step): load, lint, print; the lint's exit code.
    The full run also reads the baseline now (bad input: before any container starts)."""
    started = time.monotonic()
    gate_file, baseline = options.gate_file, options.baseline
    gate = load_gate(gate_file)
    old = read_gate_file(baseline) if baseline and full else None
    check, result = lint_gate(gate)
    plan = plan_cases(gate, [s.case_id for s in discover()], result, options.cases)
    advisory = options.lint_advisory or gate.lint_advisory
    step = "the lint first, before any container starts" if full else "lint only: no container started"
    say(f"gate {gate_file}: claims {gate.guarantee} ({step})", "bold")
    counts = f"the producer's {len(gate.producer.settings)}"
    if gate.consumer:
        counts += f" and the consumer's {len(gate.consumer.settings.settings)}"
    say(f"librdkafka {check.librdkafka} accepted {counts} settings ({check.seconds:.2f} s)")
    for note in check.notes:
        say(f"  note: {note}", "dim")
    if gate.service is not None:
        say(f"the team's service: {gate.service.describe()}")
        say(
            "  its own clients' settings are inside it: the lint judges the topic's, the service cases judge "
            "how it produces and commits",
            "dim",
        )

    def show(finding: Finding, mark: str) -> None:
        rule = finding.rule
        breaks = ", ".join(rule.breaks) or "no guarantee"
        say(f"  {mark} {rule.id}: {rule.title} ({rule.effect}; breaks {breaks})")
        for setting in finding.settings:
            where = (
                "not set"
                if setting.origin.source == NOT_SET_SOURCE
                else f"{setting.shown}  ({setting.origin})"
            )
            say(f"      {setting.key}: {where}" if where == "not set" else f"      {where}")
        say(f"      why: {rule.why}")
        say(f"      shown by: {', '.join(rule.cases)}")
        say(f"      fix: {rule.fix}")

    strongest = result.strongest or "none"
    if result.kept:
        say(f"KEPT: {gate.guarantee}. The strongest guarantee these settings keep: {strongest}", "green")
    else:
        say(f"NOT KEPT: {gate.guarantee}. The strongest guarantee these settings keep: {strongest}", "red")
        for finding in result.violations:
            show(finding, "x")
    if result.others:
        say(f"Also found (does not break {gate.guarantee}):")
        for finding in result.others:
            show(finding, "!")
    verb = "runs" if full else "would run"
    say(
        f"Cases the full gate {verb} ({plan.describe()}; time profile {gate.time_profile}): "
        f"{', '.join(plan.run) or 'none'}"
    )
    if plan.not_run:
        say(f"Named by the lint, not run: {plan.not_run_text()}", "yellow")
    if old is not None:
        say(
            f"Against the baseline {baseline} ({len(old.cases)} case(s), {old.verdict}): a measure regresses "
            f"when {describe_rule(gate.baseline)} than there"
        )
    if (options.out or options.junit or baseline or options.lint_advisory) and not full:
        say(
            "note: --out, --junit, --baseline and --lint-advisory are used by the full gate run only; "
            "--check-only wrote nothing",
            "dim",
        )
    say(f"lint took {time.monotonic() - started:.2f} s", "dim")
    if result.kept:
        return 0
    if full:
        if advisory:
            say(
                f"the lint says {gate.guarantee} is not kept (above); advisory (--lint-advisory): the cases "
                "run and alone decide the gate",
                "yellow",
            )
        else:
            say(
                f"the lint says {gate.guarantee} is not kept (above): the gate fails (exit 1) whatever the "
                "cases show; they run to show what happens (--lint-advisory: the cases alone decide)",
                "yellow",
            )
        return 1
    keys = sorted({s.key for f in result.violations for s in f.settings if s.origin.source != NOT_SET_SOURCE})
    shown = sorted({c for f in result.violations for c in f.rule.cases})
    instead = f", or claim {result.strongest}" if result.strongest else " (no guarantee is kept)"
    say(
        f"exit 1: {gate.guarantee} is not kept (keys: {', '.join(keys)}; cases: {', '.join(shown)}); change "
        f"those settings{instead}",
        "red",
    )
    return 1
