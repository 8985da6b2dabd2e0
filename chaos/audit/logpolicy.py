"""What Kafka removes on purpose: each topic's log policy and each partition's log start offset, and the
one rule both engines apply to tell a removal from a loss (docs/audit.md, "What Kafka removes on purpose").

An acknowledged value the log no longer holds, at its earliest acknowledged position ``(topic, partition,
offset)``, is

- **expired** when ``offset`` is below the partition's log start offset at the end of the run and the topic
  deletes by time or size, or a ``DeleteRecords`` call moved the start past it;
- **compacted** when the topic is compacted, the value has a key, and the latest acknowledged record of that
  key in the partition belongs to another value — or is this value's own tombstone, appended at least
  ``delete.retention.ms`` before the partition was drained (a tombstone may go after that long);
- lost otherwise (``lost_acked``).

The partition-level facts are few: both engines build them with :meth:`LogPolicies.build` on the driver.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Literal

from chaos.audit.facts import Removal

RemovalKind = Literal["expired", "compacted"]
REMOVAL_KINDS: Final[tuple[str, ...]] = ("expired", "compacted")
"""The names of what a policy removed; each is a total of the facts, not an anomaly."""

Partition = tuple[str, int]
PolicyRow = tuple[str, str, int, int, int]
"""``(topic, cleanup_policy, retention_ms, retention_bytes, delete_retention_ms)``, as recorded."""
StartRow = tuple[str, int, int, str]
"""``(topic, partition, offset, action)`` of a ``log_start`` event."""
DrainRow = tuple[str, int, str, int | None, float]
"""``(topic, partition, outcome, low_offset, ts)`` of a ``drain_end`` event."""


@dataclass(frozen=True, slots=True)
class TopicRules:
    """One topic's recorded policy."""

    cleanup_policy: str
    retention_ms: int
    retention_bytes: int
    delete_retention_ms: int

    @property
    def compacts(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @property
    def deletes(self) -> bool:
        limited = self.retention_ms >= 0 or self.retention_bytes >= 0
        return "delete" in self.cleanup_policy.split(",") and limited


@dataclass(frozen=True, slots=True)
class PartitionEnd:
    """A partition at the end of the run: its log start offset (the greatest the drain read or a sample or
    ``DeleteRecords`` recorded), how far ``DeleteRecords`` moved it, and when it was last drained."""

    log_start: int | None
    deleted_to: int | None
    drained_ts: float | None


@dataclass(frozen=True, slots=True)
class LogPolicies:
    """One run's topics' policies and partitions' log starts."""

    topics: Mapping[str, TopicRules]
    partitions: Mapping[Partition, PartitionEnd]

    @classmethod
    def build(
        cls, policies: Iterable[PolicyRow], starts: Iterable[StartRow], drains: Iterable[DrainRow]
    ) -> LogPolicies:
        """From the run's ``topic_policy`` rows in record order (the last one of a topic holds), its
        ``log_start`` rows and its ``drain_end`` rows."""
        topics = {t: TopicRules(c, r_ms, r_bytes, d_ms) for t, c, r_ms, r_bytes, d_ms in policies}
        start: dict[Partition, int] = {}
        deleted: dict[Partition, int] = {}
        drained: dict[Partition, float] = {}
        for topic, partition, offset, action in starts:
            key = (topic, partition)
            start[key] = max(start.get(key, offset), offset)
            if action == "deleted":
                deleted[key] = max(deleted.get(key, offset), offset)
        for topic, partition, outcome, low, ts in drains:
            key = (topic, partition)
            drained[key] = max(drained.get(key, ts), ts)
            if outcome == "ok" and low is not None:
                start[key] = max(start.get(key, low), low)
        keys = set(start) | set(drained)
        partitions = {k: PartitionEnd(start.get(k), deleted.get(k), drained.get(k)) for k in keys}
        return cls(topics, partitions)

    def active(self) -> bool:
        """Whether anything can have been removed: a compacted topic, or a log start above 0."""
        return any(r.compacts for r in self.topics.values()) or any(
            (p.log_start or 0) > 0 for p in self.partitions.values()
        )

    def compacting(self) -> bool:
        return any(r.compacts for r in self.topics.values())

    def compacts(self, topic: str) -> bool:
        rules = self.topics.get(topic)
        return rules is not None and rules.compacts

    def deletes(self, topic: str) -> bool:
        rules = self.topics.get(topic)
        return rules is not None and rules.deletes

    def expired(self, topic: str, partition: int, offset: int) -> bool:
        """Whether retention or ``DeleteRecords`` removed the record at ``offset``."""
        end = self.partitions.get((topic, partition))
        if end is None or end.log_start is None or offset >= end.log_start:
            return False
        rules = self.topics.get(topic)
        return (rules is not None and rules.deletes) or (
            end.deleted_to is not None and offset < end.deleted_to
        )

    def tombstones_gone_after(self, topic: str, partition: int) -> float | None:
        """The wall-clock time before which an appended tombstone may have been removed by the end of the
        run (its last drain minus ``delete.retention.ms``); ``None`` when not known."""
        rules = self.topics.get(topic)
        end = self.partitions.get((topic, partition))
        if rules is None or end is None or end.drained_ts is None:
            return None
        return end.drained_ts - rules.delete_retention_ms / 1000.0

    def removed(
        self,
        value_id: str,
        at: tuple[str, int, int | None],
        key: str | None,
        latest: str | None,
        tombstone: bool,
        ack_ts: float,
    ) -> RemovalKind | None:
        """Why an acknowledged value absent from the log is absent, or ``None``: lost. ``at``: its
        earliest acknowledged position; ``latest``: the value id of the latest acknowledged record of
        ``key`` in that partition."""
        topic, partition, offset = at
        if offset is None:
            return None
        if self.expired(topic, partition, offset):
            return "expired"
        if not self.compacts(topic) or key is None or latest is None:
            return None
        if latest != value_id:
            return "compacted"
        gone_after = self.tombstones_gone_after(topic, partition)
        if tombstone and gone_after is not None and ack_ts <= gone_after:
            return "compacted"
        return None

    def removals(self, counts: Mapping[tuple[str, int, str], int]) -> tuple[Removal, ...]:
        """The :class:`Removal` of every partition with a count (``(topic, partition, name) -> n``, names
        ``expired``, ``compacted``, ``expired_unread``), sorted."""
        where = sorted({(t, p) for t, p, _ in counts})
        result = []
        for topic, partition in where:
            rules = self.topics.get(topic)
            end = self.partitions.get((topic, partition), PartitionEnd(None, None, None))
            result.append(
                Removal(
                    topic,
                    partition,
                    rules.cleanup_policy if rules else None,
                    rules.retention_ms if rules else None,
                    rules.retention_bytes if rules else None,
                    rules.delete_retention_ms if rules else None,
                    end.log_start,
                    end.deleted_to,
                    counts.get((topic, partition, "expired"), 0),
                    counts.get((topic, partition, "compacted"), 0),
                    counts.get((topic, partition, "expired_unread"), 0),
                )
            )
        return tuple(result)


NO_POLICIES: Final = LogPolicies({}, {})
