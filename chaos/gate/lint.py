"""The gate's lint, run before any container starts: librdkafka validates every setting, then a table of
rules derives the guarantee the configuration can keep.

1. :func:`check_clients` builds a ``confluent_kafka.Producer`` / ``Consumer`` from each side's settings
   (:mod:`chaos.workload.clientconf`: a dummy ``bootstrap.servers``, nothing contacted) and turns librdkafka's
   refusals — an unknown key, an invalid value, a refused combination (:data:`REFUSALS`), a key of the
   other side that librdkafka would ignore — into :class:`Problem` s naming the key and its file/line.
2. :func:`derive` is pure: each :class:`Rule` of :data:`RULES` is a condition on the effective settings
   (:class:`View`: the file's values over librdkafka's and Kafka's defaults), the audit anomalies it makes
   possible, the offending keys and the catalog cases that show it. The guarantees a rule breaks follow
   from the verdict policy (:data:`chaos.audit.verdict.FATAL`), so the lint and the audit judge alike.

The lint predicts the full gate's verdict from configuration alone: a rule breaks a guarantee only when
the anomaly it allows is one the catalog's faults provoke (the rule's cases); risks no catalog fault
shows (a lost disk) and availability (which the thresholds judge) are findings that break nothing.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Final, cast

from chaos.audit.facts import ANOMALIES
from chaos.audit.verdict import FATAL
from chaos.gate.cases import CONSUMER_OUTAGE, outage_cases
from chaos.gate.gatefile import (
    ALIASES,
    CASE_ID,
    IGNORED_KEYS,
    NOT_SET_SOURCE,
    TOPIC_KEYS,
    GateFile,
    GateFileError,
    GateTraffic,
    Origin,
    Setting,
    Side,
    canonical,
    flag,
)
from chaos.run.terms import GUARANTEES, Guarantee
from chaos.workload.clientconf import OTHER_SIDE, key_fix, refusals

LIBRDKAFKA_DEFAULTS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "acks": "all",
        "enable.idempotence": "false",
        "retries": "2147483647",
        "max.in.flight.requests.per.connection": "1000000",
        "isolation.level": "read_committed",
        "enable.auto.commit": "true",
        "enable.auto.offset.store": "true",
        "message.max.bytes": "1000000",
        "batch.size": "1000000",
    }
)
"""librdkafka's defaults of the settings the rules read (they differ from the Java client's: DESIGN.md)."""
_CONSUMER_KEYS: Final = frozenset({"isolation.level", "enable.auto.commit", "enable.auto.offset.store"})
_KNOWN_KEYS: Final = (*LIBRDKAFKA_DEFAULTS, *(n for names in ALIASES.values() for n in names))
"""Besides :data:`chaos.workload.clientconf.KNOWN_KEYS`, what a misspelled key is compared with."""
JAVA_ONLY: Final[Mapping[str, str]] = MappingProxyType(
    {
        "max.request.size": "message.max.bytes",
        "buffer.memory": "queue.buffering.max.kbytes",
        "fetch.max.wait.ms": "fetch.wait.max.ms",
    }
)
"""Java client settings librdkafka does not have, and the librdkafka setting that does the same work."""
BATCH_OVERHEAD: Final = 100
"""Bytes a one-record batch adds to its value: the batch header (61), the record's own fields, its key and
the value-id header."""


@dataclass(frozen=True)
class View:
    """The effective settings the rules read, each a :class:`Setting` with its origin: the gate file's
    value, else librdkafka's or Kafka's default; keys of an absent consumer are absent."""

    settings: Mapping[str, Setting]
    has_consumer: bool
    guarantee: str = "at_least_once"
    traffic: GateTraffic | None = None
    outages: tuple[tuple[str, float], ...] = ()
    """The gate's cases (:func:`~chaos.gate.cases.outage_cases`) with their group's longest outage in
    seconds, longest first."""

    @classmethod
    def of(cls, gate: GateFile) -> View:
        found: dict[str, Setting] = {}
        for name, default in LIBRDKAFKA_DEFAULTS.items():
            consumer = name in _CONSUMER_KEYS
            if consumer and gate.consumer is None:
                continue
            side = gate.consumer.settings if consumer and gate.consumer else gate.producer
            found[name] = side.get(name) or Setting(name, default, Origin("librdkafka default"))
        tid = gate.producer.get("transactional.id")
        if tid is not None:
            found["transactional.id"] = tid
        if gate.consumer is not None:
            found["commit"] = gate.consumer.commit
            found["transform"] = gate.consumer.transform
        for setting in gate.topic:
            found[setting.key] = setting
        traffic = gate.traffic
        if traffic is not None and traffic.max_size is not None:
            given = traffic.setting("size") or traffic.setting("sizes")
            origin = given.origin if given is not None else Origin("traffic")
            found["traffic.size"] = Setting("traffic.size", str(traffic.max_size), origin)
        outages = sorted(
            ((case, CONSUMER_OUTAGE[case].seconds) for case in outage_cases(gate)), key=lambda o: -o[1]
        )
        return cls(
            MappingProxyType(found), gate.consumer is not None, gate.guarantee, traffic, tuple(outages)
        )

    def setting(self, name: str) -> Setting:
        """The setting of ``name``; a placeholder whose origin is ``not set`` when there is none."""
        return self.settings.get(name) or Setting(name, "", Origin(NOT_SET_SOURCE))

    def number(self, name: str) -> int:
        setting = self.setting(name)
        try:
            return int(setting.value)
        except ValueError:
            raise GateFileError(
                [f"{setting.origin}: {setting.key}: expected an integer; got {setting.value!r}"]
            ) from None

    @property
    def acks(self) -> int:
        """-1 for all, else the number of acknowledgements."""
        setting = self.setting("acks")
        value = -1 if setting.value.strip().lower() == "all" else self.number("acks")
        if value not in (-1, 0, 1):
            raise GateFileError(
                [
                    f"{setting.origin}: {setting.key}={setting.value}: Kafka brokers accept acks 0, 1 or all "
                    "(-1) only (INVALID_REQUIRED_ACKS otherwise); use acks=all"
                ]
            )
        return value

    @property
    def idempotent(self) -> bool:
        """``enable.idempotence=true``, or a ``transactional.id`` (which librdkafka requires it for)."""
        return flag(self.settings.get("enable.idempotence"), False) or self.transactional

    @property
    def transactional(self) -> bool:
        return "transactional.id" in self.settings

    @property
    def retries(self) -> int:
        return self.number("retries")

    @property
    def rf(self) -> int:
        return self.number("replication_factor")

    @property
    def min_isr(self) -> int:
        return self.number("min.insync.replicas")

    @property
    def unclean(self) -> bool:
        return flag(self.settings.get("unclean.leader.election.enable"), False)

    @property
    def auto_commit_on_poll(self) -> bool:
        """librdkafka commits what ``poll()`` returned: auto commit with the automatic offset store."""
        return (
            self.has_consumer
            and flag(self.settings.get("enable.auto.commit"), True)
            and flag(self.settings.get("enable.auto.offset.store"), True)
        )

    @property
    def commit(self) -> str | None:
        return self.settings["commit"].value if self.has_consumer else None

    @property
    def transform(self) -> bool:
        return self.has_consumer and self.settings["transform"].value == "true"

    @property
    def read_uncommitted(self) -> bool:
        return self.has_consumer and self.settings["isolation.level"].value == "read_uncommitted"

    @property
    def policy(self) -> str:
        """The topic's ``cleanup.policy`` (``delete``, ``compact`` or ``compact,delete``)."""
        return self.setting("cleanup.policy").value or "delete"

    @property
    def expiring(self) -> tuple[str, ...]:
        """The gate's cases whose group outage is longer than the topic's time retention, longest first:
        records they leave unread expire (none when the topic does not delete by time)."""
        if "delete" not in self.policy or "retention.ms" not in self.settings:
            return ()
        retention = self.number("retention.ms")
        if retention < 0:
            return ()
        return tuple(case for case, seconds in self.outages if seconds * 1000 > retention)

    @property
    def record_size(self) -> int | None:
        """The largest record the traffic sends, with its batch's overhead (``None``: no sized values)."""
        setting = self.settings.get("traffic.size")
        return int(setting.value) + BATCH_OVERHEAD if setting is not None else None

    def longest_outage(self) -> tuple[str, ...]:
        """The gate's case whose group falls furthest behind (for a compacted topic's finding)."""
        return self.outages[0][:1] if self.outages else ()


