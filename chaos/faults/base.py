"""The fault contract: ``inject()`` once, ``heal()`` idempotently, a context manager, timestamped records.

Every fault resolves its target (a broker id, or a role such as "leader of t-0") at inject time and
appends a :class:`FaultRecord` to a :class:`FaultLog`; heal replaces it with the healed record.
A later history recorder consumes the log (``records()`` or ``subscribe()``); this package does not
import the history package.

A heal that raises leaves the fault active: its record carries the error and the number of attempts, the
log keeps it in ``active()``, and the next ``heal()`` (``heal_all`` retries) tries again. ``healed_at`` is
the time of the heal that succeeded, so a fault never healed shows as ``healed_at`` None with an error.
Listeners hear ``inject`` and the successful ``heal`` only: a failed attempt is not a heal event (a
history would otherwise end the fault's window while the fault still holds).
"""

from __future__ import annotations

import abc
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar, Final

from chaos.errors import FaultError
from chaos.faults.targets import AnyTarget, describe_target, resolve

if TYPE_CHECKING:
    from types import TracebackType

    from chaos.cluster.cluster import KafkaCluster

Param = int | float | str | bool | tuple[str, ...] | tuple[int, ...]
_INJECT_FAILED: Final = "inject failed"

NOT_MEASURED: Final = "effect not measured"
"""How a fault's note begins when its effect could not be measured (the report shows such notes)."""


@dataclass(frozen=True)
class Effect:
    """Whether the fault's target showed it during its window, measured by the fault itself just before
    its heal (a cut: packets its rules dropped; a toxic: packets through its proxies), and the figures
    that say so. A fault that did nothing makes a scenario run inconclusive
    (:meth:`chaos.scenario.runner.ScenarioRun.finish`)."""

    observed: bool
    evidence: str
    required: bool = True
    """The run depends on it (the fault's ``must_land``): unobserved, the run is inconclusive."""


@dataclass(frozen=True)
class FaultRecord:
    """One fault: what, on whom (as asked and as resolved), with which parameters, from when to when.

    Times are wall-clock epoch seconds; ``healed_at`` is None while the fault is active (also after a heal
    that failed). ``error``: why the inject failed and, while the fault is still active after a heal
    attempt, why the last heal failed. ``heal_attempts`` counts the heals run (failed ones included);
    ``notes`` says what else the fault wants known (its iptables chain, a failed attempt, "healed by a
    Toxiproxy restart"). ``effect``: the proof that it landed, for the kinds that measure one (None:
    not measured — the kind has no measure, or the measure failed, see ``notes``).
    """

    seq: int
    kind: str
    target: str
    brokers: tuple[int, ...]
    params: tuple[tuple[str, Param], ...]
    injected_at: float
    healed_at: float | None = None
    error: str | None = None
    heal_attempts: int = 0
    notes: tuple[str, ...] = ()
    effect: Effect | None = None

    @property
    def inject_failed(self) -> bool:
        """The inject raised: the fault never held (its record keeps the window the attempt took)."""
        return self.error is not None and self.error.startswith(_INJECT_FAILED)

    @property
    def proven(self) -> bool:
        """It ran and measured its effect, and the effect was seen."""
        return not self.inject_failed and self.effect is not None and self.effect.observed


Listener = Callable[[str, FaultRecord], None]


