"""What a finished scenario run established (:class:`ScenarioResult`): the audit, the history and the
evidence, and the one verdict check every scenario ends with (:meth:`ScenarioResult.judge`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from chaos.history import ClientLog, Event
from chaos.run.evidence import Evidence, EvidenceLog, write_evidence
from chaos.run.manifest import ExpectedSymptom
from chaos.scenario.model import ScenarioError
from chaos.workload import DrainSummary
from chaos.workload.common import CLIENT_FATAL

if TYPE_CHECKING:
    from chaos.audit.verdict import AuditResult


@dataclass(frozen=True)
class ScenarioResult:
    """What a finished run established: the audit result and the history (typed events, record order),
    plus the run's evidence — the symptoms and preconditions checked with :meth:`symptom` and
    :meth:`precondition` (``evidence.json``).

    :attr:`verdict` is the audit's, or ``unknown`` when a precondition of the case did not hold.
    """

    run_dir: Path
    run_id: str
    topic: str
    audit: AuditResult
    events: tuple[Event, ...]
    drained: tuple[DrainSummary, ...]
    expected_verdict: str | None = None
    checks: EvidenceLog = field(default_factory=EvidenceLog)
    audit_s: float | None = None
    """Wall seconds the audit took."""

    @property
    def verdict(self) -> str:
        return self.evidence.verdict(self.audit.verdict)

    @property
    def evidence(self) -> Evidence:
        return self.checks.snapshot()

    def symptom(self, description: str, observed: bool, detail: object = "") -> bool:
        """Record a symptom the case shows (a client log line, an error code, a timer's value) as observed
        or not. Evidence, not verdict: a missing symptom fails the test only in strict mode
        (``--chaos-strict-symptoms``). Returns ``observed``."""
        seen = self.checks.add("symptom", description, observed, detail)
        write_evidence(self.run_dir, self.evidence)
        return seen

    def precondition(self, description: str, held: bool, detail: object = "") -> bool:
        """Record something the case needs to have happened (the fault landed, the member left). If it did
        not, the run is inconclusive: :attr:`verdict` becomes ``unknown`` with this as the reason."""
        ok = self.checks.add("precondition", description, held, detail)
        write_evidence(self.run_dir, self.evidence)
        return ok

    def judge(self) -> None:
        """The verdict check every scenario ends with: the verdict (audit vs guarantee, preconditions) must
        be the variant's ``expected_verdict``; in strict mode every symptom must have been observed.
        Raises AssertionError with the summary otherwise."""
        evidence = self.evidence
        write_evidence(self.run_dir, evidence)
        if self.expected_verdict is not None and self.verdict != self.expected_verdict:
            reasons = "; ".join(evidence.reasons())
            raise AssertionError(
                f"verdict {self.verdict}, expected {self.expected_verdict}"
                + (f" — {reasons}" if reasons else "")
                + f"\n{self.summary()}"
            )
        missing = evidence.missing_symptoms()
        if evidence.strict and missing:
            raise AssertionError(
                "strict symptoms: not observed: "
                + "; ".join(f"{c.description} ({c.detail})" if c.detail else c.description for c in missing)
            )

    def count(self, anomaly: str) -> int:
        """The audit's instance count of one anomaly (``lost_acked``, ``duplicate_delivery_…``)."""
        counts = self.audit.facts.counts()
        if anomaly not in counts:
            raise ScenarioError(f"no anomaly {anomaly!r}; the audit reports {', '.join(counts)}")
        return counts[anomaly]

    def summary(self) -> str:
        """One line for the test output: verdict, non-zero anomalies, totals."""
        nonzero = {k: v for k, v in self.audit.facts.counts().items() if v}
        evidence = self.evidence
        seen = sum(c.observed for c in evidence.symptoms)
        return (
            f"{self.run_id}: verdict {self.verdict} ({self.audit.guarantee}, {self.audit.engine}); "
            f"anomalies {nonzero or 'none'}; totals {self.audit.facts.totals}; "
            f"problems {list(self.audit.facts.problems)}; "
            f"symptoms observed {seen}/{len(evidence.symptoms)}"
            + (f"; inconclusive: {'; '.join(evidence.reasons())}" if evidence.unmet_preconditions() else "")
        )

    def record_client_failures(self) -> None:
        """Record each client's fatal error the history shows (the worker closed the instance and, within
        its bound, started a new one: :func:`chaos.workload.producer.produce_paced`) as an observed symptom:
        evidence the report shows, never the verdict — the audit judges what the records show."""
        for event in self.events:
            if isinstance(event, ClientLog) and event.fatal and event.facility == CLIENT_FATAL:
                self.symptom(
                    f"{event.process}'s client failed fatally ({event.error})", True, event.message[:500]
                )

    def check_declared(self, symptoms: Sequence[ExpectedSymptom]) -> None:
        """Record each declared ``error_code`` / ``client_log`` symptom as observed or not in the history
        (``broker_log`` ones are matched by the report, in the run's broker logs)."""
        for symptom in symptoms:
            if symptom.kind == "broker_log":
                continue
            hits = [e for e in self.events if _shows(e, symptom)]
            self.symptom(
                symptom.check_description,
                bool(hits),
                f"{len(hits)} events, first from {hits[0].process}" if hits else "not in the history",
            )


def _shows(event: Event, symptom: ExpectedSymptom) -> bool:
    """Whether a history event shows an ``error_code`` or ``client_log`` symptom."""
    if symptom.kind == "error_code":
        error = getattr(event, "error", None)
        return isinstance(error, str) and symptom.matches(error)
    return isinstance(event, ClientLog) and symptom.matches(event.message or "")
