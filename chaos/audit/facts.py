"""What the audit takes in and gives back: topic records, anomaly examples, availability, the facts.

Both engines (:mod:`chaos.audit.reference` and :mod:`chaos.audit.sparkjob`) return an :class:`AuditFacts`
and must return *equal* ones for the same input; docs/audit.md defines every field.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Final, Literal

from chaos.errors import AuditError
from chaos.run.events import ISOLATION_LEVELS as ISOLATION_LEVELS  # the audit's modules import them here
from chaos.run.events import Isolation as Isolation
from chaos.run.events import producer_of

ANOMALIES: Final[tuple[str, ...]] = (
    "lost_acked",
    "lost_indeterminate",
    "unseen_by_group",
    "expired_unread",
    "duplicate_in_log",
    "duplicate_delivery_after_rebalance",
    "duplicate_delivery_other",
    "poll_skip",
    "nonmonotonic_poll",
    "reordered",
    "nonmonotonic_send",
    "inconsistent_offsets",
    "aborted_read",
    "precommitted_read",
    "unexpected",
)
"""Every anomaly name, in report order."""

JEPSEN_ORDER_CHECKS: Final[tuple[str, ...]] = (
    "poll_skip",
    "nonmonotonic_poll",
    "nonmonotonic_send",
    "precommitted_read",
)
"""The anomalies named after Jepsen's Kafka checker's order checks (docs/audit.md, "Order checks"): an
``audit.json`` written before they were checked reads them as not found."""

RESET_OPERATIONS: Final = frozenset({"seek"})
"""``probe_call`` operations that move a consumer's position, like a rebalance callback (docs/audit.md,
"Order checks")."""

TxnState = Literal["committed", "aborted", "indeterminate"]
TxnRecorded = Literal["committed", "aborted", "fenced", "unknown"]

FENCED_ERRORS: Final = frozenset({"_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"})
"""End-marker errors that say a newer instance of the transactional id bumped the epoch: the coordinator
aborts the open transaction when it does (docs/audit.md, "Transactions")."""

DEFAULT_MAX_EXAMPLES: Final = 10
PERCENTILES: Final[tuple[int, ...]] = (50, 99)


class InvalidAuditInput(AuditError, ValueError):
    """A topic record, an audit option or a result field is invalid; the message names it."""


def _need(ok: bool, owner: object, name: str, expected: str, value: object) -> None:
    if not ok:
        raise InvalidAuditInput(f"{type(owner).__name__}.{name}: expected {expected}; got {value!r}")


def _is_int(value: object, *, optional: bool = False) -> bool:
    return (value is None and optional) or (type(value) is int and value >= 0)


def _is_float(value: object, *, optional: bool = True) -> bool:
    return (value is None and optional) or (type(value) is float and math.isfinite(value))


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One record of the topic as really stored, read at one isolation level.

    ``value_id`` is parsed from the record's value bytes (``None`` when the payload is not one of ours).
    """

    topic: str
    partition: int
    offset: int
    value_id: str | None
    isolation: Isolation
    key: str | None = None

    def __post_init__(self) -> None:
        _need(type(self.topic) is str and bool(self.topic), self, "topic", "a non-empty str", self.topic)
        _need(_is_int(self.partition), self, "partition", "an int >= 0", self.partition)
        _need(_is_int(self.offset), self, "offset", "an int >= 0", self.offset)
        _need(
            self.value_id is None or type(self.value_id) is str,
            self,
            "value_id",
            "a str or None",
            self.value_id,
        )
        _need(
            self.isolation in ISOLATION_LEVELS,
            self,
            "isolation",
            " or ".join(ISOLATION_LEVELS),
            self.isolation,
        )
        _need(self.key is None or type(self.key) is str, self, "key", "a str or None", self.key)