@dataclass(frozen=True)
class Rule:
    """One row of the lint's table.

    :param when: the condition, in words (the docs' table); ``test`` is the same condition in code.
    :param anomalies: the audit anomalies the condition makes possible under the rule's cases' faults; the
        guarantees it breaks are those whose policy forbids one of them. None: a finding that breaks no
        guarantee (availability, a risk no catalog fault shows).
    :param keys: the settings at fault (shown with their values and origins).
    :param cases: the catalog cases that show it.
    """

    id: str
    title: str
    when: str
    test: Callable[[View], bool]
    keys: tuple[str, ...]
    anomalies: tuple[str, ...]
    effect: str
    why: str
    cases: tuple[str, ...]
    fix: str
    shown_by: Callable[[View], tuple[str, ...]] | None = None
    """The cases that show it for this configuration, when they depend on it (the gate's cases whose
    outage is longer than the retention); ``cases`` is what the rules table lists."""

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z][a-z0-9_]+", self.id):
            raise GateFileError([f"Rule.id: expected snake_case; got {self.id!r}"])
        unknown = [a for a in self.anomalies if a not in ANOMALIES]
        if unknown:
            raise GateFileError(
                [f"Rule {self.id}: unknown anomalies {unknown}; expected names of {ANOMALIES}"]
            )
        if not self.cases or not all(CASE_ID.fullmatch(c) for c in self.cases):
            raise GateFileError(
                [f"Rule {self.id}: cases must be catalog ids such as 'L2'; got {self.cases!r}"]
            )
        for name in ("title", "when", "effect", "why", "fix"):
            if not getattr(self, name).strip():
                raise GateFileError([f"Rule {self.id}: {name} must be a non-empty str"])

    @property
    def breaks(self) -> tuple[Guarantee, ...]:
        """The guarantees whose verdict policy forbids an anomaly of this rule."""
        found = set(self.anomalies)
        return tuple(cast(Guarantee, g) for g in GUARANTEES if found & FATAL[g])


