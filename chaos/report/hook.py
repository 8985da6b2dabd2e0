"""The pytest side of the report: what the plugin's ``pytest_runtest_makereport`` hook calls after a test's
teardown (kept here so the plugin, chaos/plugin/, holds hooks and fixtures only)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

SECTION = "chaos report (teardown)"
"""The report section name; pytest shows teardown sections whose name contains "teardown" with a failure."""


@dataclass(frozen=True)
class TestReports:
    """What one test rendered: terminal-summary lines and the index written (``None``: nothing rendered)."""

    __test__ = False  # not a test class

    lines: tuple[str, ...]
    index: str | None


def after_teardown(
    item: pytest.Item, report: pytest.TestReport, phases: dict[str, pytest.TestReport]
) -> TestReports:
    """Render the pages of the runs under the test's ``run_dir`` (if it holds a history) and the report
    root's index; add the paths to the teardown ``report``'s sections and user properties. Never raises:
    a report must not change a test's result."""
    call = phases.get("call")
    if report.failed or any(r.failed for when, r in phases.items() if when != "call"):
        outcome = "error"
    else:
        outcome = call.outcome if call is not None else "error"
    return _render(item, getattr(item, "funcargs", None) or {}, outcome, report)


def after_interrupt(item: pytest.Item, funcargs: Mapping[str, object]) -> TestReports:
    """Render the interrupted test's pages (Ctrl-C, or SIGTERM from a CI cancel): pytest tears its
    fixtures down at the session's end, where no teardown report — and so no :func:`after_teardown` —
    comes, and after pytest cleared the test's fixture values (``funcargs``: as they were at setup).
    Never raises."""
    return _render(item, funcargs, "interrupted", None)


def _render(
    item: pytest.Item, funcargs: Mapping[str, object], outcome: str, report: pytest.TestReport | None
) -> TestReports:
    from chaos.report.render import RunContext, report_after_test

    run_dir = funcargs.get("run_dir")
    if not isinstance(run_dir, Path):
        return TestReports((), None)
    seed = funcargs.get("chaos_seed", item.config.getoption("--chaos-seed", None))
    context = RunContext(
        nodeid=item.nodeid,
        outcome=outcome,
        seed=seed if isinstance(seed, int) else None,
        profile=item.config.getoption("--chaos-profile", None),
    )
    root = funcargs.get("chaos_report_dir")
    try:
        rendered, index = report_after_test(run_dir, root if isinstance(root, Path) else run_dir, context)
    except Exception as exc:
        text = f"{item.nodeid}: report not rendered: {type(exc).__name__}: {exc}"
        if report is not None:
            report.sections.append((SECTION, text))
        return TestReports((text,), None)
    lines = []
    for page in rendered:
        text = f"{page.summary.verdict}: {page.page}"
        if report is not None:
            report.sections.append((SECTION, text))
            report.user_properties.append(("chaos_report", str(page.page)))
        lines.append(f"{item.nodeid}: {text}")
    return TestReports(tuple(lines), str(index) if index is not None and rendered else None)
