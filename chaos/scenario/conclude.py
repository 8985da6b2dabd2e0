"""A closed run's conclusion: audit its history (and, with Spark, its topic), judge it against the variant's
guarantee, record the declared symptoms — ``audit.json`` and ``evidence.json`` written — as a
:class:`~chaos.scenario.result.ScenarioResult`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from chaos.history import read_events
from chaos.run.evidence import EvidenceLog, write_evidence
from chaos.run.manifest import ExpectedSymptom
from chaos.scenario.model import ScenarioError, Variant
from chaos.scenario.result import ScenarioResult
from chaos.workload import DrainSummary, RunContext

if TYPE_CHECKING:
    from chaos.audit.run import Engine


def conclude(
    context: RunContext,
    variant: Variant,
    symptoms: Sequence[ExpectedSymptom],
    drained: Sequence[DrainSummary],
    *,
    engine: Engine,
    spark_master: str,
    strict_symptoms: bool,
) -> ScenarioResult:
    """Audit and judge the run in ``context.run_dir`` (its history closed)."""
    from chaos.audit.run import TopicSource
    from chaos.gate.run import audit_run

    if context.run_dir is None:
        raise ScenarioError("conclude: the run's context has no run_dir to audit")
    run_dir = context.run_dir
    topic = TopicSource(context.bootstrap_servers, (context.topic,)) if engine == "spark" else None
    audit = audit_run(
        run_dir, guarantee=str(variant.guarantee), engine=engine, master=spark_master, topic=topic
    )
    result = ScenarioResult(
        run_dir=run_dir,
        run_id=context.run_id,
        topic=context.topic,
        audit=audit,
        events=tuple(read_events(run_dir)),
        drained=tuple(drained),
        expected_verdict=variant.expected_verdict,
        checks=EvidenceLog(strict_symptoms),
    )
    result.check_declared(symptoms)
    write_evidence(run_dir, result.evidence)
    return result