def _commits_outside_transaction(v: View) -> bool:
    return v.commit != "transaction" if v.has_consumer else not v.transactional


RULES: Final[tuple[Rule, ...]] = (
    Rule(
        id="acks_0",
        title="acks=0: fire and forget",
        when="acks=0",
        test=lambda v: v.acks == 0,
        keys=("acks",),
        anomalies=("lost_acked",),
        effect="loss",
        why=(
            "librdkafka reports a send delivered once it is written to the socket: a leader that is cut off "
            "or dies never had it, and nothing is retried (L1: 564 of 1665 sends lost, every one reported ok)"
        ),
        cases=("L1",),
        fix="acks=all with enable.idempotence=true; treat the delivery report as the only success signal",
    ),
    Rule(
        id="acks_1",
        title="acks=1: the leader acknowledges alone",
        when="acks=1 and replication_factor > 1",
        test=lambda v: v.acks == 1 and v.rf > 1,
        keys=("acks",),
        anomalies=("lost_acked", "inconsistent_offsets"),
        effect="loss",
        why=(
            "a write is acknowledged before any follower has it; if the leader dies while its followers lag "
            "(still in the ISR), one of them is elected cleanly and the acknowledged writes are truncated; "
            "the new leader reuses their offsets (L2: 61-88 acknowledged writes lost, as many "
            "inconsistent_offsets; DF1: the same with the leader lost to a full disk). min.insync.replicas "
            "does not apply to acks=1"
        ),
        cases=("L2", "DF1", "RN1"),
        fix="acks=all (librdkafka's default) with min.insync.replicas=2",
    ),
    Rule(
        id="unclean_election",
        title="unclean leader election",
        when="unclean.leader.election.enable=true and replication_factor > 1",
        test=lambda v: v.unclean and v.rf > 1,
        keys=("unclean.leader.election.enable",),
        anomalies=("lost_acked", "inconsistent_offsets"),
        effect="loss",
        why=(
            "when no in-sync replica is left, a replica that fell out of the ISR is elected: what only the "
            "old ISR had is truncated and its offsets reused (ISR2/L4: 217-309 acknowledged writes lost per "
            "run); with acks=1 or min.insync.replicas=1 a single crash after a follower lags is enough"
        ),
        cases=("ISR2", "L4", "RN1"),
        fix="unclean.leader.election.enable=false (Kafka's default since 0.11)",
    ),
    Rule(
        id="retries_duplicate",
        title="retries without idempotence duplicate",
        when="enable.idempotence=false, no transactional.id, retries > 0, acks != 0",
        test=lambda v: not v.idempotent and v.retries > 0 and v.acks != 0,
        keys=("enable.idempotence", "retries"),
        anomalies=("duplicate_in_log", "duplicate_delivery_other"),
        effect="duplicates",
        why=(
            "an ack lost in the network (or timed out) makes librdkafka send the batch again, and the broker "
            "appends it a second time (D1: 6-26 values written twice per run); librdkafka's default retries "
            "is 2147483647"
        ),
        cases=("D1",),
        fix="enable.idempotence=true (acks=all, max.in.flight.requests.per.connection <= 5)",
    ),
    Rule(
        id="retries_reorder",
        title="retries without idempotence reorder",
        when="enable.idempotence=false, no transactional.id, retries > 0, acks != 0 (any max.in.flight)",
        test=lambda v: not v.idempotent and v.retries > 0 and v.acks != 0,
        keys=("enable.idempotence", "retries", "max.in.flight.requests.per.connection"),
        anomalies=("reordered",),
        effect="reordering",
        why=(
            "a batch refused with a retriable error (NOT_ENOUGH_REPLICAS in an ISR dip) is retried after "
            "newer records of the same key were written; measured with max.in.flight 5 and 1 alike (O1: 48 "
            "to 222 values out of order per run) — only idempotence keeps retries in order. A reordered key "
            "fails every guarantee"
        ),
        cases=("O1",),
        fix="enable.idempotence=true (max.in.flight.requests.per.connection <= 5)",
    ),
    Rule(
        id="commit_before_processing",
        title="offsets committed before the records are processed",
        when=(
            "a consumer with enable.auto.commit=true and enable.auto.offset.store=true (librdkafka's "
            "defaults), or commit = before_processing"
        ),
        test=lambda v: v.auto_commit_on_poll or v.commit == "before_processing",
        keys=("enable.auto.commit", "enable.auto.offset.store", "commit"),
        anomalies=("unseen_by_group",),
        effect="loss on a consumer crash",
        why=(
            "librdkafka stores an offset as soon as poll()/consume() returns the record and its auto-commit "
            "timer commits it, processed or not: a consumer killed mid-batch leaves the rest of the batch "
            "committed and never processed (L6)"
        ),
        cases=("L6",),
        fix=(
            "enable.auto.offset.store=false and store_offsets() after processing (commit = "
            "after_processing), or enable.auto.commit=false and commit() after processing"
        ),
    ),
    Rule(
        id="commit_outside_transaction",
        title="offsets committed outside a transaction",
        when="a consumer whose commit is not 'transaction', or no consumer and no transactional.id",
        test=_commits_outside_transaction,
        keys=("commit", "transactional.id"),
        anomalies=("duplicate_delivery_after_rebalance",),
        effect="redelivery after a crash or rebalance",
        why=(
            "a crash, or processing longer than max.poll.interval.ms, hands the partition over at the last "
            "committed offset: what was processed since is delivered again (D3: one batch; MPI1: at most one "
            "batch). Expected under at_least_once and idempotent; exactly_once forbids it"
        ),
        cases=("D3", "MPI1"),
        fix=(
            "for exactly_once: consume-transform-produce with a transactional.id, "
            "send_offsets_to_transaction (commit = 'transaction') and read_committed consumers; otherwise "
            "claim at most idempotent"
        ),
    ),
    Rule(
        id="transform_without_transaction",
        title="consume-transform-produce without a transaction",
        when="consumer.transform = true with commit = after_processing or auto",
        test=lambda v: v.transform and v.commit in ("after_processing", "auto"),
        keys=("transform", "commit", "transactional.id"),
        anomalies=("duplicate_in_log",),
        effect="duplicates in the output",
        why=(
            "a transform killed after producing a batch and before committing its input offsets is "
            "restarted from those offsets and produces the batch again — a new send, so the idempotent "
            "producer does not help (O6: 50 duplicates in the output every run)"
        ),
        cases=("O6",),
        fix=(
            "produce and commit the input offsets in one transaction: transactional.id, "
            "send_offsets_to_transaction, commit = 'transaction'"
        ),
    ),
    Rule(
        id="read_uncommitted",
        title="read_uncommitted consumers of a transactional producer",
        when="a transactional.id and a consumer with isolation.level=read_uncommitted",
        test=lambda v: v.transactional and v.read_uncommitted,
        keys=("isolation.level", "transactional.id"),
        anomalies=("duplicate_delivery_other",),
        effect="aborted records delivered",
        why=(
            "read_uncommitted delivers the records of aborted transactions too: the batch of a transform "
            "killed before its commit and the batch its successor wrote again (O6). librdkafka's default is "
            "read_committed, Java's read_uncommitted"
        ),
        cases=("O6",),
        fix="isolation.level=read_committed (librdkafka's default)",
    ),
    Rule(
        id="retention_shorter_than_outage",
        title="retention shorter than the group's longest outage",
        when=(
            "cleanup.policy has delete and retention.ms (not -1) is below the longest consumer outage of the "
            "gate's cases (chaos.gate.cases.CONSUMER_OUTAGE)"
        ),
        test=lambda v: bool(v.expiring),
        keys=("retention.ms", "cleanup.policy"),
        anomalies=("expired_unread",),
        effect="records removed before the group read them",
        why=(
            "Kafka deletes a segment once its newest record is older than retention.ms — the active segment "
            "too, rolled for it — whether or not the group has read it: what the group had not reached when "
            "its outage began is gone when it comes back, never processed (expired_unread; breaks "
            "at_least_once for the group). Each case's outage is its timeline's (a session timeout, a crash "
            "and restart, slow processing: L6 10 s, MPI1 12 s, ISR2 15 s in the ci profile); production "
            "outages (a deploy, a stuck consumer, a weekend) are longer"
        ),
        cases=("MPI1", "L6", "ISR2"),
        fix=(
            "retention.ms well above the longest consumer outage you plan for (hours to days), with a "
            "consumer-lag alert below it; or more consumer capacity"
        ),
        shown_by=lambda v: v.expiring,
    ),
    Rule(
        id="compaction_latest_value_only",
        title="a compacted topic keeps the latest value of each key, not every record",
        when="cleanup.policy has compact and the claim is at_least_once, idempotent or exactly_once",
        test=lambda v: "compact" in v.policy and v.guarantee != "at_most_once",
        keys=("cleanup.policy", "min.compaction.lag.ms", "delete.retention.ms"),
        anomalies=(),
        effect="superseded values removed",
        why=(
            "the claim is for every record; a compacted topic promises a consumer only the latest value of "
            "each key (and a key's tombstone for delete.retention.ms): the cleaner removes a key's older "
            "values from closed segments, read or not, so a group that falls behind never sees the values "
            "superseded meanwhile (min.compaction.lag.ms keeps only records younger than it). The gate "
            "judges what compaction promises: superseded values are counted compacted, not lost; the latest "
            "acknowledged value of every key must be in the log and read, and nothing else may go missing"
        ),
        cases=("L6", "MPI1"),
        fix=(
            "keep the claim for the latest value per key only (what the run judges); if every record "
            "matters, send the stream to a delete topic and compact a changelog of it, or set "
            "min.compaction.lag.ms above the longest consumer outage you plan for"
        ),
        shown_by=lambda v: v.longest_outage(),
    ),
    Rule(
        id="record_too_large",
        title="records larger than the topic or the producer accepts",
        when=(
            "the largest [traffic] value (size, or the top of sizes) plus 100 bytes of batch overhead is "
            "above the topic's max.message.bytes or the producer's message.max.bytes"
        ),
        test=lambda v: (
            v.record_size is not None
            and v.record_size > min(v.number("max.message.bytes"), v.number("message.max.bytes"))
        ),
        keys=("traffic.size", "max.message.bytes", "message.max.bytes"),
        anomalies=(),
        effect="definite send failures",
        why=(
            "librdkafka fails a message above its message.max.bytes before sending it, and the broker "
            "refuses a batch above the topic's max.message.bytes (MSG_SIZE_TOO_LARGE): every such send "
            "fails, and no retry helps. The audit counts them failed — never acknowledged, so not lost — and "
            "no guarantee is broken, but the application loses those records unless it handles the failed "
            "delivery. With compression the broker checks the compressed batch: the harness's padding "
            "compresses far better than real values, so a run may not show it"
        ),
        cases=("L2",),
        fix=(
            "max.message.bytes (topic) and message.max.bytes (producer) above the largest record plus its "
            "batch overhead, or smaller records (split them, or send a reference to external storage)"
        ),
    ),
    Rule(
        id="request_size_mismatch",
        title="the producer builds batches the topic refuses",
        when=(
            "the producer's message.max.bytes (Java: max.request.size) or batch.size is above the topic's "
            "max.message.bytes"
        ),
        test=lambda v: (
            max(v.number("message.max.bytes"), v.number("batch.size")) > v.number("max.message.bytes")
        ),
        keys=("message.max.bytes", "batch.size", "max.message.bytes"),
        anomalies=(),
        effect="sends refused by the broker",
        why=(
            "librdkafka accepts a record up to its message.max.bytes and fills batches up to batch.size; the "
            "broker refuses a batch above the topic's max.message.bytes (MSG_SIZE_TOO_LARGE) and librdkafka "
            "fails every record in it: records (or full batches under load) between the two limits pass "
            "the client's check and fail at the broker, after the send. The audit counts them failed, so no "
            "guarantee is broken; the application loses them unless it handles the failed delivery"
        ),
        cases=("L2",),
        fix=(
            "message.max.bytes and batch.size at most the topic's max.message.bytes (or raise "
            "max.message.bytes on the topic)"
        ),
    ),
    Rule(
        id="no_spare_replica",
        title="no replica to spare: one broker down stops the writes",
        when="replication_factor = 1, or acks=all with min.insync.replicas >= replication_factor",
        test=lambda v: v.rf == 1 or (v.acks == -1 and v.min_isr >= v.rf),
        keys=("replication_factor", "min.insync.replicas"),
        anomalies=(),
        effect="unavailable",
        why=(
            "with one replica down the partition keeps fewer in-sync replicas than min.insync.replicas: "
            "every acks=all write is refused (NOT_ENOUGH_REPLICAS) until it returns (ISR3); no acknowledged "
            "write is lost — the outage thresholds judge it. Kafka 4.1 caps min.insync.replicas at the "
            "replication factor (measured, O1); with replication_factor = 1 the partition is offline"
        ),
        cases=("ISR3",),
        fix="replication_factor = min.insync.replicas + 1 (e.g. 3 and 2)",
    ),
    Rule(
        id="single_copy",
        title="an acknowledged write may exist on one broker only",
        when="acks != 0 and (replication_factor = 1, or acks=all with min.insync.replicas <= 1)",
        test=lambda v: v.acks != 0 and (v.rf == 1 or (v.acks == -1 and v.min_isr <= 1)),
        keys=("acks", "min.insync.replicas", "replication_factor"),
        anomalies=(),
        effect="single copy",
        why=(
            "once the ISR has shrunk to the leader, acks=all is acknowledged by the leader alone: that "
            "broker's disk holds the only copy until the followers catch up, and the partition is offline "
            "while it is down (ISR2 unclean_off). No catalog fault loses a disk, so no guarantee is failed "
            "here; with unclean election on, see unclean_election"
        ),
        cases=("ISR2",),
        fix="min.insync.replicas=2 with replication_factor=3",
    ),
)
"""The lint's rules, in the order they are reported (docs/gate.md's table is generated from it)."""


