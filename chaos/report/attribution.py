"""Why a record was lost, duplicated or reordered: the fault window and the broker events around it.

For each anomaly example the report shows (:class:`~chaos.audit.model.Example`: value, partition, time),
:func:`attribute` names the faults whose window holds its time, the last one that ended shortly before it
and the first one that began shortly after it (a write acknowledged alone, then its leader crashed) — and
the brokers' own account of
its partition around that time, from their logs: an **unclean** leader election, a follower **truncating**
its log to a new leader's epoch (what the returning old leader does with the writes only it had), an ISR
shrink, a new leader epoch. The reader sees *why*, next to *what*.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from chaos.cluster.logs import read_log_lines
from chaos.report.evidence import LogLine, parse_line

if TYPE_CHECKING:
    from chaos.audit.model import Example
    from chaos.report.timeline import FaultSpan

NEAR_S: Final = 30.0
"""A fault counts when the example's time is inside its window or this close to either end."""
LOG_BEFORE_S: Final = 5.0
LOG_AFTER_S: Final = 120.0
"""Broker lines about the partition from shortly before the example to this long after (an unclean
election or a truncation comes when the fault ends, which may be a minute later)."""
MAX_LINES: Final = 4
MAX_LINE_CHARS: Final = 260

_EVENT: Final = re.compile(
    r"UNCLEAN partition change|Shrinking ISR|Truncating partition \S+ with TruncationState\(offset=[1-9]"
    r"|starts at leader epoch|due to leader epoch and offset|Truncating to [0-9]+ (?!has no effect)"
)
"""What a broker logs when a partition's history is rewritten or its leadership moves (Kafka 3.9–4.4)."""
_LOG4J_PREFIX: Final = re.compile(r"^\[[0-9-]+ [0-9:,.]+\] [A-Z]+ ")


@dataclass(frozen=True)
class Attribution:
    """The faults near an example (``"during crash broker-3"``, ``"0.8 s before crash broker-2"``) and
    the brokers' lines about its partition around it."""

    faults: tuple[str, ...]
    broker_lines: tuple[LogLine, ...]

    @property
    def empty(self) -> bool:
        return not self.faults and not self.broker_lines


def partition_events(files: Sequence[Path], topic: str) -> list[LogLine]:
    """Every broker line about a partition of ``topic`` that :data:`_EVENT` names, in time order."""
    events: list[LogLine] = []
    for path in files:
        if not path.name.startswith("broker"):
            continue
        for lineno, raw in enumerate(read_log_lines(path), start=1):
            if topic not in raw:
                continue
            ts, text = parse_line(raw)
            if ts is not None and _EVENT.search(text):
                events.append(LogLine(path.name, lineno, ts, _short(text)))
    events.sort(key=lambda ln: (ln.ts or 0.0, ln.file, ln.lineno))
    return events


def _short(text: str) -> str:
    text = _LOG4J_PREFIX.sub("", text.strip())
    return text if len(text) <= MAX_LINE_CHARS else text[:MAX_LINE_CHARS] + " …"


def _nearby(ts: float, spans: Sequence[FaultSpan]) -> tuple[str, ...]:
    """Every fault holding at ``ts``, then the one that healed last before it and the one that began next
    after it (each within :data:`NEAR_S`): in a dense random mix, the neighbours that can explain it."""
    during = [
        f"during {s.label}" for s in spans if s.inject_ts <= ts and (s.heal_ts is None or ts <= s.heal_ts)
    ]
    ended = [s for s in spans if s.heal_ts is not None and s.heal_ts < ts <= s.heal_ts + NEAR_S]
    coming = [s for s in spans if s.inject_ts - NEAR_S <= ts < s.inject_ts]
    near = list(during)
    if ended:
        last = max(ended, key=lambda s: s.heal_ts or 0.0)
        near.append(f"{ts - (last.heal_ts or 0.0):.1f} s after {last.label} healed")
    if coming:
        first = min(coming, key=lambda s: s.inject_ts)
        near.append(f"{first.inject_ts - ts:.1f} s before {first.label}")
    return tuple(near)


def _mentions(text: str, topic: str, partition: int) -> bool:
    return re.search(rf"{re.escape(topic)}-{partition}(?![0-9])", text) is not None


def attribute(example: Example, spans: Sequence[FaultSpan], events: Sequence[LogLine]) -> Attribution:
    """The faults and broker lines around ``example`` (nothing when it has no time)."""
    ts = example.ts
    if ts is None:
        return Attribution((), ())
    faults = _nearby(ts, spans)
    lines: list[LogLine] = []
    if example.topic is not None and example.partition is not None:
        for line in events:
            if line.ts is None or not ts - LOG_BEFORE_S <= line.ts <= ts + LOG_AFTER_S:
                continue
            if _mentions(line.text, example.topic, example.partition):
                lines.append(line)
                if len(lines) == MAX_LINES:
                    break
    return Attribution(faults, tuple(lines))
