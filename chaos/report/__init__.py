"""HTML incident reports: one self-contained page per scenario run, and an index per run root.

- :func:`render_run` — ``<run_dir>/report.html`` (+ ``report.json``, the summary the index lists);
- :func:`render_index` — ``<root>/index.html`` over every run directory below ``root``;
- :func:`render_tree` — what ``chaos report PATH`` does; :func:`report_after_test` — what the pytest
  plugin calls after every test whose run directory holds a history;
- :class:`ScenarioInfo` — the format of ``<run_dir>/scenario.json`` (:func:`write_scenario`), re-exported
  from its owner :mod:`chaos.run.manifest`; :func:`read_audit` from :mod:`chaos.audit.auditfile`.

docs/report.md describes the page and its inputs.
"""

from chaos.report.inputs import (
    ExpectedSymptom,
    InvalidReportInput,
    ReportError,
    ScenarioInfo,
    ThresholdResult,
    TopicInfo,
    read_audit,
    read_scenario,
    write_scenario,
)
from chaos.report.render import (
    RenderedRun,
    RunContext,
    RunSummary,
    build_page,
    find_runs,
    render_index,
    render_run,
    render_tree,
    report_after_test,
    reproduce_command,
)

__all__ = [
    "ExpectedSymptom",
    "InvalidReportInput",
    "RenderedRun",
    "ReportError",
    "RunContext",
    "RunSummary",
    "ScenarioInfo",
    "ThresholdResult",
    "TopicInfo",
    "build_page",
    "find_runs",
    "read_audit",
    "read_scenario",
    "render_index",
    "render_run",
    "render_tree",
    "report_after_test",
    "reproduce_command",
    "write_scenario",
]