@dataclass(frozen=True)
class Refusal:
    """A combination librdkafka refuses at construction; ``fragment`` is part of its message."""

    side: Side
    fragment: str
    keys: tuple[str, ...]
    why: str
    fix: str


REFUSALS: Final[tuple[Refusal, ...]] = (
    Refusal(
        "producer",
        "`max.in.flight` must be set <= 5 when `enable.idempotence` is true",
        ("enable.idempotence", "max.in.flight.requests.per.connection"),
        "the broker keeps the sequence state of 5 batches per partition",
        "max.in.flight.requests.per.connection <= 5",
    ),
    Refusal(
        "producer",
        "`acks` must be set to `all` when `enable.idempotence` is true",
        ("enable.idempotence", "acks"),
        "idempotence needs every in-sync replica to have the batch",
        "acks=all, or leave acks unset (librdkafka's default is all)",
    ),
    Refusal(
        "producer",
        "`retries` must be set >= 1 when `enable.idempotence` is true",
        ("enable.idempotence", "retries"),
        "the idempotent producer recovers by retrying",
        "retries >= 1, or leave retries unset",
    ),
    Refusal(
        "producer",
        "`transactional.id` requires `enable.idempotence=true`",
        ("transactional.id", "enable.idempotence"),
        "transactions are built on the idempotent producer",
        "enable.idempotence=true, or leave it unset (a transactional.id enables it)",
    ),
    Refusal(
        "producer",
        "`message.timeout.ms` must be set <= `transaction.timeout.ms`",
        ("message.timeout.ms", "transaction.timeout.ms"),
        "a message must time out before its transaction does",
        "message.timeout.ms <= transaction.timeout.ms",
    ),
    Refusal(
        "consumer",
        "`max.poll.interval.ms`must be >= `session.timeout.ms`",
        ("max.poll.interval.ms", "session.timeout.ms"),
        "librdkafka checks the poll interval no more often than the session",
        "max.poll.interval.ms >= session.timeout.ms",
    ),
)