@dataclass(frozen=True, slots=True)
class AuditOptions:
    """How to audit: the isolation level the consumer group read at, and how many examples to keep."""

    group_isolation: Isolation = "read_committed"
    max_examples: int = DEFAULT_MAX_EXAMPLES

    def __post_init__(self) -> None:
        _need(
            self.group_isolation in ISOLATION_LEVELS,
            self,
            "group_isolation",
            " or ".join(ISOLATION_LEVELS),
            self.group_isolation,
        )
        _need(
            type(self.max_examples) is int and 0 <= self.max_examples <= 10_000,
            self,
            "max_examples",
            "an int in [0, 10000]",
            self.max_examples,
        )


DEFAULT_OPTIONS: Final = AuditOptions()


@dataclass(frozen=True, slots=True)
class Example:
    """One instance of an anomaly. Which position and time it names is defined per anomaly (docs/audit.md);
    ``ts`` is wall-clock seconds."""

    value_id: str | None
    topic: str | None
    partition: int | None
    offset: int | None
    ts: float | None

    def __post_init__(self) -> None:
        _need(
            self.partition is None or _is_int(self.partition),
            self,
            "partition",
            "an int >= 0 or None",
            self.partition,
        )
        _need(self.offset is None or _is_int(self.offset), self, "offset", "an int >= 0 or None", self.offset)
        _need(_is_float(self.ts), self, "ts", "a finite float or None", self.ts)

    def sort_key(self) -> tuple[Any, ...]:
        """Examples are the first N in this order (nulls first), so both engines pick the same ones."""
        return (
            self.value_id is not None,
            self.value_id or "",
            self.topic is not None,
            self.topic or "",
            self.partition is not None,
            self.partition or 0,
            self.offset is not None,
            self.offset or 0,
            self.ts is not None,
            self.ts or 0.0,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "value_id": self.value_id,
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "ts": self.ts,
        }


@dataclass(frozen=True, slots=True)
class PartitionRange:
    """Where every instance of one anomaly on one topic-partition lies: how many, their first and last
    offset and time (each ``None`` when no instance names one). ``topic`` / ``partition`` ``None``: the
    instances that name no position (a send that never reached the log)."""

    topic: str | None
    partition: int | None
    count: int
    first_offset: int | None = None
    last_offset: int | None = None
    first_ts: float | None = None
    last_ts: float | None = None

    def __post_init__(self) -> None:
        _need(_is_int(self.count) and self.count > 0, self, "count", "an int > 0", self.count)
        _need(
            (self.first_offset is None) == (self.last_offset is None)
            and (self.first_offset is None or self.first_offset <= self.last_offset),  # type: ignore[operator]
            self,
            "first_offset",
            "first <= last, both or neither given",
            (self.first_offset, self.last_offset),
        )

    def sort_key(self) -> tuple[Any, ...]:
        return (self.topic is not None, self.topic or "", self.partition is not None, self.partition or 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "count": self.count,
            "first_offset": self.first_offset,
            "last_offset": self.last_offset,
            "first_ts": self.first_ts,
            "last_ts": self.last_ts,
        }


def partition_ranges(instances: Iterable[Example]) -> tuple[PartitionRange, ...]:
    """Every instance of an anomaly, summed up per topic-partition (:class:`PartitionRange`), in
    :meth:`PartitionRange.sort_key` order."""
    groups: dict[tuple[str | None, int | None], list[Example]] = defaultdict(list)
    for e in instances:
        groups[(e.topic, e.partition)].append(e)
    ranges = []
    for (topic, partition), group in groups.items():
        offsets = [e.offset for e in group if e.offset is not None]
        times = [e.ts for e in group if e.ts is not None]
        ranges.append(
            PartitionRange(
                topic,
                partition,
                len(group),
                min(offsets) if offsets else None,
                max(offsets) if offsets else None,
                min(times) if times else None,
                max(times) if times else None,
            )
        )
    return tuple(sorted(ranges, key=PartitionRange.sort_key))


