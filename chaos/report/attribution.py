"""Why a record was lost, duplicated or reordered: the fault window and the broker events around it.

For each anomaly example the report shows (:class:`~chaos.audit.facts.Example`: value, partition, time),
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
from typing import TYPE_CHECKING, Final, Literal

from chaos.cluster.logs import read_log_lines
from chaos.report.symptoms import LogLine, parse_line

if TYPE_CHECKING:
    from chaos.audit.facts import Example
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
_CREATED: Final = re.compile(r"starts at leader epoch 0 from offset 0 ")
"""A partition's first leader and followers, as its topic is created: they explain nothing."""
_LOG4J_PREFIX: Final = re.compile(r"^\[[0-9-]+ [0-9:,.]+\] [A-Z]+ ")


@dataclass(frozen=True)
class Near:
    """A fault window near an example: ``relation`` ``during`` (its window holds the example's time),
    ``after`` (it healed ``seconds`` before) or ``before`` (it began ``seconds`` after)."""

    relation: Literal["during", "after", "before"]
    label: str
    seconds: float = 0.0

    @property
    def text(self) -> str:
        if self.relation == "during":
            return f"during {self.label}"
        if self.relation == "after":
            return f"{self.seconds:.1f} s after {self.label} healed"
        return f"{self.seconds:.1f} s before {self.label}"


@dataclass(frozen=True)
class Attribution:
    """The faults near an example (``"during crash broker-3"``, ``"0.8 s before crash broker-2"``) and
    the brokers' lines about its partition around it."""

    faults: tuple[str, ...]
    broker_lines: tuple[LogLine, ...]
    near: tuple[Near, ...] = ()
    """The same faults as ``faults``, structured (what :func:`group_examples` groups by)."""

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
            if ts is not None and _EVENT.search(text) and not _CREATED.search(text):
                events.append(LogLine(path.name, lineno, ts, _short(text)))
    events.sort(key=lambda ln: (ln.ts or 0.0, ln.file, ln.lineno))
    return events


def _short(text: str) -> str:
    text = _LOG4J_PREFIX.sub("", text.strip())
    return text if len(text) <= MAX_LINE_CHARS else text[:MAX_LINE_CHARS] + " …"


def target_kind(target: str) -> str:
    """What a fault's target is, without its number: ``broker`` of ``broker-2``, ``service`` of
    ``service-0``."""
    return re.sub(r"-?[0-9]+$", "", target) or target


def _nearby(ts: float, spans: Sequence[FaultSpan]) -> tuple[Near, ...]:
    """Every fault holding at ``ts``, then the one that healed last before it, and the one that began next
    after it on each kind of target (:func:`target_kind`; each within :data:`NEAR_S`): in a dense random mix
    the neighbours that can explain it, and a value a service took in before a broker crashed and lost when
    it was itself killed later names both."""
    near = [
        Near("during", s.label) for s in spans if s.inject_ts <= ts and (s.heal_ts is None or ts <= s.heal_ts)
    ]
    ended = [s for s in spans if s.heal_ts is not None and s.heal_ts < ts <= s.heal_ts + NEAR_S]
    coming = sorted((s for s in spans if s.inject_ts - NEAR_S <= ts < s.inject_ts), key=lambda s: s.inject_ts)
    if ended:
        last = max(ended, key=lambda s: s.heal_ts or 0.0)
        near.append(Near("after", last.label, ts - (last.heal_ts or 0.0)))
    kinds: set[str] = set()
    for span in coming:
        kind = target_kind(span.target)
        if kind not in kinds:
            kinds.add(kind)
            near.append(Near("before", span.label, span.inject_ts - ts))
    return tuple(near)


def _mentions(text: str, topic: str, partition: int) -> bool:
    return re.search(rf"{re.escape(topic)}-{partition}(?![0-9])", text) is not None


def attribute(example: Example, spans: Sequence[FaultSpan], events: Sequence[LogLine]) -> Attribution:
    """The faults and broker lines around ``example`` (nothing when it has no time)."""
    ts = example.ts
    if ts is None:
        return Attribution((), ())
    near = _nearby(ts, spans)
    lines: list[LogLine] = []
    if example.topic is not None and example.partition is not None:
        for line in events:
            if line.ts is None or not ts - LOG_BEFORE_S <= line.ts <= ts + LOG_AFTER_S:
                continue
            if _mentions(line.text, example.topic, example.partition):
                lines.append(line)
                if len(lines) == MAX_LINES:
                    break
    return Attribution(tuple(n.text for n in near), tuple(lines), near)


_LEADER: Final = re.compile(
    r"Leader (?P<tp>\S+) with topic id .*? starts at leader epoch (?P<epoch>-?[0-9]+) from offset "
    r"(?P<offset>[0-9]+)(?:.*?ISR \[(?P<isr>[0-9, ]*)\])?"
)
_FOLLOWER: Final = re.compile(
    r"Follower (?P<tp>\S+) starts at leader epoch (?P<epoch>-?[0-9]+) from offset (?P<offset>[0-9]+)"
    r".*?Current leader is (?P<leader>-?[0-9]+)"
)
_UNCLEAN: Final = re.compile(r"UNCLEAN partition change for (?P<tp>\S+)")
_UNCLEAN_LEADER: Final = re.compile(r"leader[:=] ?(?:(?P<old>-?[0-9]+) -> )?(?P<new>-?[0-9]+)")
_SHRINK: Final = re.compile(
    r"Shrinking ISR from (?P<old>[0-9,]+) to (?P<new>[0-9,]+)"
    r"(?:\. Leader: \(highWatermark: (?P<hw>[0-9]+), endOffset: (?P<end>[0-9]+)\))?"
)
_TRUNCATE_STATE: Final = re.compile(
    r"Truncating partition (?P<tp>\S+) with TruncationState\(offset=(?P<offset>[0-9]+)"
)
_TRUNCATE_TO: Final = re.compile(r"Truncating to (?P<offset>[0-9]+)")
_BROKER_FILE: Final = re.compile(r"^broker-?([0-9]+)")
_BROKER_TEXT: Final = re.compile(r"(?:broker=|Broker id=|replicaId=)([0-9]+)")