@dataclass(frozen=True)
class Problem:
    """A setting librdkafka refused: the keys at fault (with their origins), its message and the fix."""

    side: Side
    settings: tuple[Setting, ...]
    message: str
    fix: str

    def __str__(self) -> str:
        if not self.settings:
            return f"{self.side}: librdkafka refused the settings: {self.message}; {self.fix}"
        where = ", ".join(f"{s.key} ({s.origin})" for s in self.settings)
        return f"{self.side} {where}: {self.message}; {self.fix}"


@dataclass(frozen=True)
class ClientCheck:
    """What librdkafka said about the gate's settings: problems (bad input) and notes."""

    problems: tuple[Problem, ...]
    notes: tuple[str, ...]
    librdkafka: str
    seconds: float


_NAMED: Final = re.compile(r"""["`]([A-Za-z0-9_.-]+)["`]|property ([A-Za-z0-9_.-]+) is""")


def _named(message: str, settings: Mapping[str, Setting]) -> tuple[Setting, ...]:
    """The settings a librdkafka message names (under any alias)."""
    names = {canonical(a or b) for a, b in _NAMED.findall(message)}
    return tuple(s for s in settings.values() if canonical(s.key) in names)


def _is_listed(message: str) -> bool:
    return any(r.fragment in message for r in REFUSALS)