@dataclass(frozen=True, slots=True)
class AnomalyReport:
    """How many instances of one anomaly, the first ``max_examples`` of them in :meth:`Example.sort_key`
    order, and ``by_producer``: the instances per producer named in their value id (sorted by producer;
    an instance without one of ours — a foreign record — is in ``count`` only). The verdict judges each
    producer's share by the guarantee its stream claims (:func:`chaos.audit.verdict.judge`)."""

    count: int
    examples: tuple[Example, ...] = ()
    by_producer: tuple[tuple[str, int], ...] = ()
    ranges: tuple[PartitionRange, ...] = ()
    """Every instance, per topic-partition (:func:`partition_ranges`): where all of them lie, not only the
    kept examples."""

    def __post_init__(self) -> None:
        _need(_is_int(self.count), self, "count", "an int >= 0", self.count)
        _need(
            len(self.examples) <= self.count,
            self,
            "examples",
            f"at most count={self.count} items",
            len(self.examples),
        )
        producers = [p for p, _ in self.by_producer]
        _need(
            producers == sorted(set(producers))
            and all(_is_int(n) and n > 0 for _, n in self.by_producer)
            and sum(n for _, n in self.by_producer) <= self.count,
            self,
            "by_producer",
            f"(producer, count > 0) pairs sorted by producer, summing to at most count={self.count}",
            self.by_producer,
        )
        _need(
            not self.ranges or sum(r.count for r in self.ranges) == self.count,
            self,
            "ranges",
            f"per-partition counts summing to count={self.count} (or none)",
            self.ranges,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "examples": [e.to_dict() for e in self.examples],
            "by_producer": dict(self.by_producer),
            "ranges": [r.to_dict() for r in self.ranges],
        }


@dataclass(frozen=True, slots=True)
class LatencyStats:
    """Latencies (ms) of one phase — ack latencies of the ok sends, or end-to-end latencies (ack to first
    delivery) — with nearest-rank percentiles."""

    count: int
    p50_ms: float | None
    p99_ms: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "p50_ms": self.p50_ms, "p99_ms": self.p99_ms}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> LatencyStats:
        """Inverse of :meth:`to_dict`; ``None`` (a field an older ``audit.json`` lacks) is no latency."""
        if not data:
            return NO_LATENCY
        return cls(int(data["count"]), _opt_float(data.get("p50_ms")), _opt_float(data.get("p99_ms")))


NO_LATENCY: Final = LatencyStats(0, None, None)


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


@dataclass(frozen=True, slots=True)
class FaultWindow:
    """One fault from its inject to its heal (``heal_mono`` ``None``: never healed), with the ack latency
    before / during / after it, how long producing and consuming took to resume after the heal, and the
    end-to-end latency (``e2e_*``: a value's available time to its first delivery) of the values that became
    available before / during / after it."""

    fault: str
    target: str
    inject_mono: float
    heal_mono: float | None
    before: LatencyStats
    during: LatencyStats
    after: LatencyStats
    heal_to_first_ack_s: float | None
    heal_to_first_delivery_s: float | None
    e2e_before: LatencyStats = NO_LATENCY
    e2e_during: LatencyStats = NO_LATENCY
    e2e_after: LatencyStats = NO_LATENCY

    def to_dict(self) -> dict[str, Any]:
        return {
            "fault": self.fault,
            "target": self.target,
            "inject_mono": self.inject_mono,
            "heal_mono": self.heal_mono,
            "before": self.before.to_dict(),
            "during": self.during.to_dict(),
            "after": self.after.to_dict(),
            "heal_to_first_ack_s": self.heal_to_first_ack_s,
            "heal_to_first_delivery_s": self.heal_to_first_delivery_s,
            "e2e_before": self.e2e_before.to_dict(),
            "e2e_during": self.e2e_during.to_dict(),
            "e2e_after": self.e2e_after.to_dict(),
        }


LAG_POINTS: Final = 120
"""How many points the consumer-lag series has (both ends included): bounded whatever the run's length."""


