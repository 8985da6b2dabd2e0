"""Audit a saved run directory and judge it: the facts from :mod:`chaos.audit.run`, the verdict from the
guarantee's policy, both written to ``audit.json``."""

from __future__ import annotations

import os
from collections.abc import Mapping

from chaos.audit.model import DEFAULT_OPTIONS, AuditOptions
from chaos.audit.run import Engine, TopicSource, audit_facts
from chaos.gate.auditfile import write_audit
from chaos.gate.policy import AuditResult, judge


def audit_run(
    run_dir: str | os.PathLike[str],
    *,
    guarantee: str,
    engine: Engine = "spark",
    master: str = "local[*]",
    topic: TopicSource | None = None,
    options: AuditOptions = DEFAULT_OPTIONS,
    write: bool = True,
    streams: Mapping[str, str] | None = None,
) -> AuditResult:
    """Audit one run, judge it against ``guarantee`` — each producer of ``streams`` against its own — and
    (by default) write ``<run_dir>/audit.json``. A history that cannot be read gives verdict ``unknown``,
    never an exception-free pass."""
    facts = audit_facts(run_dir, engine=engine, master=master, topic=topic, options=options)
    result = judge(facts, guarantee, engine, streams)
    if write:
        write_audit(run_dir, result)
    return result
