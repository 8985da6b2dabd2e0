"""The resilience gate: its file, lint, cases, thresholds, baseline and outputs (the verdict of a run is
:mod:`chaos.audit.verdict`'s)."""

from chaos.gate.gatefile import (
    ClientSettings,
    ConsumerSide,
    GateFile,
    GateFileError,
    Origin,
    Setting,
    Thresholds,
    load_gate,
    parse_properties,
    resolve_cases,
)
from chaos.gate.lint import RULES, LintResult, Rule, check_clients, derive, lint_gate

__all__ = [
    "RULES",
    "ClientSettings",
    "ConsumerSide",
    "GateFile",
    "GateFileError",
    "LintResult",
    "Origin",
    "Rule",
    "Setting",
    "Thresholds",
    "check_clients",
    "derive",
    "lint_gate",
    "load_gate",
    "parse_properties",
    "resolve_cases",
]