class FaultLog:
    """An in-memory, thread-safe list of fault records plus the faults still active."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: list[FaultRecord] = []
        self._active: dict[int, Fault] = {}
        self._listeners: list[Listener] = []

    def subscribe(self, listener: Listener) -> None:
        """Call ``listener("inject"|"heal", record)`` for every later event."""
        with self._lock:
            self._listeners.append(listener)

    def records(self) -> list[FaultRecord]:
        with self._lock:
            return list(self._records)

    def active(self) -> list[Fault]:
        with self._lock:
            return list(self._active.values())

    def _injected(self, fault: Fault, record: FaultRecord) -> FaultRecord:
        with self._lock:
            record = replace(record, seq=len(self._records))
            self._records.append(record)
            self._active[record.seq] = fault
            listeners = list(self._listeners)
        for listener in listeners:
            listener("inject", record)
        return record

    def _healed(self, record: FaultRecord) -> None:
        with self._lock:
            self._records[record.seq] = record
            self._active.pop(record.seq, None)
            listeners = list(self._listeners)
        for listener in listeners:
            listener("heal", record)

    def _heal_failed(self, record: FaultRecord) -> None:
        """A heal attempt raised: the record says so, the fault stays active (no event: nothing healed)."""
        with self._lock:
            self._records[record.seq] = record


DEFAULT_LOG = FaultLog()
"""Where faults record when no log is given."""

_LIVE_LOCK = threading.Lock()
_LIVE: weakref.WeakKeyDictionary[Any, dict[int, Fault]] = weakref.WeakKeyDictionary()


def live_faults(cluster: KafkaCluster) -> list[Fault]:
    """Every fault injected on ``cluster`` and not healed yet, whichever log records it (inject order)."""
    with _LIVE_LOCK:
        return list(_LIVE.get(cluster, {}).values())


def _set_live(fault: Fault, live: bool) -> None:
    with _LIVE_LOCK:
        faults = _LIVE.setdefault(fault.cluster, {})
        if live:
            faults[id(fault)] = fault
        else:
            faults.pop(id(fault), None)


class Fault(abc.ABC):
    """Base of every fault. Subclasses implement ``_inject`` / ``_heal`` for the resolved broker ids."""

    kind: ClassVar[str]
    must_land: bool = True
    stops_brokers: ClassVar[bool] = False
    """The fault takes its brokers' processes down until its heal starts them again (a crash, a removal, a
    power loss, a failed disk): the nemesis never lets such faults hold on a majority of the quorum's voters
    at once, for a broker starts only with a quorum to register with."""
    """A scenario run is inconclusive when this fault measured no effect (:class:`Effect`). False for a
    fault that may rightly see no traffic — one of several alike, of which the case needs one to land."""

    def __init__(self, cluster: KafkaCluster, target: AnyTarget, log: FaultLog | None = None) -> None:
        self.cluster = cluster
        self.target = target
        self.log = log if log is not None else DEFAULT_LOG
        self.brokers: tuple[int, ...] = ()
        self.record: FaultRecord | None = None
        self._lock = threading.Lock()
        self._healed = False
        self._inject_error: str | None = None
        self._notes: list[str] = []
        self._measured: Effect | None = None
        self.interrupted = False
        """Set by a heal during an interrupt (Ctrl-C, SIGTERM): undo the fault, do not wait for the cluster
        to settle after it (the session is ending; a CI cancel gives seconds)."""

    def params(self) -> dict[str, Param]:
        """The fault's parameters, for its record (override to add some)."""
        return {}

    def resolve_brokers(self) -> tuple[int, ...]:
        return (resolve(self.cluster, self.target),)

    @abc.abstractmethod
    def _inject(self) -> None: ...

    @abc.abstractmethod
    def _heal(self) -> None: ...

    def idle_reason(self) -> str | None:
        """Why injecting this fault now would change nothing (a preferred election where every preferred
        replica leads), else None. The nemesis skips such a step instead of running a fault that cannot
        land; a scenario that injects it anyway gets an :class:`Effect` saying it did nothing."""
        return None

    def _effect(self) -> Effect | None:
        """What the target showed of the fault so far, measured while it still holds (just before its
        heal); None when this kind measures nothing. Override with the kind's own proof."""
        return None

    @property
    def active(self) -> bool:
        return self.record is not None and not self._healed

    def note(self, text: str) -> None:
        """Add a line to the fault's record (it appears with the next record update: a heal or an attempt)."""
        self._notes.append(text)

    def inject(self) -> Fault:
        with self._lock:
            if self.record is not None:
                raise FaultError(
                    f"{self.kind} on {self.target_text} was already injected; create a new fault"
                )
            self.brokers = self.resolve_brokers()
            record = FaultRecord(
                seq=-1,
                kind=self.kind,
                target=self.target_text,
                brokers=self.brokers,
                params=tuple(sorted(self.params().items())),
                injected_at=time.time(),
            )
            self.record = self.log._injected(self, record)
            _set_live(self, True)
            try:
                self._inject()
            except BaseException as exc:
                self._inject_error = f"{_INJECT_FAILED}: {exc or type(exc).__name__}"
                # Ctrl-C or SIGTERM mid-inject: undo at once, the session is ending (see ``interrupted``)
                self.interrupted = self.interrupted or isinstance(exc, KeyboardInterrupt)
                self._heal_locked()
                raise
        return self

    def heal(self, *, interrupted: bool = False) -> None:
        """Undo the fault; a second call, or a call before inject, does nothing. A heal that raises
        leaves the fault active (recorded with the error): call it again to retry. ``interrupted``: the
        session is being interrupted, see :attr:`interrupted`."""
        with self._lock:
            self.interrupted = self.interrupted or interrupted
            self._heal_locked()

    def mark_healed(self, note: str) -> bool:
        """Record the fault healed now without undoing anything: something else undid it (a Toxiproxy
        restart). False when it is not active, or busy in its own inject/heal (which records it)."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if not self.active:
                return False
            assert self.record is not None
            self._notes.append(note)
            self._healed_now(self.record.heal_attempts)
            return True
        finally:
            self._lock.release()

    def _heal_locked(self) -> None:
        if self.record is None or self._healed:
            return
        attempt = self.record.heal_attempts + 1
        if self._measured is None and self._inject_error is None and not self.interrupted:
            try:
                self._measured = self._effect()
                if self._measured is not None and not self.must_land:
                    self._measured = replace(self._measured, required=False)
            except Exception as exc:  # a measure is evidence: it never stops a heal
                self._notes.append(f"{NOT_MEASURED}: {exc}")
        try:
            self._heal()
        except BaseException as exc:
            first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            self._notes.append(f"heal attempt {attempt} failed: {first_line}")
            errors = [e for e in (self._inject_error, f"heal failed: {exc}") if e]
            self.record = replace(
                self.record, heal_attempts=attempt, error="; ".join(errors), notes=tuple(self._notes)
            )
            self.log._heal_failed(self.record)
            if isinstance(exc, FaultError) or not isinstance(exc, Exception):
                raise  # a FaultError names its fix already; Ctrl-C stays Ctrl-C
            raise FaultError(
                f"could not heal {self.kind} on brokers {self.brokers}: {exc}\n"
                f"  fix: the fault stays active; heal_all(cluster) retries every heal, "
                f"`chaos clean --run-id {getattr(self.cluster, 'run_id', '<run id>')}` removes the run"
            ) from exc
        self._healed_now(attempt)

    def _healed_now(self, attempts: int) -> None:
        assert self.record is not None
        self._healed = True
        self.record = replace(
            self.record,
            healed_at=time.time(),
            error=self._inject_error,
            heal_attempts=attempts,
            notes=tuple(self._notes),
            effect=self._measured,
        )
        _set_live(self, False)
        self.log._healed(self.record)

    @property
    def target_text(self) -> str:
        return describe_target(self.target)

    def __enter__(self) -> Fault:
        return self.inject()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.heal(interrupted=exc_type is not None and issubclass(exc_type, KeyboardInterrupt))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.target_text}, {self.params()})"

    @staticmethod
    def _as_params(**values: Any) -> dict[str, Param]:
        return {k: v for k, v in values.items() if v is not None}
