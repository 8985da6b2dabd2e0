"""Every file of a run directory, of a report tree and of a gate's output, by name — and the one module that
reads and writes each (its format's owner). Code that needs a file's name takes it from here.

A run directory (``<report dir>/tests/<test>/<run id>/``, or what ``chaos run`` writes)::

    scenario.json   what ran: scenario, variant, settings asked and effective  chaos.run.manifest
    plan.json       the fault plan it ran (random runs; --chaos-plan replays)  chaos.faults.plan
    history/        the recorded events: events-*.jsonl, events.parquet        chaos.history.segments
    evidence.json   the symptoms and preconditions, observed or not            chaos.run.evidence
    audit.json      the audit's facts and the verdict                          chaos.audit.auditfile
    logs/           broker logs (*.log.gz), a service's (service-<i>.log)      chaos.cluster, chaos.service
    report.html     the incident report; report.json, its summary              chaos.report.render

A report tree (``--chaos-report-dir``): ``index.html`` and ``assets/`` (one plotly.js), by
:mod:`chaos.report.render` and :mod:`chaos.report.assets`. A gate's output directory: ``gate.json``,
``gate.md`` and ``junit.xml``, by :mod:`chaos.gate.report`.
"""

from __future__ import annotations

from typing import Final

SCENARIO_NAME: Final = "scenario.json"
PLAN_NAME: Final = "plan.json"
HISTORY_DIR: Final = "history"
PARQUET_NAME: Final = "events.parquet"
SEGMENT_PREFIX: Final = "events-"
SEGMENT_SUFFIX: Final = ".jsonl"
LOCK_NAME: Final = ".writer.lock"
EVIDENCE_NAME: Final = "evidence.json"
AUDIT_NAME: Final = "audit.json"
LOGS_DIR: Final = "logs"
PAGE_NAME: Final = "report.html"
SUMMARY_NAME: Final = "report.json"

INDEX_NAME: Final = "index.html"
ASSETS_DIR: Final = "assets"

GATE_NAME: Final = "gate.json"
GATE_MD_NAME: Final = "gate.md"
JUNIT_NAME: Final = "junit.xml"
