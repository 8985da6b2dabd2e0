"""The verdict policy: which anomalies break the guarantee a client profile claims.

Verdict ``unknown`` whenever the facts could not be established (any ``AuditFacts.problems``); otherwise
``fail`` if any anomaly that the guarantee forbids was found, else ``pass``. There is no default pass: an
unknown guarantee is an error, and missing facts are ``unknown``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from chaos.audit.facts import (
    ANOMALIES,
    JEPSEN_ORDER_CHECKS,
    AnomalyReport,
    AuditFacts,
    Availability,
    Consumption,
    Example,
    FaultWindow,
    LatencyStats,
    PartitionRange,
    Removal,
    Totals,
)
from chaos.errors import AuditError
from chaos.run.terms import GUARANTEES, VERDICTS, Guarantee, Verdict

_ALWAYS: Final = frozenset({"inconsistent_offsets", "unexpected", "aborted_read", "reordered"})
_LOSS: Final = frozenset({"lost_acked", "unseen_by_group", "expired_unread", "poll_skip"})
FATAL: Final[dict[str, frozenset[str]]] = {
    # loss is the accepted price of at-most-once; duplicates are not
    "at_most_once": _ALWAYS | {"duplicate_in_log", "duplicate_delivery_other"},
    # duplicates are the accepted price of at-least-once; loss (a consumer skipping records too) is not
    "at_least_once": _ALWAYS | _LOSS,
    # idempotence: no loss, no duplicate in the log, a producer's acks in order per partition; the group
    # may still redeliver after a rebalance
    "idempotent": _ALWAYS | _LOSS | {"duplicate_in_log", "duplicate_delivery_other", "nonmonotonic_send"},
    # exactly-once forbids every anomaly (a consumer going back, a read before the commit included)
    "exactly_once": frozenset(ANOMALIES) - {"lost_indeterminate"},
}
"""Guarantee -> anomalies that fail the verdict. Every other anomaly is reported as expected.
``lost_indeterminate`` never fails: an unknown outcome is not proof of loss (docs/audit.md)."""


class UnknownGuarantee(AuditError, ValueError):
    """The claimed guarantee is not one the policy knows."""


@dataclass(frozen=True, slots=True)
class AuditResult:
    """The audit of one run: the established facts, the guarantee judged against and the verdict."""

    facts: AuditFacts
    guarantee: Guarantee
    engine: str
    verdict: Verdict
    failed_by: tuple[str, ...]
    expected: tuple[str, ...]
    streams: tuple[tuple[str, Guarantee], ...] = ()
    """Producers whose values were judged by a guarantee of their own (sorted); the others by
    ``guarantee``."""

    def __post_init__(self) -> None:
        for claimed in (self.guarantee, *(g for _, g in self.streams)):
            if claimed not in GUARANTEES:
                raise UnknownGuarantee(f"guarantee: expected one of {', '.join(GUARANTEES)}; got {claimed!r}")
        if self.verdict not in VERDICTS:
            raise AuditError(
                f"AuditResult.verdict: expected one of {', '.join(VERDICTS)}; got {self.verdict!r}"
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.facts.run_id,
            "verdict": self.verdict,
            "guarantee": self.guarantee,
            "engine": self.engine,
            "failed_by": list(self.failed_by),
            "expected": list(self.expected),
            "streams": dict(self.streams),
            "facts": self.facts.to_dict(),
        }

    def to_json(self) -> str:
        """Stable JSON: keys in a fixed order (sorted), two-space indent, trailing newline."""
        return json.dumps(self.to_dict(), sort_keys=True, indent=2, allow_nan=False) + "\n"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AuditResult:
        """Inverse of :meth:`to_dict`. A missing key raises ``KeyError``, a bad value ``TypeError`` or a
        :class:`~chaos.errors.ChaosError` (the caller names the file)."""
        return cls(
            _facts_from_dict(data["facts"], str(data.get("run_id", ""))),
            data["guarantee"],
            str(data.get("engine", "")),
            data["verdict"],
            tuple(data.get("failed_by", ())),
            tuple(data.get("expected", ())),
            tuple(sorted(data.get("streams", {}).items())),
        )


def _facts_from_dict(facts: Mapping[str, Any], run_id: str) -> AuditFacts:
    """Inverse of :meth:`AuditFacts.to_dict`. The consumer side (``availability.consumer``, each window's
    ``e2e_*``) may be absent — an ``audit.json`` written before it was measured — and then reads as empty;
    so may Jepsen's order checks (:data:`~chaos.audit.facts.JEPSEN_ORDER_CHECKS`), which then read as not
    found. Any other anomaly missing is an error."""

    def stats(d: Mapping[str, Any]) -> LatencyStats:
        return LatencyStats(int(d["count"]), d.get("p50_ms"), d.get("p99_ms"))

    def report(name: str) -> AnomalyReport:
        found = facts["anomalies"].get(name)
        if found is None and name in JEPSEN_ORDER_CHECKS:
            return AnomalyReport(0)
        if found is None:
            raise KeyError(name)
        return AnomalyReport(
            int(found["count"]),
            tuple(Example(**e) for e in found.get("examples", ())),
            tuple(sorted((str(p), int(n)) for p, n in found.get("by_producer", {}).items())),
            tuple(PartitionRange(**r) for r in found.get("ranges", ())),  # absent: an older audit.json
        )

    anomalies = tuple((name, report(name)) for name in ANOMALIES)
    av = facts["availability"]
    windows = tuple(
        FaultWindow(
            w["fault"],
            w["target"],
            float(w["inject_mono"]),
            w.get("heal_mono"),
            stats(w["before"]),
            stats(w["during"]),
            stats(w["after"]),
            w.get("heal_to_first_ack_s"),
            w.get("heal_to_first_delivery_s"),
            LatencyStats.from_dict(w.get("e2e_before")),
            LatencyStats.from_dict(w.get("e2e_during")),
            LatencyStats.from_dict(w.get("e2e_after")),
        )
        for w in av.get("windows", ())
    )
    availability = Availability(
        av.get("longest_outage_s"),
        av.get("outage_start_mono"),
        av.get("outage_end_mono"),
        windows,
        Consumption.from_dict(av.get("consumer")),
    )
    return AuditFacts(
        str(facts.get("run_id", run_id)),
        anomalies,
        availability,
        Totals(**facts["totals"]),
        tuple(facts.get("problems", ())),
        tuple(Removal.from_dict(r) for r in facts.get("removals", ())),
    )


def judge(
    facts: AuditFacts, guarantee: str, engine: str, streams: Mapping[str, str] | None = None
) -> AuditResult:
    """Apply the policy of ``guarantee`` to ``facts``. ``streams``: producer -> the guarantee its client
    claims, for producers whose values are judged by their own: an anomaly's instances on such a
    producer's values (:attr:`~chaos.audit.facts.AnomalyReport.by_producer`) fail the verdict when that
    guarantee forbids the anomaly, the rest when ``guarantee`` does."""
    streams = dict(streams or {})
    for claimed in (guarantee, *streams.values()):
        if claimed not in GUARANTEES:
            raise UnknownGuarantee(f"guarantee: expected one of {', '.join(GUARANTEES)}; got {claimed!r}")
    failed: list[str] = []
    seen: list[str] = []
    for name, report in facts.anomalies:
        if not report.count:
            continue
        seen.append(name)
        own = {p: n for p, n in report.by_producer if p in streams}
        rest = report.count - sum(own.values())
        if any(name in FATAL[streams[p]] for p in own) or (rest > 0 and name in FATAL[guarantee]):
            failed.append(name)
    expected = tuple(name for name in seen if name not in failed)
    verdict: Verdict = "unknown" if facts.problems else ("fail" if failed else "pass")
    return AuditResult(
        facts,
        guarantee,  # type: ignore[arg-type]
        engine,
        verdict,
        tuple(failed),
        expected,
        tuple(sorted(streams.items())),  # type: ignore[arg-type]
    )
