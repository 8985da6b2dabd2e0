"""What a report reads from a run directory besides the history: ``scenario.json`` and ``audit.json``.

Each file has one owner, re-exported here for the report: ``scenario.json`` is the run's manifest
(:mod:`chaos.run.manifest`, :class:`ScenarioInfo`); ``audit.json`` is the gate's
(:mod:`chaos.audit.auditfile`, :func:`read_audit` rebuilds the :class:`~chaos.audit.verdict.AuditResult`).
"""

from __future__ import annotations

from chaos.audit.auditfile import read_audit
from chaos.errors import ChaosError
from chaos.run.files import RunFileError
from chaos.run.layout import AUDIT_NAME, SCENARIO_NAME
from chaos.run.manifest import (
    OUTCOMES,
    SCENARIO_FORMAT,
    SYMPTOM_KINDS,
    ExpectedSymptom,
    Scalar,
    ScenarioInfo,
    Settings,
    SymptomKind,
    ThresholdResult,
    TopicInfo,
    read_scenario,
    scenario_path,
    write_scenario,
)

__all__ = [
    "AUDIT_NAME",
    "OUTCOMES",
    "SCENARIO_FORMAT",
    "SCENARIO_NAME",
    "SYMPTOM_KINDS",
    "ExpectedSymptom",
    "InvalidReportInput",
    "ReportError",
    "Scalar",
    "ScenarioInfo",
    "Settings",
    "SymptomKind",
    "ThresholdResult",
    "TopicInfo",
    "read_audit",
    "read_scenario",
    "scenario_path",
    "write_scenario",
]


class ReportError(ChaosError):
    """A report could not be rendered (e.g. the run directory does not exist)."""


InvalidReportInput = RunFileError
"""``scenario.json`` or ``audit.json`` is malformed; the message names the field and the fix. The error of
the files' owners, under the name the report catches."""