def _key_fix(key: str, message: str) -> str:
    """What to do about a key librdkafka refused alone; a Java-only key gets librdkafka's equivalent."""
    equivalent = JAVA_ONLY.get(key)
    if equivalent is not None and "No such configuration property" in message:
        return (
            f"a Java client setting librdkafka does not have; librdkafka's {equivalent} does that work: "
            f"write {equivalent} instead"
        )
    return key_fix(key, message, _KNOWN_KEYS)


def _check_side(side: Side, settings: tuple[Setting, ...]) -> tuple[list[Problem], list[str]]:
    by_key = {s.key: s for s in settings}
    # a refused combination with a default (max.poll.interval.ms below the default session) is the
    # combination's problem, reported with every key it names below
    found = refusals(side, {s.key: s.value for s in settings}, combination=_is_listed)
    problems = [
        Problem(side, (by_key[key],), alone, _key_fix(key, alone)) for key, alone in found.keys.items()
    ]
    if found.combination is not None:
        error = found.combination
        refusal = next((r for r in REFUSALS if r.fragment in error), None)
        mentioned = error + "".join(f" `{k}`" for k in (refusal.keys if refusal else ()))
        named = _named(mentioned, {k: s for k, s in by_key.items() if k not in found.keys})
        fix = f"{refusal.fix} ({refusal.why})" if refusal else "change the settings it names"
        problems.append(Problem(side, named, error, fix))
    notes: list[str] = []
    for line in found.warnings:
        message = line.split("]: ", 1)[-1]
        other = OTHER_SIDE.search(message)
        if other:
            named = tuple(s for s in settings if canonical(s.key) == canonical(other.group(1)))
            move = "consumer" if other.group(2) == "consumer" else "producer"
            problems.append(Problem(side, named, message, f"move it to [{move}.settings], or remove it"))
        else:
            notes.append(f"{side}: librdkafka: {message}")
    return problems, notes