def _broker_of(line: LogLine) -> str:
    m = _BROKER_TEXT.search(line.text) or _BROKER_FILE.match(line.file)
    return f"broker {m.group(1)}" if m else line.file


def describe_event(line: LogLine) -> str:
    """A broker line :func:`partition_events` picked, in words: ``broker 1 became leader at epoch 1 from
    offset 39``, ``the controller elected broker 3 leader uncleanly (the previous leader: 2)``,
    ``broker 2 shrank the ISR from [1,2] to [2] (high watermark 44, log end 105)``, ``broker 2 truncated
    its log to offset 39``. A line of another shape is returned as it is."""
    text = line.text
    if m := _UNCLEAN.search(text):
        lead = _UNCLEAN_LEADER.search(text[m.end() :])
        if lead is None or lead.group("new") in ("-1", None):
            return "the controller changed the partition's leadership uncleanly (unclean leader election)"
        old = lead.group("old")
        was = f" (the previous leader: {old})" if old not in (None, "-1") else ""
        return f"the controller elected broker {lead.group('new')} leader uncleanly{was}"
    if m := _LEADER.search(text):
        isr = f" (ISR [{m.group('isr')}])" if m.group("isr") is not None else ""
        return (
            f"{_broker_of(line)} became leader at epoch {m.group('epoch')} from offset "
            f"{m.group('offset')}{isr}"
        )
    if m := _FOLLOWER.search(text):
        return (
            f"{_broker_of(line)} followed broker {m.group('leader')} at epoch {m.group('epoch')} from offset "
            f"{m.group('offset')}"
        )
    if m := _SHRINK.search(text):
        offsets = (
            f" (high watermark {m.group('hw')}, log end {m.group('end')})"
            if m.group("hw") is not None
            else ""
        )
        return f"{_broker_of(line)} shrank the ISR from [{m.group('old')}] to [{m.group('new')}]{offsets}"
    if m := _TRUNCATE_STATE.search(text) or _TRUNCATE_TO.search(text):
        return f"{_broker_of(line)} truncated its log to offset {m.group('offset')}"
    return f"{line.file}: {text}"


@dataclass(frozen=True)
class ExampleGroup:
    """Examples that share their context: one partition, the same fault windows around them (by relation
    and fault, whatever the distance) and the same broker lines. ``near`` gives each fault window's
    relation with the range of distances over the group's examples (``0.8–2.9 s before crash
    broker-2``)."""

    topic: str | None
    partition: int | None
    near: tuple[str, ...]
    broker_lines: tuple[LogLine, ...]
    examples: tuple[Example, ...]
    windows: tuple[tuple[str, str], ...] = ()
    """``(relation, fault label)`` of each fault window near every example of the group."""
    distances: tuple[tuple[float, float], ...] = ()
    """Per window, the least and greatest distance in seconds from an example to it (0 for ``during``)."""

    @property
    def offsets(self) -> tuple[int, int] | None:
        values = [e.offset for e in self.examples if e.offset is not None]
        return (min(values), max(values)) if values else None

    @property
    def times(self) -> tuple[float, float] | None:
        values = [e.ts for e in self.examples if e.ts is not None]
        return (min(values), max(values)) if values else None

    @property
    def where(self) -> str:
        """``chaos-0`` (``topic-partition``), or what is known of it."""
        return partition_name(self.topic, self.partition)


def partition_name(topic: str | None, partition: int | None) -> str:
    """``chaos-0`` (``topic-partition``), or what is known of it."""
    if topic is None:
        return "unknown partition" if partition is None else f"partition {partition}"
    return topic if partition is None else f"{topic}-{partition}"


def _span(values: Sequence[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:.1f}" if f"{low:.1f}" == f"{high:.1f}" else f"{low:.1f}–{high:.1f}"


def group_examples(pairs: Sequence[tuple[Example, Attribution | None]]) -> list[ExampleGroup]:
    """The examples grouped by context (:class:`ExampleGroup`), in the order of each group's first
    example; an example without attribution groups by its partition alone."""
    Key = tuple[str | None, int | None, tuple[tuple[str, str], ...], tuple[LogLine, ...]]
    keyed: dict[Key, list[tuple[Example, Attribution | None]]] = {}
    for example, why in pairs:
        near: tuple[tuple[str, str], ...] = (
            tuple((n.relation, n.label) for n in why.near) if why is not None else ()
        )
        lines = why.broker_lines if why is not None else ()
        keyed.setdefault((example.topic, example.partition, near, lines), []).append((example, why))
    groups = []
    for (topic, partition, near, lines), members in keyed.items():
        texts = []
        distances = []
        for i, (relation, label) in enumerate(near):
            seconds = [why.near[i].seconds for _, why in members if why is not None]
            distances.append((min(seconds), max(seconds)))
            if relation == "during":
                texts.append(f"during {label}")
            elif relation == "after":
                texts.append(f"{_span(seconds)} s after {label} healed")
            else:
                texts.append(f"{_span(seconds)} s before {label}")
        groups.append(
            ExampleGroup(
                topic,
                partition,
                tuple(texts),
                lines,
                tuple(e for e, _ in members),
                near,
                tuple(distances),
            )
        )
    return groups
