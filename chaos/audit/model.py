"""What the audit takes in and gives back: topic records, anomaly examples, availability, the facts.

Both engines (:mod:`chaos.audit.reference` and :mod:`chaos.audit.sparkjob`) return an :class:`AuditFacts`
and must return *equal* ones for the same input; docs/audit.md defines every field.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from chaos.errors import AuditError

Isolation = Literal["read_uncommitted", "read_committed"]
ISOLATION_LEVELS: Final[tuple[str, ...]] = ("read_uncommitted", "read_committed")

ANOMALIES: Final[tuple[str, ...]] = (
    "lost_acked",
    "lost_indeterminate",
    "unseen_by_group",
    "duplicate_in_log",
    "duplicate_delivery_after_rebalance",
    "duplicate_delivery_other",
    "reordered",
    "inconsistent_offsets",
    "aborted_read",
    "unexpected",
)
"""Every anomaly name, in report order."""

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
class AnomalyReport:
    """How many instances of one anomaly, and the first ``max_examples`` of them in
    :meth:`Example.sort_key` order."""

    count: int
    examples: tuple[Example, ...] = ()

    def __post_init__(self) -> None:
        _need(_is_int(self.count), self, "count", "an int >= 0", self.count)
        _need(
            len(self.examples) <= self.count,
            self,
            "examples",
            f"at most count={self.count} items",
            len(self.examples),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "examples": [e.to_dict() for e in self.examples]}


@dataclass(frozen=True, slots=True)
class LatencyStats:
    """Ack latencies (ms) of the ok sends whose outcome fell in one phase; nearest-rank percentiles."""

    count: int
    p50_ms: float | None
    p99_ms: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "p50_ms": self.p50_ms, "p99_ms": self.p99_ms}


@dataclass(frozen=True, slots=True)
class FaultWindow:
    """One fault from its inject to its heal (``heal_mono`` ``None``: never healed), with the ack latency
    before / during / after it and how long producing and consuming took to resume after the heal."""

    fault: str
    target: str
    inject_mono: float
    heal_mono: float | None
    before: LatencyStats
    during: LatencyStats
    after: LatencyStats
    heal_to_first_ack_s: float | None
    heal_to_first_delivery_s: float | None

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
        }


@dataclass(frozen=True, slots=True)
class Availability:
    """Produce availability: the longest gap without a successful ack, and one entry per fault window."""

    longest_outage_s: float | None
    outage_start_mono: float | None
    outage_end_mono: float | None
    windows: tuple[FaultWindow, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "longest_outage_s": self.longest_outage_s,
            "outage_start_mono": self.outage_start_mono,
            "outage_end_mono": self.outage_end_mono,
            "windows": [w.to_dict() for w in self.windows],
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "sends": self.sends,
            "acked": self.acked,
            "failed": self.failed,
            "indeterminate": self.indeterminate,
            "log_records": self.log_records,
            "deliveries": self.deliveries,
        }


@dataclass(frozen=True, slots=True)
class AuditFacts:
    """What one engine established about one run. ``problems`` lists the facts it could *not* establish
    (sorted); any problem makes the verdict ``unknown``."""

    run_id: str
    anomalies: tuple[tuple[str, AnomalyReport], ...]
    availability: Availability
    totals: Totals
    problems: tuple[str, ...] = field(default=())

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
        }


def make_report(examples: list[Example], count: int, max_examples: int) -> AnomalyReport:
    """An :class:`AnomalyReport` keeping the first ``max_examples`` of ``examples`` in sort-key order."""
    return AnomalyReport(count, tuple(sorted(examples, key=Example.sort_key)[:max_examples]))


def nearest_rank(sorted_values: list[float], percentile: int) -> float | None:
    """The nearest-rank percentile: the value of rank ``ceil(p * n / 100)`` (integer arithmetic, so both
    engines pick the same element)."""
    n = len(sorted_values)
    if n == 0:
        return None
    rank = (percentile * n + 99) // 100
    return sorted_values[max(rank, 1) - 1]


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
