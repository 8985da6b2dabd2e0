"""A report's "What happened" read back against its run's audit: every anomaly count the story names is the
audit's, and every partition, count and offset range its "where" sentence names is one of the anomaly's
per-partition ranges (``AnomalyReport.ranges``). Used on synthetic stories
(tests/unit/report/test_report_story.py) and on every page of a real report tree
(tests/integration/test_report_browser.py)."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Final

from chaos.audit.facts import PartitionRange
from chaos.audit.verdict import AuditResult
from chaos.report.attribution import partition_name

FOUND: Final = re.compile(r"(\d{1,3}(?:,\d{3})*) [^()]*?\((\w+)\)")
"""``61 acknowledged writes lost (lost_acked)`` in the first sentence."""
_COUNT: Final = r"(\d{1,3}(?:,\d{3})*)"
"""``61`` or ``1,204`` (a thousands comma, never the comma after it)."""
_OFFSETS: Final = r"(?:, offsets? (\d+)(?:–(\d+))?)?"
"""``, offsets 44–104`` or ``, offset 7`` (optional)."""


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _check_range(sentence: str, r: PartitionRange, alone: bool, count: int) -> list[str]:
    """What ``sentence`` says of range ``r`` that the audit does not: its count (the whole anomaly's when
    it is the only partition) and its offsets."""
    name = partition_name(r.topic, r.partition)
    place = re.escape(name)
    if alone:
        found = re.search(rf"(All {_COUNT} are|Both are|It is) on {place}{_OFFSETS}", sentence)
        said = None if found is None else {"Both are": 2, "It is": 1}.get(found[1]) or _int(found[2])
        low, high, want = (found[3], found[4], count) if found else (None, None, count)
    else:
        found = re.search(rf"{place} \({_COUNT}{_OFFSETS}", sentence)
        said = None if found is None else _int(found[1])
        low, high, want = (found[2], found[3], r.count) if found else (None, None, r.count)
    if found is None:
        return [f"does not place {name} as the audit does: {sentence!r}"]
    problems = [f"{name}: says {said}, the audit {want}"] if said != want else []
    if low is not None:
        offsets = (_int(low), _int(high or low))
        if offsets != (r.first_offset, r.last_offset):
            problems.append(f"{name}: offsets {offsets}, the audit {(r.first_offset, r.last_offset)}")
    return problems


WORST: Final = re.compile(
    r"the worst availability figure is (?:(?P<kind>a consume stall|a stall of the service's input) of "
    r"(?P<gap>[0-9.]+) s on (?P<where>\S+) \(|(?P<outage>[0-9.]+) s without an acknowledgement)"
)
"""A passing run's one sentence: its worst availability figure."""


def _worst(sentence: str, audit: AuditResult) -> list[str]:
    """What a passing run's sentence says of its worst availability figure that the audit does not."""
    found = WORST.search(sentence)
    if found is None:
        return []
    consumer = audit.facts.availability.consumer
    if found["outage"] is not None:
        outage = audit.facts.availability.longest_outage_s
        said = float(found["outage"])
        return (
            []
            if outage is not None and f"{outage:.1f}" == found["outage"]
            else [f"says {said} s without an acknowledgement, the audit {outage}"]
        )
    gap = consumer.longest_gap() if found["kind"] == "a consume stall" else consumer.longest_service_gap()
    if gap is None:
        return [f"names {found['kind']}, the audit has none"]
    where = partition_name(gap.topic, gap.partition)
    if (f"{gap.gap_s:.1f}", where) != (found["gap"], found["where"]):
        return [f"says {found['kind']} of {found['gap']} s on {found['where']}, the audit {gap.gap_s:.1f} s "
                f"on {where}"]  # fmt: skip
    return []


def contradictions(sentences: list[str], audit: AuditResult) -> list[str]:
    """What a run's "What happened" (its sentences) names that ``audit`` does not say; empty when every
    count, partition and offset range a failed run's story names, and a passing run's worst availability
    figure, is the audit's."""
    if sentences and sentences[0].startswith("Passed:"):
        return _worst(sentences[0], audit)
    if not sentences or not sentences[0].startswith("The audit found"):
        return []
    problems: list[str] = []
    named = FOUND.findall(sentences[0])
    for count, anomaly in named:
        if anomaly not in dict(audit.facts.anomalies):
            problems.append(f"names {anomaly}, which is no anomaly")
        elif _int(count) != audit.facts.anomaly(anomaly).count:
            problems.append(f"{anomaly}: says {count}, the audit {audit.facts.anomaly(anomaly).count}")
    if not named or len(sentences) < 2:
        return problems
    main = named[0][1]
    report = audit.facts.anomaly(main) if main in dict(audit.facts.anomalies) else None
    if report is None or not report.ranges:
        return problems  # an audit.json written before the ranges: the examples' places are not checked
    where = sentences[1]
    busiest = sorted(report.ranges, key=lambda r: -r.count)
    alone = len(busiest) == 1
    for r in busiest[:3]:
        problems += _check_range(where, r, alone, report.count)
    return problems


def sentences_of(report: Path) -> list[str]:
    """The "What happened" sentences of a rendered ``report.html`` (each in its ``sentence`` span)."""
    text = report.read_text(encoding="utf-8")
    spans = re.findall(r'<span class="sentence">(.*?)</span>', text, flags=re.S)
    return [html.unescape(re.sub(r"<[^>]+>", "", s)) for s in spans]
