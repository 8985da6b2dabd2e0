"""Regressions between releases (``--baseline OLD_GATE_JSON``): each case's measures compared with a
previous gate run's.

The measures (:data:`MEASURES`) are the timing thresholds' values, recorded in ``gate.json`` whether a
threshold judges them or not (:func:`observe`). A measure **regresses** when the new value is worse than
the old one by more than ``tolerance`` (a fraction of the old value) **and** by more than
``min_change_s`` (ms measures: x 1000), the gate file's ``[baseline]``
(:class:`~chaos.gate.gatefile.Baseline`): the new value may be at most
``max(old * (1 + tolerance), old + min_change)``. A measure one of the runs does not show, a case one of
them did not run, a case replayed on another timeline, or runs of different time profiles are **not
compared**, with the reason: never a regression, never a silent pass.

Pure: :func:`compare` works on per-case :class:`CaseMeasures`; reading the old ``gate.json`` and
attaching the result to the gate's report is :mod:`chaos.gate.report`'s (its one owner).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from chaos.audit.facts import AuditFacts
from chaos.gate.gatefile import Baseline, Thresholds
from chaos.gate.thresholds import UNITS, _num, measure
from chaos.history import Event

MEASURES: Final[tuple[str, ...]] = (
    "longest_outage_s",
    "p99_ack_latency_ms",
    "heal_to_first_ack_s",
    "heal_to_first_delivery_s",
    "max_consume_gap_s",
    "p99_e2e_latency_ms",
    "max_handover_s",
)
"""What a baseline compares: the longest produce outage, the p99 ack latency during the fault, the times
from heal to the first ack and to the first delivery; on the consumer side the group's longest stall, the
p99 end-to-end latency and the longest partition handover."""
_EVERY: Final = Thresholds(
    longest_outage_s=math.inf,
    p99_ack_latency_ms=math.inf,
    heal_to_first_ack_s=math.inf,
    heal_to_first_delivery_s=math.inf,
    max_consume_gap_s=math.inf,
    p99_e2e_latency_ms=math.inf,
    max_handover_s=math.inf,
)
"""Limits no value exceeds: :func:`~chaos.gate.thresholds.measure` with them observes every measure."""
NOT_APPLICABLE: Final = "does not apply: "


def _value(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    return f"{_num(value)} {unit}" if unit else _num(value)


@dataclass(frozen=True)
class Measure:
    """One measure of one run, judged by a threshold or not (``gate.json``'s ``measures``).

    ``observed`` ``None``: the run does not show it; ``note`` says why (it does not apply to the case, or
    the run did not measure it). ``window``: the fault window the (worst) value comes from."""

    name: str
    observed: float | None
    window: str | None = None
    note: str = ""

    @property
    def unit(self) -> str:
        return UNITS[self.name]

    def to_dict(self) -> dict[str, Any]:
        return {"observed": self.observed, "unit": self.unit, "window": self.window, "note": self.note}

    @classmethod
    def from_dict(cls, name: str, data: Mapping[str, Any]) -> Measure:
        observed = data.get("observed")
        return cls(
            name,
            None if observed is None else float(observed),
            data.get("window"),
            str(data.get("note", "")),
        )


def observe(facts: AuditFacts, events: Iterable[Event]) -> tuple[Measure, ...]:
    """Every measure of one run (in :data:`MEASURES` order), as the thresholds measure them."""
    measured = measure(_EVERY, facts, events)
    found = {
        m.name: Measure(m.name, m.observed, m.window, "" if m.measured else m.note)
        for m in measured.measurements
    }
    for entry in measured.not_applicable:
        name, _, why = entry.partition(": ")
        found[name] = Measure(name, None, None, NOT_APPLICABLE + why)
    return tuple(found[name] for name in MEASURES if name in found)


@dataclass(frozen=True)
class CaseMeasures:
    """What a baseline compares of one case in one gate run: the timeline it replayed and its measures
    (those of its last attempt)."""

    timeline: str
    measures: tuple[Measure, ...]

    def get(self, name: str) -> Measure | None:
        return next((m for m in self.measures if m.name == name), None)


@dataclass(frozen=True)
class MeasureComparison:
    """One measure of one case against the baseline. ``limit``: the most the new value may be;
    ``note``: why it is not compared (``old`` or ``new`` missing)."""

    name: str
    old: float | None
    new: float | None
    limit: float | None
    regressed: bool
    note: str = ""

    @property
    def unit(self) -> str:
        return UNITS[self.name]

    @property
    def compared(self) -> bool:
        return self.limit is not None

    def describe(self) -> str:
        """``p99_ack_latency_ms 5200 ms > 3000 ms allowed (baseline 2400 ms)`` — for messages."""
        if not self.compared:
            return f"{self.name} not compared: {self.note}"
        sign = ">" if self.regressed else "<="
        return (
            f"{self.name} {_value(self.new, self.unit)} {sign} {_value(self.limit, self.unit)} allowed "
            f"(baseline {_value(self.old, self.unit)})"
        )

    def cells(self) -> tuple[str, str, str]:
        """Old, new and allowed as table cells."""
        return _value(self.old, self.unit), _value(self.new, self.unit), _value(self.limit, self.unit)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "unit": self.unit,
            "old": self.old,
            "new": self.new,
            "limit": self.limit,
            "regressed": self.regressed,
            "compared": self.compared,
            "note": self.note,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MeasureComparison:
        return cls(
            str(data["name"]),
            data.get("old"),
            data.get("new"),
            data.get("limit"),
            bool(data.get("regressed", False)),
            str(data.get("note", "")),
        )


@dataclass(frozen=True)
class CaseComparison:
    """One case against the baseline: each measure, or (``measures`` empty) why the case is not compared
    at all (``note``: run in one of the gates only, another timeline, another time profile)."""

    case: str
    measures: tuple[MeasureComparison, ...] = ()
    note: str = ""

    @property
    def regressions(self) -> tuple[MeasureComparison, ...]:
        return tuple(m for m in self.measures if m.regressed)

    @property
    def regressed(self) -> bool:
        return bool(self.regressions)

    def to_dict(self) -> dict[str, Any]:
        return {
            "case": self.case,
            "regressed": self.regressed,
            "measures": [m.to_dict() for m in self.measures],
            "note": self.note,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CaseComparison:
        return cls(
            str(data["case"]),
            tuple(MeasureComparison.from_dict(m) for m in data.get("measures", ())),
            str(data.get("note", "")),
        )


@dataclass(frozen=True)
class BaselineComparison:
    """A gate run against a previous one: where the baseline came from, the rule, and every case of
    either run (those of the new run first, in its order; then those only the baseline ran)."""

    source: str
    tolerance: float
    min_change_s: float
    cases: tuple[CaseComparison, ...]

    @property
    def regressed(self) -> tuple[str, ...]:
        """The cases with a regression."""
        return tuple(c.case for c in self.cases if c.regressed)

    def case(self, name: str) -> CaseComparison | None:
        return next((c for c in self.cases if c.case == name), None)

    def rule(self) -> str:
        return describe_rule(Baseline(self.tolerance, self.min_change_s))

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.source,
            "tolerance": self.tolerance,
            "min_change_s": self.min_change_s,
            "regressed": list(self.regressed),
            "cases": [c.to_dict() for c in self.cases],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BaselineComparison:
        return cls(
            str(data["file"]),
            float(data["tolerance"]),
            float(data["min_change_s"]),
            tuple(CaseComparison.from_dict(c) for c in data.get("cases", ())),
        )


def describe_rule(rule: Baseline) -> str:
    """``worse by more than 25% and by more than 1 s (ms measures: 1000 ms)``."""
    return (
        f"worse by more than {rule.tolerance:.0%} and by more than {_num(rule.min_change_s)} s "
        f"(ms measures: {_num(rule.min_change_s * 1000)} ms)"
    )


def _missing(measure: Measure | None) -> str | None:
    """Why a run has no value for a measure, or ``None`` when it has one."""
    if measure is not None and measure.observed is not None:
        return None
    return measure.note if measure is not None and measure.note else "no value recorded"


def compare_measure(name: str, old: Measure | None, new: Measure | None, rule: Baseline) -> MeasureComparison:
    """One measure against its old value (see the module docstring for the rule)."""
    before = old.observed if old is not None else None
    after = new.observed if new is not None else None
    if before is None or after is None:
        then, now = _missing(old), _missing(new)
        if then is not None and then == now:
            note = f"neither run: {then}"
        else:
            reasons = (("the baseline", then), ("this run", now))
            note = "; ".join(f"{run}: {why}" for run, why in reasons if why)
        return MeasureComparison(name, before, after, None, False, note)
    scale = 1000.0 if UNITS[name] == "ms" else 1.0
    limit = max(before * (1 + rule.tolerance), before + rule.min_change_s * scale)
    return MeasureComparison(name, before, after, limit, after > limit)


def compare(
    old: Mapping[str, CaseMeasures],
    new: Mapping[str, CaseMeasures],
    rule: Baseline,
    *,
    source: str,
    old_profile: str,
    new_profile: str,
) -> BaselineComparison:
    """Each case of ``new`` against the same case of ``old`` (both: case id -> measures)."""
    cases: list[CaseComparison] = []
    for case, now in new.items():
        then = old.get(case)
        if then is None:
            cases.append(CaseComparison(case, note="not in the baseline: nothing to compare"))
        elif old_profile != new_profile:
            note = f"the baseline ran time profile {old_profile}, this run {new_profile}: not comparable"
            cases.append(CaseComparison(case, note=note))
        elif then.timeline != now.timeline:
            note = (
                f"the baseline replayed the {then.timeline} timeline, this run {now.timeline}: not comparable"
            )
            cases.append(CaseComparison(case, note=note))
        else:
            compared = tuple(compare_measure(n, then.get(n), now.get(n), rule) for n in MEASURES)
            cases.append(CaseComparison(case, compared))
    cases += [
        CaseComparison(case, note="in the baseline only: not run in this gate")
        for case in old
        if case not in new
    ]
    return BaselineComparison(source, rule.tolerance, rule.min_change_s, tuple(cases))


def regression_lines(comparison: CaseComparison | None) -> Sequence[str]:
    """A case's regressions as problem lines (for gate.md's *Why*, JUnit and the index)."""
    if comparison is None:
        return ()
    return [f"regressed against the baseline: {m.describe()}" for m in comparison.regressions]