@dataclass(frozen=True, slots=True)
class ConsumeGap:
    """The longest stall of one partition of the group's topics: records available to read and none
    delivered, from ``start_mono`` to ``end_mono`` (docs/audit.md, "Consumer side"). ``resumed``: a
    delivery ended it (else it lasted to the group's last event)."""

    topic: str
    partition: int
    gap_s: float
    start_mono: float
    end_mono: float
    resumed: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "gap_s": self.gap_s,
            "start_mono": self.start_mono,
            "end_mono": self.end_mono,
            "resumed": self.resumed,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ConsumeGap:
        return cls(
            str(data["topic"]),
            int(data["partition"]),
            float(data["gap_s"]),
            float(data["start_mono"]),
            float(data["end_mono"]),
            bool(data["resumed"]),
        )


@dataclass(frozen=True, slots=True)
class Handover:
    """The longest handover of one partition: from its previous owner's last delivery (or that owner's
    recorded revoke / lost of it, ``left``) to the first delivery by a new owner (a member: ``process`` and
    member id)."""

    topic: str
    partition: int
    from_process: str
    from_member: str | None
    to_process: str
    to_member: str | None
    start_mono: float
    end_mono: float
    handover_s: float
    left: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "from_process": self.from_process,
            "from_member": self.from_member,
            "to_process": self.to_process,
            "to_member": self.to_member,
            "start_mono": self.start_mono,
            "end_mono": self.end_mono,
            "handover_s": self.handover_s,
            "left": self.left,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Handover:
        return cls(
            str(data["topic"]),
            int(data["partition"]),
            str(data["from_process"]),
            data.get("from_member"),
            str(data["to_process"]),
            data.get("to_member"),
            float(data["start_mono"]),
            float(data["end_mono"]),
            float(data["handover_s"]),
            bool(data["left"]),
        )


@dataclass(frozen=True, slots=True)
class LagPoint:
    """The group's offset lag (summed over its partitions) at one point of the run's clock."""

    mono: float
    lag: int


