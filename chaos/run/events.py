"""The run's event model: one frozen, validated dataclass per event kind.

Every stage speaks it: the workload and the faults emit these events, :mod:`chaos.history` records and
reads them back, the audit and the report read them. It lives with the run, below every stage, so that
emitting an event never imports the stage that stores it.

Every event carries the common fields ``run_id``, ``process`` (the actor: ``producer-0``, ``consumer-2``,
``nemesis``, ``probe``…), ``ts`` (wall clock, ``time.time()``) and ``mono`` (``time.monotonic()``); both
clocks default to "now", taken when the event object is built. ``kind`` is a class constant.

Kinds (``EVENT_TYPES`` maps the name to the class):

- ``send_invoke`` (:class:`SendInvoke`): a producer is about to send one unique value;
- ``send_outcome`` (:class:`SendOutcome`): the one terminal outcome of a send: ok / fail / info;
- ``delivery`` (:class:`Delivery`): a record delivered to a consumer-group member;
- ``commit`` (:class:`Commit`): an offset commit and its result;
- ``rebalance`` (:class:`Rebalance`): an assign / revoke / lost callback;
- ``drain_read`` (:class:`DrainRead`): a record read by the final drain (apart from the group);
- ``drain_end`` (:class:`DrainEnd`): the final drain finished (or gave up on) one partition;
- ``fault`` (:class:`FaultEvent`): a fault injected or healed;
- ``cluster_state`` (:class:`ClusterSample`): controller, leaders, ISR, group state;
- ``client_log`` (:class:`ClientLog`): a client error callback or log line;
- ``probe_call`` (:class:`ProbeCall`): one timed client call (list_offsets, metadata, poll…);
- ``txn`` (:class:`TxnMarker`): a transaction begin / commit / abort;
- ``topic_policy`` (:class:`TopicPolicy`): a topic's effective log policy (cleanup, retention);
- ``log_start`` (:class:`LogStart`): a partition's log start offset, sampled or moved by DeleteRecords.

Outcomes follow Jepsen: ``ok`` (it happened), ``fail`` (it definitely did not), ``info`` (unknown: it may
or may not have happened — e.g. ``_MSG_TIMED_OUT``). Error fields hold an error *code name*
(``KafkaError.name()``, e.g. ``"_MSG_TIMED_OUT"``, ``"NOT_ENOUGH_REPLICAS"``); free text goes in ``message``.

Storage flattens every kind into one wide table (see :mod:`chaos.history.schema`); :meth:`Event.to_row`
and :meth:`Event.from_row` convert. Bump :data:`SCHEMA_VERSION` on any change to a kind's fields
(docs/history.md, "Version policy").
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Final, Literal, TypeVar

from chaos.errors import HistoryError

SCHEMA_VERSION: Final = 2
"""Version of the event model and of the stored table; written into every history file. Version 2 added
``topic_policy``, ``log_start`` and ``send_invoke.tombstone``; a version-1 history reads with those null."""

Outcome = Literal["ok", "fail", "info"]
Isolation = Literal["read_uncommitted", "read_committed"]
RebalanceAction = Literal["assign", "revoke", "lost"]
FaultAction = Literal["inject", "heal"]
LogStartAction = Literal["sampled", "deleted"]
TxnAction = Literal["begin", "commit", "abort"]
LogLevel = Literal["emergency", "alert", "critical", "error", "warning", "notice", "info", "debug"]

OUTCOMES: Final[tuple[str, ...]] = ("ok", "fail", "info")
ISOLATION_LEVELS: Final[tuple[str, ...]] = ("read_uncommitted", "read_committed")
REBALANCE_ACTIONS: Final[tuple[str, ...]] = ("assign", "revoke", "lost")
FAULT_ACTIONS: Final[tuple[str, ...]] = ("inject", "heal")
LOG_START_ACTIONS: Final[tuple[str, ...]] = ("sampled", "deleted")
TXN_ACTIONS: Final[tuple[str, ...]] = ("begin", "commit", "abort")
LOG_LEVELS: Final[tuple[str, ...]] = (
    "emergency",
    "alert",
    "critical",
    "error",
    "warning",
    "notice",
    "info",
    "debug",
)  # syslog severities 0..7, the scale librdkafka's log callback uses

COMMON_COLUMNS: Final[tuple[str, ...]] = ("run_id", "kind", "ts", "mono", "process")

INT32_MAX: Final = 2**31 - 1
INT64_MAX: Final = 2**63 - 1
EPOCH_2000: Final = 946_684_800.0  # a wall-clock ts below this is almost surely time.monotonic()

NAME_PATTERN: Final = r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}"
_NAME_RE: Final = re.compile(NAME_PATTERN)
_TOPIC_RE: Final = re.compile(r"[A-Za-z0-9._\-]{1,249}")
_ERROR_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,127}")
_VALUE_ID_RE: Final = re.compile(rf"(?:{NAME_PATTERN}):(?:{NAME_PATTERN}):(?:0|[1-9][0-9]*)")
VALUE_ID_PRODUCER: Final = rf"^(?:{NAME_PATTERN}):({NAME_PATTERN}):(?:0|[1-9][0-9]*)$"
"""A value id, its producer as group 1 (the same pattern in Python and in Spark's ``regexp_extract``)."""
_VALUE_ID_PRODUCER_RE: Final = re.compile(VALUE_ID_PRODUCER)

# Validating names is on the hot path (every event); the set of names a run uses is small.
_known_names: set[str] = set()
_known_topics: set[str] = set()
_KNOWN_LIMIT: Final = 10_000


class InvalidEvent(HistoryError, ValueError):
    """An event field is missing, of the wrong type or out of range.

    The message names the event class and field, what is accepted, and the value that was given.
    """


def _fail(owner: object, name: str, expected: str, value: object) -> InvalidEvent:
    return InvalidEvent(f"{type(owner).__name__}.{name}: expected {expected}; got {value!r}")


# ---- value ids ------------------------------------------------------------------------------------


def value_id_for(run_id: str, producer: str, seq: int) -> str:
    """The unique id of one produced value: ``"{run_id}:{producer}:{seq}"``."""
    return f"{run_id}:{producer}:{seq}"


VALUE_ID_HEADER: Final = "chaos-id"
"""The record header that carries a value's id beside its payload (the only place a tombstone's id is)."""


def producer_of(value_id: str | None) -> str | None:
    """The producer named in ``value_id``; None for no value id or a foreign payload."""
    if type(value_id) is not str:
        return None
    found = _VALUE_ID_PRODUCER_RE.match(value_id)
    return found.group(1) if found else None


def parse_value_id(value_id: str) -> tuple[str, str, int]:
    """Split a value id into ``(run_id, producer, seq)``; raises :class:`InvalidEvent` if malformed."""
    if type(value_id) is not str or _VALUE_ID_RE.fullmatch(value_id) is None:
        raise InvalidEvent(
            f"value id: expected 'run_id:producer:seq' (names of [A-Za-z0-9_.-], seq an int >= 0); "
            f"got {value_id!r}"
        )
    run_id, producer, seq = value_id.split(":")
    return run_id, producer, int(seq)


# ---- field validators (cheap on the common path: a type check and a compare) ----------------------


def _check_name(owner: object, name: str, value: object) -> None:
    if type(value) is str and value in _known_names:
        return
    if type(value) is not str or _NAME_RE.fullmatch(value) is None:
        raise _fail(owner, name, "a name of 1-128 characters [A-Za-z0-9_.-] starting alphanumeric", value)
    if len(_known_names) < _KNOWN_LIMIT:
        _known_names.add(value)


def _check_topic(owner: object, name: str, value: object) -> None:
    if type(value) is str and value in _known_topics:
        return
    if type(value) is not str or _TOPIC_RE.fullmatch(value) is None:
        raise _fail(owner, name, "a Kafka topic name (1-249 characters of [A-Za-z0-9._-])", value)
    if len(_known_topics) < _KNOWN_LIMIT:
        _known_topics.add(value)


def _check_text(owner: object, name: str, value: object, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if type(value) is not str or not value:
        raise _fail(owner, name, "a non-empty str" + (" or None" if optional else ""), value)


def _check_opt_str(owner: object, name: str, value: object) -> None:
    if value is not None and type(value) is not str:
        raise _fail(owner, name, "a str or None", value)


def _check_int(
    owner: object,
    name: str,
    value: object,
    *,
    lo: int = 0,
    hi: int = INT64_MAX,
    optional: bool = False,
    hint: str = "",
) -> None:
    if value is None and optional:
        return
    if type(value) is not int or not lo <= value <= hi:
        what = f"an int in [{lo}, {hi}]" if hi != INT64_MAX else f"an int >= {lo}"
        raise _fail(owner, name, what + (" or None" if optional else "") + hint, value)


def _check_float(owner: Any, name: str, *, lo: float = 0.0, optional: bool = False) -> None:
    value = getattr(owner, name)
    if value is None and optional:
        return
    if type(value) is int:  # accept ints, store floats so both storage paths agree on the type
        value = float(value)
        object.__setattr__(owner, name, value)
    if type(value) is not float or not math.isfinite(value) or value < lo:
        raise _fail(owner, name, f"a finite float >= {lo}" + (" or None" if optional else ""), value)


def _check_bool(owner: object, name: str, value: object, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if type(value) is not bool:
        raise _fail(owner, name, "a bool" + (" or None" if optional else ""), value)


def _check_choice(owner: object, name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise _fail(owner, name, "one of " + ", ".join(repr(c) for c in choices), value)


def _check_error(owner: object, name: str, value: object, *, required: bool) -> None:
    if value is None and not required:
        return
    if type(value) is not str or _ERROR_RE.fullmatch(value) is None:
        raise _fail(
            owner,
            name,
            "an error code name such as '_MSG_TIMED_OUT' or 'NOT_ENOUGH_REPLICAS' (KafkaError.name()) "
            "or an exception class name; put free text in 'message'" + ("" if required else ", or None"),
            value,
        )


def _check_value_id(owner: object, name: str, value: object, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if type(value) is not str or _VALUE_ID_RE.fullmatch(value) is None:
        raise _fail(
            owner,
            name,
            "a value id 'run_id:producer:seq' (see value_id_for)" + (" or None" if optional else ""),
            value,
        )


def _check_tuple(owner: object, name: str, value: object, item: type, what: str) -> None:
    if type(value) is not tuple or any(type(v) is not item for v in value):
        raise _fail(owner, name, f"a tuple of {what} (use () for none)", value)


def _check_json_object(owner: object, name: str, value: object) -> None:
    try:
        ok = type(value) is str and isinstance(json.loads(value), dict)
    except ValueError:
        ok = False
    if not ok:
        raise _fail(owner, name, "a JSON object as a str, e.g. json_text({'latency_ms': 500})", value)


def json_text(obj: Mapping[str, Any]) -> str:
    """Canonical JSON text for the ``params`` field: sorted keys, no spaces."""
    return json.dumps(dict(obj), sort_keys=True, separators=(",", ":"))


# ---- nested structs -------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class PartitionOffset:
    """A topic partition with an optional offset and per-partition error.

    In :class:`Commit` and :class:`TxnMarker` ``offset`` is the committed offset (the next one to read);
    in :class:`Rebalance` it is ``None`` unless the callback knew a position.
    """

    topic: str
    partition: int
    offset: int | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        _check_topic(self, "topic", self.topic)
        _check_int(self, "partition", self.partition, hi=INT32_MAX)
        _check_int(
            self,
            "offset",
            self.offset,
            optional=True,
            hint=" (librdkafka's logical offsets like -1001 mean 'none': pass None)",
        )
        _check_error(self, "error", self.error, required=False)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"topic": self.topic, "partition": self.partition, "offset": self.offset, "error": self.error}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PartitionOffset:
        """Inverse of :meth:`to_dict`; absent keys take their defaults."""
        return cls(**{k: v for k, v in data.items() if v is not None})


@dataclass(frozen=True, kw_only=True, slots=True)
class PartitionState:
    """One partition as the cluster reports it: leader (``None`` = no leader), ISR and replicas.

    The one type for both a live read (:func:`chaos.cluster.introspect.describe_partitions`) and a recorded
    sample (:class:`ClusterSample`).
    """

    topic: str
    partition: int
    leader: int | None
    isr: tuple[int, ...] = ()
    replicas: tuple[int, ...] = ()
    error: str | None = None

    def __post_init__(self) -> None:
        _check_topic(self, "topic", self.topic)
        _check_int(self, "partition", self.partition, hi=INT32_MAX)
        _check_int(
            self,
            "leader",
            self.leader,
            hi=INT32_MAX,
            optional=True,
            hint=" (a broker id; librdkafka's -1 means no leader: pass None)",
        )
        _check_tuple(self, "isr", self.isr, int, "broker ids (int)")
        _check_tuple(self, "replicas", self.replicas, int, "broker ids (int)")
        _check_error(self, "error", self.error, required=False)

    @property
    def offline(self) -> bool:
        """True when the partition has no leader."""
        return self.leader is None

    @property
    def under_replicated(self) -> bool:
        """True when the ISR is smaller than the replica set."""
        return len(self.isr) < len(self.replicas)

    @property
    def followers(self) -> tuple[int, ...]:
        """The replicas other than the leader, in replica order."""
        return tuple(r for r in self.replicas if r != self.leader)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "topic": self.topic,
            "partition": self.partition,
            "leader": self.leader,
            "isr": list(self.isr),
            "replicas": list(self.replicas),
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PartitionState:
        """Inverse of :meth:`to_dict`; lists become tuples, absent keys take their defaults."""
        kwargs = {k: v for k, v in data.items() if v is not None}
        for name in ("isr", "replicas"):
            if name in kwargs:
                kwargs[name] = tuple(kwargs[name])
        kwargs.setdefault("leader", None)
        return cls(**kwargs)


_STRUCTS: Final[dict[str, type[PartitionOffset] | type[PartitionState]]] = {
    "PartitionOffset": PartitionOffset,
    "PartitionState": PartitionState,
}

# ---- events ---------------------------------------------------------------------------------------

E = TypeVar("E", bound="Event")


@dataclass(frozen=True, kw_only=True, slots=True)
class Event:
    """Base of every history event; not instantiated itself.

    Subclasses validate their own fields in ``_validate``; construction raises :class:`InvalidEvent`.
    """

    kind: ClassVar[str] = ""
    # Filled by _register: the kind's own columns, and which of them hold tuples (and of which struct).
    _columns: ClassVar[tuple[str, ...]] = ()
    _tuple_items: ClassVar[dict[str, type[PartitionOffset] | type[PartitionState] | None]] = {}

    run_id: str
    process: str
    ts: float = field(default_factory=time.time)
    mono: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        if not self.kind:
            raise TypeError("Event is abstract: build one of its kinds (SendInvoke, Delivery, ...)")
        _check_name(self, "run_id", self.run_id)
        _check_name(self, "process", self.process)
        if type(self.ts) is not float or not EPOCH_2000 <= self.ts < 1e11:
            self._check_ts()
        if type(self.mono) is not float or not 0.0 <= self.mono < math.inf:
            _check_float(self, "mono")
        self._validate()

    def _check_ts(self) -> None:
        ts: object = self.ts
        if type(ts) is int:
            ts = float(ts)
            object.__setattr__(self, "ts", ts)
        if type(ts) is float and 0.0 <= ts < EPOCH_2000:
            raise _fail(
                self,
                "ts",
                "wall-clock epoch seconds from time.time(); this looks like "
                "time.monotonic(), which belongs in 'mono'",
                ts,
            )
        if type(ts) is not float or not EPOCH_2000 <= ts < 1e11:
            raise _fail(self, "ts", "wall-clock epoch seconds from time.time(), in [946684800, 1e11)", ts)

    def _validate(self) -> None:
        raise NotImplementedError

    def to_row(self) -> dict[str, Any]:
        """This event as a JSON-ready dict: the common columns and this kind's columns (``None`` kept)."""
        row: dict[str, Any] = {
            "run_id": self.run_id,
            "kind": self.kind,
            "ts": self.ts,
            "mono": self.mono,
            "process": self.process,
        }
        tuple_items = self._tuple_items
        for name in self._columns:
            value = getattr(self, name)
            if name in tuple_items:
                value = [v.to_dict() for v in value] if tuple_items[name] is not None else list(value)
            row[name] = value
        return row

    @classmethod
    def from_row(cls: type[E], row: Mapping[str, Any]) -> E:
        """Rebuild an event from a row (``to_row()`` output, a JSONL line, or a wide-table row).

        Called on :class:`Event` it dispatches on ``row["kind"]``; called on a subclass the kind must match.
        Columns of other kinds must be null; ``index`` is ignored.
        """
        kind = row.get("kind")
        target = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
        if target is None:
            raise InvalidEvent(f"row kind: expected one of {', '.join(sorted(EVENT_TYPES))}; got {kind!r}")
        if cls is not Event and target is not cls:
            raise InvalidEvent(f"{cls.__name__}.from_row: row kind is {kind!r}, expected {cls.kind!r}")
        own = {"run_id", "process", "ts", "mono", *target._columns}
        kwargs: dict[str, Any] = {}
        for name, value in row.items():
            if name in own:
                if value is None:
                    continue  # an absent optional field: the dataclass default applies
                if name in target._tuple_items:
                    item = target._tuple_items[name]
                    value = tuple(item.from_dict(v) for v in value) if item is not None else tuple(value)
                kwargs[name] = value
            elif value is not None and name not in ("kind", "index"):
                raise InvalidEvent(
                    f"row of kind {kind!r} has a value in column {name!r}, which that kind "
                    f"does not use; its columns are {', '.join(target._columns)}"
                )
        for name in ("ts", "mono"):
            if name not in kwargs:
                raise InvalidEvent(f"row of kind {kind!r}: column {name!r} is missing")
        event = target(**kwargs)
        assert isinstance(event, cls)
        return event


EVENT_TYPES: dict[str, type[Event]] = {}
"""Kind name -> event class, in schema order."""

_EventT = TypeVar("_EventT", bound=type[Event])


def _register(cls: _EventT) -> _EventT:
    common = {"run_id", "process", "ts", "mono"}
    columns: list[str] = []
    tuple_items: dict[str, type[PartitionOffset] | type[PartitionState] | None] = {}
    for f in fields(cls):
        if f.name in common:
            continue
        columns.append(f.name)
        annotation = str(f.type)
        if annotation.startswith("tuple["):
            tuple_items[f.name] = _STRUCTS.get(annotation[len("tuple[") :].split(",")[0].strip())
    cls._columns = tuple(columns)
    cls._tuple_items = tuple_items
    EVENT_TYPES[cls.kind] = cls
    return cls


def _check_member(event: Any) -> None:
    """A group member's id and generation, both optional (unknown before the first join)."""
    _check_text(event, "member", event.member, optional=True)
    _check_int(
        event,
        "generation",
        event.generation,
        hi=INT32_MAX,
        optional=True,
        hint=" (librdkafka's -1 means no generation: pass None)",
    )


@_register
@dataclass(frozen=True, kw_only=True, slots=True)
class SendInvoke(Event):
    """A producer is about to send one value; ``value_id`` must equal ``value_id_for(run_id, producer, seq)``.

    ``partition`` is set only when the producer chose it (otherwise the partitioner does). ``tombstone``
    is true when the record's value is null (a delete marker for a compacted topic; the value id then
    travels in the ``chaos-id`` header).
    """

    kind: ClassVar[str] = "send_invoke"
    value_id: str
    producer: str
    seq: int
    topic: str
    key: str | None = None
    partition: int | None = None
    tombstone: bool | None = None

    def _validate(self) -> None:
        _check_name(self, "producer", self.producer)
        _check_int(self, "seq", self.seq)
        if type(self.value_id) is not str or self.value_id != f"{self.run_id}:{self.producer}:{self.seq}":
            raise _fail(
                self,
                "value_id",
                f"value_id_for(run_id, producer, seq) = {self.run_id}:{self.producer}:{self.seq!r}",
                self.value_id,
            )
        _check_topic(self, "topic", self.topic)
        _check_opt_str(self, "key", self.key)
        _check_int(self, "partition", self.partition, hi=INT32_MAX, optional=True)
        _check_bool(self, "tombstone", self.tombstone, optional=True)


@_register
@dataclass(frozen=True, kw_only=True, slots=True)
class SendOutcome(Event):
    """The one terminal outcome of a send (linked to its :class:`SendInvoke` by ``value_id``).

    - ``ok``: acknowledged. ``partition`` required; ``offset`` required unless acks=0 gave none.
    - ``fail``: definitely not written. ``error``, ``retriable`` and ``fatal`` required; no ``offset``.
    - ``info``: unknown — may or may not be in the log (e.g. ``_MSG_TIMED_OUT``). ``error`` required.

    ``latency_ms`` is the time from invoke to this outcome.
    """

    kind: ClassVar[str] = "send_outcome"
    value_id: str
    outcome: Outcome
    partition: int | None = None
    offset: int | None = None
    latency_ms: float | None = None
    error: str | None = None
    retriable: bool | None = None
    fatal: bool | None = None
    message: str | None = None

    def _validate(self) -> None:
        _check_value_id(self, "value_id", self.value_id)
        outcome = self.outcome
        _check_choice(self, "outcome", outcome, OUTCOMES)
        _check_int(self, "partition", self.partition, hi=INT32_MAX, optional=outcome != "ok")
        _check_int(
            self,
            "offset",
            self.offset,
            optional=True,
            hint=" (librdkafka's -1001 means no offset: pass None)",
        )
        if outcome != "ok" and self.offset is not None:
            raise _fail(self, "offset", f"None for outcome {outcome!r} (only 'ok' has one)", self.offset)
        if self.latency_ms is not None:
            _check_float(self, "latency_ms", optional=True)
        _check_error(self, "error", self.error, required=outcome != "ok")
        if outcome == "ok" and self.error is not None:
            raise _fail(self, "error", "None for outcome 'ok'", self.error)
        _check_bool(self, "retriable", self.retriable, optional=outcome != "fail")
        _check_bool(self, "fatal", self.fatal, optional=outcome != "fail")
        _check_opt_str(self, "message", self.message)


@_register
@dataclass(frozen=True, kw_only=True, slots=True)
class Delivery(Event):
    """A record delivered to a consumer-group member by ``poll()``/``consume()``.

    ``process`` is the harness actor (``consumer-2``, stable across restarts); ``member`` is the
    coordinator-assigned member id (``Consumer.memberid()``), ``None`` if unknown. ``value_id`` is ``None``
    when the payload is not one of ours.
    """

    kind: ClassVar[str] = "delivery"
    group: str
    topic: str
    partition: int
    offset: int
    value_id: str | None = None
    key: str | None = None
    member: str | None = None
    generation: int | None = None

    def _validate(self) -> None:
        _check_text(self, "group", self.group)
        _check_topic(self, "topic", self.topic)
        _check_int(self, "partition", self.partition, hi=INT32_MAX)
        _check_int(self, "offset", self.offset)
        _check_value_id(self, "value_id", self.value_id, optional=True)
        _check_opt_str(self, "key", self.key)
        _check_member(self)


@_register
@dataclass(frozen=True, kw_only=True, slots=True)
class Commit(Event):
    """An offset commit (manual, or auto-commit reported through ``on_commit``) and its result.

    ``offsets`` hold the committed offsets (next offset to read), each with its own error if any.
    ``outcome`` ``fail``/``info`` need ``error``.
    """

    kind: ClassVar[str] = "commit"
    group: str
    outcome: Outcome
    offsets: tuple[PartitionOffset, ...] = ()
    member: str | None = None
    generation: int | None = None
    error: str | None = None
    message: str | None = None

    def _validate(self) -> None:
        _check_text(self, "group", self.group)
        _check_choice(self, "outcome", self.outcome, OUTCOMES)
        _check_tuple(self, "offsets", self.offsets, PartitionOffset, "PartitionOffset")
        _check_member(self)
        _check_error(self, "error", self.error, required=self.outcome != "ok")
        _check_opt_str(self, "message", self.message)


@_register
@dataclass(frozen=True, kw_only=True, slots=True)
class Rebalance(Event):
    """An ``on_assign`` / ``on_revoke`` / ``on_lost`` callback, recorded when it is entered."""

    kind: ClassVar[str] = "rebalance"
    action: RebalanceAction
    group: str
    partitions: tuple[PartitionOffset, ...] = ()
    member: str | None = None
    generation: int | None = None

    def _validate(self) -> None:
        _check_choice(self, "action", self.action, REBALANCE_ACTIONS)
        _check_text(self, "group", self.group)
        _check_tuple(self, "partitions", self.partitions, PartitionOffset, "PartitionOffset")
        _check_member(self)


@_register
@dataclass(frozen=True, kw_only=True, slots=True)
class DrainRead(Event):
    """A record read by the final drain (a fresh consumer, all partitions, beginning to end)."""

    kind: ClassVar[str] = "drain_read"
    isolation: Isolation
    topic: str
    partition: int
    offset: int
    value_id: str | None = None
    key: str | None = None

    def _validate(self) -> None:
        _check_choice(self, "isolation", self.isolation, ISOLATION_LEVELS)
        _check_topic(self, "topic", self.topic)
        _check_int(self, "partition", self.partition, hi=INT32_MAX)
        _check_int(self, "offset", self.offset)
        _check_value_id(self, "value_id", self.value_id, optional=True)
        _check_opt_str(self, "key", self.key)


@_register
@dataclass(frozen=True, kw_only=True, slots=True)
class DrainEnd(Event):
    """The final drain's verdict on one partition at one isolation level.

    ``ok``: every offset in ``[low_offset, high_offset)`` was read (``high_offset`` is the end offset the
    drain targeted: the high watermark, or the LSO under read_committed). ``fail``: it gave up; ``error``
    says why, and the offsets are whatever was known (``None`` if not even the watermarks were).
    """

    kind: ClassVar[str] = "drain_end"
    isolation: Isolation
    topic: str
    partition: int
    outcome: Literal["ok", "fail"]
    low_offset: int | None = None
    high_offset: int | None = None
    error: str | None = None
    message: str | None = None

    def _validate(self) -> None:
        _check_choice(self, "isolation", self.isolation, ISOLATION_LEVELS)
        _check_topic(self, "topic", self.topic)
        _check_int(self, "partition", self.partition, hi=INT32_MAX)
        _check_choice(self, "outcome", self.outcome, ("ok", "fail"))
        ok = self.outcome == "ok"
        _check_int(self, "low_offset", self.low_offset, optional=not ok)
        _check_int(self, "high_offset", self.high_offset, optional=not ok)
        low, high = self.low_offset, self.high_offset
        if low is not None and high is not None and low > high:
            raise _fail(self, "high_offset", f">= low_offset ({self.low_offset})", self.high_offset)
        _check_error(self, "error", self.error, required=not ok)
        _check_opt_str(self, "message", self.message)


@_register
@dataclass(frozen=True, kw_only=True, slots=True)
class FaultEvent(Event):
    """A fault injected or healed. ``fault`` is its name (``network_cut``, ``pause``…), ``target`` what it
    hit (``broker-2``, ``ext-1``…), ``params`` a JSON object (see :func:`json_text`). ``error`` is set
    when the action itself failed."""

    kind: ClassVar[str] = "fault"
    action: FaultAction
    fault: str
    target: str
    params: str = "{}"
    error: str | None = None
    message: str | None = None

    def _validate(self) -> None:
        _check_choice(self, "action", self.action, FAULT_ACTIONS)
        _check_text(self, "fault", self.fault)
        _check_text(self, "target", self.target)
        _check_json_object(self, "params", self.params)
        _check_error(self, "error", self.error, required=False)
        _check_opt_str(self, "message", self.message)


@_register
@dataclass(frozen=True, kw_only=True, slots=True)
class ClusterSample(Event):
    """A cluster-state sample: controller, live brokers, per-partition leader/ISR/replicas, counts of
    offline and under-replicated partitions, and one consumer group's state and member ids.

    A sample that failed sets ``error`` and leaves what it could not read as ``None`` / ``()``.
    ``duration_ms`` is how long taking the sample took.
    """

    kind: ClassVar[str] = "cluster_state"
    controller: int | None = None
    brokers: tuple[int, ...] = ()
    partition_states: tuple[PartitionState, ...] = ()
    offline_partitions: int | None = None
    under_replicated: int | None = None
    group: str | None = None
    group_state: str | None = None
    group_members: tuple[str, ...] = ()
    duration_ms: float | None = None
    error: str | None = None
    message: str | None = None

    def _validate(self) -> None:
        _check_int(
            self,
            "controller",
            self.controller,
            hi=INT32_MAX,
            optional=True,
            hint=" (a broker id; pass None when unknown)",
        )
        _check_tuple(self, "brokers", self.brokers, int, "broker ids (int)")
        _check_tuple(self, "partition_states", self.partition_states, PartitionState, "PartitionState")
        _check_int(self, "offline_partitions", self.offline_partitions, hi=INT32_MAX, optional=True)
        _check_int(self, "under_replicated", self.under_replicated, hi=INT32_MAX, optional=True)
        _check_text(self, "group", self.group, optional=True)
        _check_opt_str(self, "group_state", self.group_state)
        _check_tuple(self, "group_members", self.group_members, str, "member ids (str)")
        _check_float(self, "duration_ms", optional=True)
        _check_error(self, "error", self.error, required=False)
        _check_opt_str(self, "message", self.message)


@_register
@dataclass(frozen=True, kw_only=True, slots=True)
class ClientLog(Event):
    """A client ``error_cb`` / ``log_cb`` / ``throttle_cb`` report, or a harness log line worth keeping.

    ``level`` is a syslog severity name (librdkafka's log levels 0..7: see :func:`syslog_level`);
    ``facility`` is librdkafka's log facility (``MAXPOLL``, ``REQTMOUT``…).
    """

    kind: ClassVar[str] = "client_log"
    level: LogLevel
    message: str
    facility: str | None = None
    error: str | None = None
    retriable: bool | None = None
    fatal: bool | None = None

    def _validate(self) -> None:
        _check_choice(self, "level", self.level, LOG_LEVELS)
        if type(self.message) is not str:
            raise _fail(self, "message", "a str", self.message)
        _check_opt_str(self, "facility", self.facility)
        _check_error(self, "error", self.error, required=False)
        _check_bool(self, "retriable", self.retriable, optional=True)
        _check_bool(self, "fatal", self.fatal, optional=True)


@_register
@dataclass(frozen=True, kw_only=True, slots=True)
class ProbeCall(Event):
    """One timed client call made by a restore reader or a probe (``list_offsets``, ``metadata``,
    ``committed``, ``seek``, ``poll``…). ``error`` is ``None`` when the call succeeded.

    ``timeout_ms`` is the timeout passed to the call; ``result`` a short summary (``"empty"``, ``"3 msgs"``);
    ``low_offset``/``high_offset`` the watermarks a ``list_offsets`` returned; ``offset`` a seek target or
    the offset a ``poll`` returned.
    """

    kind: ClassVar[str] = "probe_call"
    operation: str
    duration_ms: float
    timeout_ms: float | None = None
    error: str | None = None
    message: str | None = None
    result: str | None = None
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    low_offset: int | None = None
    high_offset: int | None = None

    def _validate(self) -> None:
        _check_name(self, "operation", self.operation)
        _check_float(self, "duration_ms")
        _check_float(self, "timeout_ms", optional=True)
        _check_error(self, "error", self.error, required=False)
        _check_opt_str(self, "message", self.message)
        _check_opt_str(self, "result", self.result)
        if self.topic is not None:
            _check_topic(self, "topic", self.topic)
        _check_int(self, "partition", self.partition, hi=INT32_MAX, optional=True)
        _check_int(self, "offset", self.offset, optional=True)
        _check_int(self, "low_offset", self.low_offset, optional=True)
        _check_int(self, "high_offset", self.high_offset, optional=True)


@_register
@dataclass(frozen=True, kw_only=True, slots=True)
class TxnMarker(Event):
    """A transaction boundary of the transactional worker, recorded after the call returns.

    ``value_ids`` are the values produced inside the transaction (empty at ``begin``); ``offsets`` the
    consumer offsets sent with ``send_offsets_to_transaction``. ``outcome`` ``info`` means the call's
    effect is unknown (e.g. a commit that timed out); ``fail``/``info`` need ``error``.
    """

    kind: ClassVar[str] = "txn"
    action: TxnAction
    transactional_id: str
    outcome: Outcome
    value_ids: tuple[str, ...] = ()
    offsets: tuple[PartitionOffset, ...] = ()
    error: str | None = None
    message: str | None = None

    def _validate(self) -> None:
        _check_choice(self, "action", self.action, TXN_ACTIONS)
        _check_text(self, "transactional_id", self.transactional_id)
        _check_choice(self, "outcome", self.outcome, OUTCOMES)
        _check_tuple(self, "value_ids", self.value_ids, str, "value ids (str)")
        for value_id in self.value_ids:
            _check_value_id(self, "value_ids[]", value_id)
        _check_tuple(self, "offsets", self.offsets, PartitionOffset, "PartitionOffset")
        _check_error(self, "error", self.error, required=self.outcome != "ok")
        _check_opt_str(self, "message", self.message)


@_register
@dataclass(frozen=True, kw_only=True, slots=True)
class TopicPolicy(Event):
    """A topic's effective log policy, as ``describe_configs`` read it: what Kafka may remove on purpose.

    ``cleanup_policy`` is ``delete``, ``compact`` or ``compact,delete``; ``retention_ms`` /
    ``retention_bytes`` ``-1`` mean unlimited; ``delete_retention_ms`` is how long a tombstone is kept
    after the cleaner first reached it. Recorded when a run creates or adopts a topic and when it alters one.
    """

    kind: ClassVar[str] = "topic_policy"
    topic: str
    cleanup_policy: str
    retention_ms: int
    retention_bytes: int
    delete_retention_ms: int

    def _validate(self) -> None:
        _check_topic(self, "topic", self.topic)
        parts = self.cleanup_policy.split(",") if type(self.cleanup_policy) is str else [None]
        if not parts or any(p not in ("delete", "compact") for p in parts):
            raise _fail(
                self, "cleanup_policy", "'delete', 'compact' or 'compact,delete'", self.cleanup_policy
            )
        for name in ("retention_ms", "retention_bytes", "delete_retention_ms"):
            _check_int(self, name, getattr(self, name), lo=-1, hint=" (-1: unlimited)")


@_register
@dataclass(frozen=True, kw_only=True, slots=True)
class LogStart(Event):
    """A partition's log start offset: ``sampled`` (read while the run went on) or ``deleted`` (a
    ``DeleteRecords`` call the harness made moved it to ``offset``; recorded once the broker confirmed)."""

    kind: ClassVar[str] = "log_start"
    topic: str
    partition: int
    offset: int
    action: LogStartAction = "sampled"

    def _validate(self) -> None:
        _check_topic(self, "topic", self.topic)
        _check_int(self, "partition", self.partition, hi=INT32_MAX)
        _check_int(self, "offset", self.offset)
        _check_choice(self, "action", self.action, LOG_START_ACTIONS)


def syslog_level(level: int) -> LogLevel:
    """Map a syslog / librdkafka log level (0 = emergency … 7 = debug) to its name."""
    if type(level) is not int or not 0 <= level <= 7:
        raise InvalidEvent(f"syslog level: expected an int in [0, 7]; got {level!r}")
    names: tuple[LogLevel, ...] = (
        "emergency",
        "alert",
        "critical",
        "error",
        "warning",
        "notice",
        "info",
        "debug",
    )
    return names[level]


def kind_columns(kind: str) -> tuple[str, ...]:
    """The columns a kind uses beyond the common ones; raises :class:`InvalidEvent` for an unknown kind."""
    try:
        return EVENT_TYPES[kind]._columns
    except KeyError:
        raise InvalidEvent(f"kind: expected one of {', '.join(EVENT_TYPES)}; got {kind!r}") from None


def check_kinds(kinds: Iterable[str]) -> tuple[str, ...]:
    """Validate kind names; returns them as a tuple."""
    result = tuple(kinds)
    for kind in result:
        kind_columns(kind)
    return result