def check_clients(gate: GateFile) -> ClientCheck:
    """Validate both sides' settings with librdkafka itself (see the module doc)."""
    from confluent_kafka import libversion

    started = time.monotonic()
    problems: list[Problem] = []
    notes: list[str] = []
    sides = [gate.producer] + ([gate.consumer.settings] if gate.consumer else [])
    for client in sides:
        found, said = _check_side(client.side, client.settings)
        problems += found
        notes += said
        notes += [f"{s} ignored: {IGNORED_KEYS[canonical(s.key)]}" for s in client.ignored]
    return ClientCheck(tuple(problems), tuple(notes), libversion()[0], time.monotonic() - started)


@dataclass(frozen=True)
class Finding:
    """A rule whose condition holds, with the offending settings."""

    rule: Rule
    settings: tuple[Setting, ...]


@dataclass(frozen=True)
class LintResult:
    """The guarantee the configuration can keep, and the claim's fate."""

    claim: Guarantee
    findings: tuple[Finding, ...]

    @property
    def kept_guarantees(self) -> tuple[Guarantee, ...]:
        """Every guarantee no finding breaks."""
        broken = {g for f in self.findings for g in f.rule.breaks}
        return tuple(cast(Guarantee, g) for g in GUARANTEES if g not in broken)

    @property
    def strongest(self) -> Guarantee | None:
        """The kept guarantee that forbids the most anomalies (idempotent forbids what both at-most-once
        and at-least-once do, so the kept ones are ordered), ``None`` when none is kept."""
        ranked = sorted(self.kept_guarantees, key=lambda g: len(FATAL[g]))
        return ranked[-1] if ranked else None

    @property
    def kept(self) -> bool:
        return self.claim in self.kept_guarantees

    @property
    def violations(self) -> tuple[Finding, ...]:
        """The findings that break the claim."""
        return tuple(f for f in self.findings if self.claim in f.rule.breaks)

    @property
    def others(self) -> tuple[Finding, ...]:
        """The findings that do not break the claim (other guarantees, availability, risks)."""
        return tuple(f for f in self.findings if self.claim not in f.rule.breaks)

    def to_dict(self) -> dict[str, Any]:
        def finding(f: Finding) -> dict[str, Any]:
            return {
                "rule": f.rule.id,
                "breaks": list(f.rule.breaks),
                "anomalies": list(f.rule.anomalies),
                "cases": list(f.rule.cases),
                "settings": [
                    {"key": s.key, "value": s.shown.partition("=")[2], "origin": str(s.origin)}
                    for s in f.settings
                ],
                "why": f.rule.why,
                "fix": f.rule.fix,
            }

        return {
            "claim": self.claim,
            "kept": self.kept,
            "strongest": self.strongest,
            "kept_guarantees": list(self.kept_guarantees),
            "violations": [finding(f) for f in self.violations],
            "others": [finding(f) for f in self.others],
        }