@dataclass(frozen=True, slots=True)
class Consumption:
    """Consumer-side availability (docs/audit.md, "Consumer side"): per partition its longest stall, the
    end-to-end latency over the whole run, the group's lag series, per partition its longest handover;
    ``service_gaps``: per input partition of a service between two topics (read by no recorded group, its
    values reaching the group through another topic) its longest stall. Empty when the group delivered
    nothing."""

    gaps: tuple[ConsumeGap, ...] = ()
    e2e: LatencyStats = NO_LATENCY
    lag: tuple[LagPoint, ...] = ()
    handovers: tuple[Handover, ...] = ()
    service_gaps: tuple[ConsumeGap, ...] = ()

    def longest_gap(self) -> ConsumeGap | None:
        """The group-wide longest stall (ties: the earliest, then by topic and partition)."""
        return _longest(self.gaps)

    def longest_service_gap(self) -> ConsumeGap | None:
        """The longest stall of any input partition of a service (ties as :meth:`longest_gap`)."""
        return _longest(self.service_gaps)

    def longest_stall(self) -> ConsumeGap | None:
        """The longest stall of the group's partitions and a service's input partitions together (ties as
        :meth:`longest_gap`): the consumer side's worst figure."""
        return _longest((*self.gaps, *self.service_gaps))

    def longest_handover(self) -> Handover | None:
        """The longest handover of any partition (ties: the earliest, then by topic and partition)."""
        return min(
            self.handovers, key=lambda h: (-h.handover_s, h.start_mono, h.topic, h.partition), default=None
        )

    def max_lag(self) -> LagPoint | None:
        """The series' highest point (the earliest of equal ones)."""
        return min(self.lag, key=lambda p: (-p.lag, p.mono), default=None)

    def to_dict(self) -> dict[str, Any]:
        gap, handover = self.longest_gap(), self.longest_handover()
        return {
            "longest_gap_s": gap.gap_s if gap else None,
            "longest_gap": gap.to_dict() if gap else None,
            "gaps": [g.to_dict() for g in self.gaps],
            "e2e": self.e2e.to_dict(),
            "lag": [[p.mono, p.lag] for p in self.lag],
            "longest_handover_s": handover.handover_s if handover else None,
            "handovers": [h.to_dict() for h in self.handovers],
            "service_gaps": [g.to_dict() for g in self.service_gaps],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Consumption:
        """Inverse of :meth:`to_dict` (the derived ``longest_*`` keys are recomputed); ``None`` — an
        ``audit.json`` written before the consumer side was measured — is an empty one."""
        if not data:
            return NO_CONSUMPTION
        return cls(
            tuple(ConsumeGap.from_dict(g) for g in data.get("gaps", ())),
            LatencyStats.from_dict(data.get("e2e")),
            tuple(LagPoint(float(m), int(n)) for m, n in data.get("lag", ())),
            tuple(Handover.from_dict(h) for h in data.get("handovers", ())),
            tuple(ConsumeGap.from_dict(g) for g in data.get("service_gaps", ())),
        )


NO_CONSUMPTION: Final = Consumption()


def _longest(gaps: Iterable[ConsumeGap]) -> ConsumeGap | None:
    return min(gaps, key=lambda g: (-g.gap_s, g.start_mono, g.topic, g.partition), default=None)


@dataclass(frozen=True, slots=True)
class Availability:
    """Produce availability — the longest gap without a successful ack, one entry per fault window — and
    the consumer side (``consumer``)."""

    longest_outage_s: float | None
    outage_start_mono: float | None
    outage_end_mono: float | None
    windows: tuple[FaultWindow, ...] = ()
    consumer: Consumption = NO_CONSUMPTION

    def to_dict(self) -> dict[str, Any]:
        return {
            "longest_outage_s": self.longest_outage_s,
            "outage_start_mono": self.outage_start_mono,
            "outage_end_mono": self.outage_end_mono,
            "windows": [w.to_dict() for w in self.windows],
            "consumer": self.consumer.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class Totals:
    """Counts of what the audit looked at."""

    sends: int
    acked: int
    failed: int
    indeterminate: int
    log_records: int
    deliveries: int
    expired: int = 0
    """Acknowledged values the log no longer holds because retention or DeleteRecords removed them."""
    compacted: int = 0
    """Acknowledged values the cleaner removed because a later value of their key superseded them."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "sends": self.sends,
            "acked": self.acked,
            "failed": self.failed,
            "indeterminate": self.indeterminate,
            "log_records": self.log_records,
            "deliveries": self.deliveries,
            "expired": self.expired,
            "compacted": self.compacted,
        }


@dataclass(frozen=True, slots=True)
class Removal:
    """What a topic's log policy removed from one partition, and why the audit may say so: the policy
    recorded for the topic (``None`` where none was), the partition's log start offset at the end of the
    run (``log_start``: the drain's and the samples' greatest), how far ``DeleteRecords`` moved it
    (``deleted_to``), and the acknowledged values counted ``expired``, ``compacted`` and
    ``expired_unread`` there (docs/audit.md, "What Kafka removes on purpose")."""

    topic: str
    partition: int
    cleanup_policy: str | None
    retention_ms: int | None
    retention_bytes: int | None
    delete_retention_ms: int | None
    log_start: int | None
    deleted_to: int | None
    expired: int
    compacted: int
    expired_unread: int

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Removal:
        values: dict[str, Any] = {f.name: data.get(f.name) for f in fields(cls)}
        return cls(**values)


@dataclass(frozen=True, slots=True)
class AuditFacts:
    """What one engine established about one run. ``problems`` lists the facts it could *not* establish
    (sorted); any problem makes the verdict ``unknown``."""

    run_id: str
    anomalies: tuple[tuple[str, AnomalyReport], ...]
    availability: Availability
    totals: Totals
    problems: tuple[str, ...] = field(default=())
    removals: tuple[Removal, ...] = field(default=())
    """Partitions the log policy removed acknowledged values from, by (topic, partition)."""

    def __post_init__(self) -> None:
        names = tuple(name for name, _ in self.anomalies)
        _need(names == ANOMALIES, self, "anomalies", f"one report per anomaly in order {ANOMALIES}", names)
        _need(
            self.problems == tuple(sorted(set(self.problems))),
            self,
            "problems",
            "sorted, unique",
            self.problems,
        )

    def anomaly(self, name: str) -> AnomalyReport:
        """The report of one anomaly by name."""
        for candidate, report in self.anomalies:
            if candidate == name:
                return report
        raise InvalidAuditInput(f"anomaly: expected one of {', '.join(ANOMALIES)}; got {name!r}")

    def counts(self) -> dict[str, int]:
        """Anomaly name -> count."""
        return {name: report.count for name, report in self.anomalies}

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "problems": list(self.problems),
            "totals": self.totals.to_dict(),
            "anomalies": {name: report.to_dict() for name, report in self.anomalies},
            "availability": self.availability.to_dict(),
            "removals": [r.to_dict() for r in self.removals],
        }


def make_report(
    examples: list[Example],
    count: int,
    max_examples: int,
    by_producer: Mapping[str, int] | None = None,
    ranges: Iterable[PartitionRange] | None = None,
) -> AnomalyReport:
    """An :class:`AnomalyReport` keeping the first ``max_examples`` of ``examples`` in sort-key order.
    ``by_producer`` (the count per producer) and ``ranges`` (per topic-partition): None when ``examples``
    are every instance, which they are then counted from."""
    if by_producer is None:
        by_producer = Counter(p for e in examples if (p := producer_of(e.value_id)) is not None)
    return AnomalyReport(
        count,
        tuple(sorted(examples, key=Example.sort_key)[:max_examples]),
        tuple(sorted((p, n) for p, n in by_producer.items() if n)),
        partition_ranges(examples) if ranges is None else tuple(sorted(ranges, key=PartitionRange.sort_key)),
    )


def nearest_rank(sorted_values: list[float], percentile: int) -> float | None:
    """The nearest-rank percentile: the value of rank ``ceil(p * n / 100)`` (integer arithmetic, so both
    engines pick the same element)."""
    n = len(sorted_values)
    if n == 0:
        return None
    rank = (percentile * n + 99) // 100
    return sorted_values[max(rank, 1) - 1]


Mark = tuple[float, int, str, str | None]
"""A delivery or a revoke / lost callback as the handovers need it: ``(mono, index, process, member)``."""


def longest_handover(
    topic: str, partition: int, moves: Iterable[tuple[Mark, Mark]], leaves: Iterable[Mark]
) -> Handover | None:
    """The longest handover of one partition (docs/audit.md, "Consumer side"). ``moves``: each delivery by
    another owner than the partition's previous delivery, as ``(previous delivery, this delivery)``;
    ``leaves``: the revoke / lost callbacks that list the partition. A handover starts at the previous
    owner's first such callback between the two deliveries, else at its last delivery. Both engines call
    this (the Spark job on the driver: owner changes and callbacks are few)."""
    callbacks = list(leaves)
    best: tuple[tuple[float, float, float, int], Handover] | None = None
    for (p_mono, p_index, p_process, p_member), (mono, index, process, member) in moves:
        left = [
            m
            for m, i, by, by_member in callbacks
            if (by, by_member) == (p_process, p_member) and (p_mono, p_index) < (m, i) < (mono, index)
        ]
        start = min(left) if left else p_mono
        found = Handover(
            topic, partition, p_process, p_member, process, member, start, mono, mono - start, bool(left)
        )
        key = (-found.handover_s, start, mono, index)
        if best is None or key < best[0]:
            best = (key, found)
    return best[1] if best else None


def lag_grid(start: float, end: float) -> tuple[int, float]:
    """The lag series' points from ``start`` (the group's first delivery) to ``end`` (its last event):
    ``(count, step)``; point ``i`` is at ``start + i * step``."""
    n = LAG_POINTS if end > start else 1
    return n, ((end - start) / (n - 1) if n > 1 else 0.0)


def lag_point(mono: float, start: float, end: float, step: float, n: int) -> int | None:
    """The first point of the lag series that counts an event at ``mono``: ``ceil((mono - start) / step)``
    within ``[0, n - 1]``; ``None`` after ``end``. Both engines use this formula, so they bucket alike."""
    if mono > end:
        return None
    if step == 0.0:
        return 0
    return min(max(math.ceil((mono - start) / step), 0), n - 1)


@dataclass(frozen=True, slots=True)
class TxnAttempt:
    """One transaction attempt of a producer process (docs/audit.md, "Transactions").

    ``att`` identifies it in its run: the record index of its end marker, or of its begin when no end was
    recorded. ``begin`` is ``None`` for an end with no begin recorded before it (such an attempt has no
    span). Its sends are the process's ``send_invoke`` events strictly between ``begin`` and ``close`` (its
    end or the process's next ``begin``, whichever is first; ``None``: the end of the history).
    """

    att: int
    process: str
    begin: int | None
    close: int | None
    recorded: TxnRecorded


TxnMarkerRow = tuple[int, str, str, str, str, str | None]
"""A ``txn`` event as the attempts need it: ``(index, process, transactional_id, action, outcome, error)``."""


def txn_attempts(markers: Iterable[TxnMarkerRow]) -> list[TxnAttempt]:
    """One run's transaction attempts from its ``txn`` markers, ordered by ``att``. Both engines pair them
    with this function (the Spark job on the driver: markers are few)."""
    open_begin: dict[tuple[str, str], int] = {}
    begins: dict[str, list[int]] = defaultdict(list)
    found: list[tuple[int, str, int | None, int | None, TxnRecorded]] = []
    for index, process, txn_id, action, outcome, error in sorted(markers):
        key = (process, txn_id)
        if action == "begin":
            if outcome != "ok":
                continue  # begin_transaction() failed: nothing was begun
            if key in open_begin:  # the previous attempt's end was never recorded
                earlier = open_begin[key]
                found.append((earlier, process, earlier, None, "unknown"))
            open_begin[key] = index
            begins[process].append(index)
            continue
        begin = open_begin.pop(key, None)
        found.append((index, process, begin, index, _recorded(action, outcome, error)))
    found.extend((begin, process, begin, None, "unknown") for (process, _), begin in open_begin.items())
    attempts = []
    for att, process, begin, end, recorded in found:
        close = None
        if begin is not None:
            of_process = begins[process]
            later = bisect.bisect_right(of_process, begin)
            bounds = [
                x for x in (end, of_process[later] if later < len(of_process) else None) if x is not None
            ]
            close = min(bounds) if bounds else None
        attempts.append(TxnAttempt(att, process, begin, close, recorded))
    return sorted(attempts, key=lambda a: a.att)


def _recorded(action: str, outcome: str, error: str | None) -> TxnRecorded:
    if outcome == "ok":
        return "committed" if action == "commit" else "aborted"
    return "fenced" if error in FENCED_ERRORS else "unknown"


def attempt_state(recorded: TxnRecorded, observed_committed: bool, observed_aborted: bool) -> TxnState:
    """An attempt's outcome: a recorded commit or abort; else what the log shows (a record of its sends read
    at read_committed: committed), a fenced end (aborted), the log again (a record of its sends observed
    aborted), else indeterminate."""
    if recorded == "committed" or (recorded != "aborted" and observed_committed):
        return "committed"
    if recorded in ("aborted", "fenced") or observed_aborted:
        return "aborted"
    return "indeterminate"
