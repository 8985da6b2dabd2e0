"""The page's story for the person who was paged: "What happened" in at most five sentences, written from the
run's facts (the audit's anomalies and examples, the example groups :mod:`chaos.report.attribution` built
with their fault windows and broker events, the availability figures, the evidence), and "What to change".

Nothing here judges the run: the verdict is given (:func:`chaos.report.render.run_verdict`); this module only
says it in words. Every number and partition a sentence names comes from the facts it is given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

from chaos.audit.facts import partition_ranges
from chaos.report.attribution import ExampleGroup, describe_event, partition_name
from chaos.report.explain import ANOMALY_HINTS, ANOMALY_TIME, GUARANTEE_PROMISE, noun

if TYPE_CHECKING:
    from chaos.audit.facts import AuditFacts, PartitionRange
    from chaos.audit.verdict import AuditResult
    from chaos.report.timeline import FaultSpan
    from chaos.run.evidence import Check
    from chaos.run.manifest import ThresholdResult

MAX_PARTITIONS: Final = 3
"""Partitions named one by one in the "where" sentence; the rest are counted."""
MAX_EVENTS: Final = 4
"""Broker events named in the story (the example groups show every attributed line)."""


@dataclass(frozen=True)
class StoryFacts:
    """What the story is written from. ``groups``: each failing anomaly's examples grouped by context
    (:func:`chaos.report.attribution.group_examples`); ``t0`` / ``mono0``: the run's first event (times
    are said as ``t+12.3 s`` from it; UTC without it)."""

    verdict: str
    guarantee: str | None = None
    audit: AuditResult | None = None
    groups: Mapping[str, Sequence[ExampleGroup]] = field(default_factory=dict)
    spans: Sequence[FaultSpan] = ()
    t0: float | None = None
    mono0: float | None = None
    thresholds: Sequence[ThresholdResult] = ()
    checks: Sequence[Check] = ()
    reasons: Sequence[str] = ()
    remediation: Sequence[str] = ()


@dataclass(frozen=True)
class Story:
    """``what_happened``: at most five sentences; ``what_to_change``: one line per remediation."""

    what_happened: tuple[str, ...]
    what_to_change: tuple[str, ...]


# ------------------------------------------------------------------------------------------------ words


def _since(seconds: float) -> str:
    """``t+12.3`` / ``t-0.4`` (a broker line logged just before the run's start); never ``t+-0.0``."""
    shown = round(seconds, 1)
    return f"t-{-shown:.1f}" if shown < 0 else f"t+{abs(shown):.1f}"


def _at(ts: float, t0: float | None) -> str:
    if t0 is None:
        return datetime.fromtimestamp(ts, UTC).strftime("%H:%M:%S UTC")
    return f"{_since(ts - t0)} s"


def _between(low: float, high: float, t0: float | None) -> str:
    """``t+20.1–23.0 s`` (one time when both round alike)."""
    a, b = _at(low, t0), _at(high, t0)
    if a == b:
        return a
    if t0 is not None:
        top = round(high - t0, 1)
        return f"{_since(low - t0)}–{abs(top):.1f} s" if top >= 0 else f"{_since(low - t0)}–{_since(top)} s"
    return f"{a[:-4]}–{b}"


def _offsets(low: int, high: int) -> str:
    return f"offset {low}" if low == high else f"offsets {low}–{high}"


def _join(items: Sequence[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _guarantee(facts: StoryFacts) -> str:
    return facts.guarantee or "the claimed guarantee"


# ------------------------------------------------------------------------------------------------ parts


def _where(
    name: str,
    count: int,
    groups: Sequence[ExampleGroup],
    t0: float | None,
    ranges: Sequence[PartitionRange] = (),
) -> str:
    """Where the instances are: each partition's count, offset and time range of every instance (the
    audit's :attr:`~chaos.audit.facts.AnomalyReport.ranges`); from an ``audit.json`` written before them,
    those of the examples the audit kept, said as examples when it kept fewer than it counted."""
    kept = count
    if not ranges:
        examples = [e for g in groups for e in g.examples]
        if not examples:
            return "The audit kept no example of them, so where they are is not known."
        ranges, kept = partition_ranges(examples), len(examples)
    when = ANOMALY_TIME.get(name, "sent")

    def place(r: PartitionRange, with_count: bool) -> str:
        parts = []
        if r.first_offset is not None and r.last_offset is not None:
            parts.append(_offsets(r.first_offset, r.last_offset))
        if r.first_ts is not None and r.last_ts is not None:
            parts.append(f"{when} {_between(r.first_ts, r.last_ts, t0)}")
        key = partition_name(r.topic, r.partition)
        detail = ", ".join(parts)
        if with_count:
            return f"{key} ({r.count:,}{', ' + detail if detail else ''})"
        return f"{key}, {detail}" if detail else key

    busiest = sorted(ranges, key=lambda r: -r.count)
    if len(busiest) == 1:
        spot = place(busiest[0], False)
    else:
        shown = [place(r, True) for r in busiest[:MAX_PARTITIONS]]
        if len(busiest) > MAX_PARTITIONS:
            shown.append(f"{len(busiest) - MAX_PARTITIONS} more partitions")
        spot = _join(shown)
    if kept < count:
        lead = f"The {kept:,} the audit kept as examples (of {count:,}) are on"
    elif count == 1:
        lead = "It is on"
    elif len(busiest) > 1:
        lead = "They are on"
    else:
        lead = "Both are on" if count == 2 else f"All {count:,} are on"
    return f"{lead} {spot}."


def _span_of(label: str, at: float | None, spans: Sequence[FaultSpan]) -> FaultSpan | None:
    matching = [s for s in spans if s.label == label]
    if at is not None:
        holding = [s for s in matching if s.inject_ts <= at and (s.heal_ts is None or at <= s.heal_ts)]
        matching = holding or matching
    return matching[0] if matching else None


def _windows(groups: Sequence[ExampleGroup], spans: Sequence[FaultSpan], t0: float | None) -> str:
    """The fault windows the instances fall in or next to, with each window's own time."""
    seen: dict[tuple[str, str], list[float]] = {}
    first_at: dict[tuple[str, str], float | None] = {}
    alone = 0
    for g in groups:
        if not g.windows:
            alone += len(g.examples)
        for key, (low, high) in zip(g.windows, g.distances, strict=True):
            seen.setdefault(key, []).extend((low, high))
            first_at.setdefault(key, g.times[0] if g.times else None)
    if not seen:
        return "No fault window held at their time or within 30 s of it."
    parts = []
    for (relation, label), distances in seen.items():
        span = _span_of(label, first_at[(relation, label)], spans)
        window = ""
        if span is not None:
            end = f"{span.heal_ts - t0:.1f} s" if span.heal_ts is not None and t0 is not None else None
            if t0 is not None:
                window = (
                    f" (t+{span.inject_ts - t0:.1f}–{end})"
                    if end
                    else f" (from t+{span.inject_ts - t0:.1f} s, never healed)"
                )
        if relation == "during":
            parts.append(f"during {label}{window}")
        else:
            low, high = (min(distances), max(distances)) if distances else (0.0, 0.0)
            gap = f"{low:.1f}" if f"{low:.1f}" == f"{high:.1f}" else f"{low:.1f}–{high:.1f}"
            if relation == "after":
                parts.append(f"{gap} s after {label}{window} healed")
            else:
                parts.append(f"{gap} s before {label}{window} began")
    tail = f"; {alone:,} of them near no fault window" if alone else ""
    return f"They fall {_join(parts)}{tail}."


def _events(groups: Sequence[ExampleGroup], t0: float | None) -> str | None:
    """The broker events attributed to the instances, in time order, in words."""
    lines = {ln for g in groups for ln in g.broker_lines}
    if not lines:
        return None
    ordered = sorted(lines, key=lambda ln: (ln.ts or 0.0, ln.file, ln.lineno))
    said: list[str] = []
    for ln in ordered:
        text = describe_event(ln) + (f" at {_at(ln.ts, t0)}" if ln.ts is not None else "")
        if text not in said:
            said.append(text)
    more = len(said) - MAX_EVENTS
    shown = said[:MAX_EVENTS] + ([f"{more} more event{'s' if more > 1 else ''} below"] if more > 0 else [])
    where = sorted({g.where for g in groups if g.broker_lines})
    return f"On {_join(where)} the brokers logged: {'; '.join(shown)}."


def _removals(facts: AuditFacts) -> str | None:
    """What the topics' log policy removed on purpose (not loss), when it removed anything."""
    expired, compacted = facts.totals.expired, facts.totals.compacted
    if not expired and not compacted and not facts.removals:
        return None
    where = []
    for r in facts.removals:
        causes = []  # what removed this partition's records: a DeleteRecords, retention, the cleaner
        if r.deleted_to is not None:
            causes.append(f"DeleteRecords to offset {r.deleted_to}")
        if r.expired and r.retention_ms is not None and r.deleted_to is None:
            causes.append(f"retention.ms={r.retention_ms}")
        if r.compacted:
            causes.append(f"cleanup.policy={r.cleanup_policy or 'compact'}")
        why = " and ".join(causes)
        where.append(partition_name(r.topic, r.partition) + (f" under {why}" if why else ""))
    shown = where[:MAX_PARTITIONS] + (
        [f"{len(where) - MAX_PARTITIONS} more"] if len(where) > MAX_PARTITIONS else []
    )
    return (
        f"the topics' log policy removed {expired + compacted:,} records on purpose, which is not loss "
        f"({expired:,} expired, {compacted:,} compacted{': ' + ', '.join(shown) if shown else ''})"
    )


def _worst_availability(facts: AuditFacts, spans: Sequence[FaultSpan], mono0: float | None) -> str:
    """The worst availability figure: the longest time without an acknowledgement, the longest consume
    stall or a service's longest input stall, whichever is longest, with when and the fault windows around
    it."""
    from chaos.report.timeline import faults_during

    av = facts.availability
    gap = av.consumer.longest_stall()
    outage = av.longest_outage_s
    if gap is not None and (outage is None or gap.gap_s > outage):
        kind = "a stall of the service's input" if gap in av.consumer.service_gaps else "a consume stall"
        what = f"{kind} of {gap.gap_s:.1f} s on {gap.topic}-{gap.partition}"
        start, end = gap.start_mono, gap.end_mono
    elif outage is not None:
        what = f"{outage:.1f} s without an acknowledgement"
        if av.outage_start_mono is None or av.outage_end_mono is None:
            return f"the worst availability figure is {what}"
        start, end = av.outage_start_mono, av.outage_end_mono
    else:
        return "no availability figure was measured"
    during = faults_during(spans, start, end)
    when = f"t+{start - mono0:.1f}–{end - mono0:.1f} s" if mono0 is not None else ""
    context = ", ".join(filter(None, (when, "during " + ", ".join(during) if during else "no fault active")))
    return f"the worst availability figure is {what} ({context})"


# ------------------------------------------------------------------------------------------------ story


def _failed(facts: StoryFacts, audit: AuditResult | None) -> list[str]:
    guarantee = _guarantee(facts)
    broken = [t for t in facts.thresholds if not t.passed]
    thresholds = [
        f"threshold {t.name} was broken ({t.observed if t.observed is not None else '—'} {t.unit}, "
        f"limit {t.limit} {t.unit})"
        for t in broken
    ]
    failing = [(n, audit.facts.anomaly(n).count) for n in audit.failed_by] if audit is not None else []
    failing.sort(key=lambda item: -item[1])
    sentences = []
    if failing:
        found = _join([f"{noun(n, c)} ({n})" for n, c in failing])
        first = f"The audit found {found}, which {guarantee} forbids"
        if thresholds:
            first += "; " + _join(thresholds)
        sentences.append(first + ".")
        main, count = failing[0]
        groups = facts.groups.get(main, ())
        ranges = audit.facts.anomaly(main).ranges if audit is not None else ()
        sentences.append(_where(main, count, groups, facts.t0, ranges))
        if groups and any(g.examples for g in groups):
            sentences.append(_windows(groups, facts.spans, facts.t0))
            events = _events(groups, facts.t0)
            if events:
                sentences.append(events)
    else:
        sentences.append(
            f"No anomaly that {guarantee} forbids was found, but {_join(thresholds) or 'the run failed'}."
        )
    promise = GUARANTEE_PROMISE.get(facts.guarantee or "")
    last = f"The claimed guarantee, {guarantee}, promised {promise}" if promise else ""
    removed = _removals(audit.facts) if audit is not None else None
    if removed:
        last = f"{last}; separately, {removed}" if last else _capital(removed)
    if last:
        sentences.append(last + ".")
    return sentences[:5]


def _inconclusive(facts: StoryFacts, audit: AuditResult | None) -> str:
    unmet = [c for c in facts.checks if c.kind == "precondition" and not c.observed]
    stands = f", so the audit's verdict ({audit.verdict}) does not count" if audit is not None else ""
    if unmet:
        said = _join(
            [f"“{c.description}” did not hold" + (f" ({c.detail})" if c.detail else "") for c in unmet]
        )
        return f"Inconclusive: the case did not happen as planned — {said}{stands}."
    if facts.reasons:
        return f"Inconclusive: {'; '.join(facts.reasons)}{stands}."
    if audit is None:
        return "Inconclusive: the run has no audit result (audit.json), so nothing is known of its anomalies."
    if audit.facts.problems:
        return f"Inconclusive: the audit could not establish {_join(list(audit.facts.problems))}."
    return "Inconclusive: the verdict is unknown."


def tell(facts: StoryFacts) -> Story:
    """The story of one run (:class:`Story`)."""
    audit = facts.audit
    guarantee = _guarantee(facts)
    if facts.verdict == "pass" and audit is not None:
        worst = _worst_availability(audit.facts, facts.spans, facts.mono0)
        removed = _removals(audit.facts)
        sentence = (
            f"Passed: nothing {guarantee} forbids happened to the {audit.facts.totals.acked:,} acknowledged "
            f"writes; {worst}" + (f"; {removed}" if removed else "") + "."
        )
        return Story((sentence,), ())
    if facts.verdict == "fail":
        changes = list(facts.remediation)
        for name in audit.failed_by if audit is not None else ():
            hint = ANOMALY_HINTS.get(name)
            if hint and hint not in changes:
                changes.append(hint)
        return Story(tuple(_failed(facts, audit)), tuple(changes))
    return Story(
        (_inconclusive(facts, audit),),
        ("Nothing is known to be wrong yet: make the case happen and run it again (Reproduce, below).",),
    )