def rules_for(gate: GateFile) -> tuple[Rule, ...]:
    """The rules that judge this gate file: all of them; with a ``[service]`` only those on the topic's
    settings — the service's own clients are inside it, so the cases alone judge how it produces and
    commits (the file's ``[producer]`` / ``[consumer]`` describe the harness's input writer and output
    reader, not the service)."""
    if gate.service is None:
        return RULES
    return tuple(rule for rule in RULES if set(rule.keys) <= set(TOPIC_KEYS))


def derive(gate: GateFile) -> LintResult:
    """Evaluate the gate file's rules (:func:`rules_for`) on its effective settings (pure: no client is
    built)."""
    view = View.of(gate)
    findings = tuple(
        Finding(_for(rule, view), tuple(view.setting(k) for k in rule.keys))
        for rule in rules_for(gate)
        if rule.test(view)
    )
    return LintResult(gate.guarantee, findings)


def _for(rule: Rule, view: View) -> Rule:
    """``rule`` with the cases that show it for this configuration (:attr:`Rule.shown_by`)."""
    if rule.shown_by is None:
        return rule
    return replace(rule, cases=rule.shown_by(view) or rule.cases)


def lint_gate(gate: GateFile) -> tuple[ClientCheck, LintResult]:
    """Both steps; raises :class:`GateFileError` listing librdkafka's refusals (bad input, never a
    verdict)."""
    check = check_clients(gate)
    if check.problems:
        raise GateFileError(str(p) for p in check.problems)
    return check, derive(gate)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def rules_markdown() -> str:
    """The rules and refusals as Markdown tables (docs/gate.md holds this text between its markers)."""
    rows = [
        "| rule | when | effect | breaks | keys | cases | why | fix |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for rule in RULES:
        breaks = ", ".join(rule.breaks) or "nothing (reported)"
        rows.append(
            "| "
            + " | ".join(
                _cell(c)
                for c in (
                    f"`{rule.id}`",
                    rule.when,
                    rule.effect,
                    breaks,
                    ", ".join(f"`{k}`" for k in rule.keys),
                    ", ".join(rule.cases),
                    rule.why,
                    rule.fix,
                )
            )
            + " |"
        )
    rows += [
        "",
        "Refused by librdkafka itself (exit 2, the keys named):",
        "",
        "| side | librdkafka says | keys | fix |",
        "|---|---|---|---|",
    ]
    for refusal in REFUSALS:
        rows.append(
            f"| {refusal.side} | {_cell(refusal.fragment)} | "
            f"{', '.join(f'`{k}`' for k in refusal.keys)} | {_cell(refusal.fix)} ({_cell(refusal.why)}) |"
        )
    return "\n".join(rows) + "\n"
