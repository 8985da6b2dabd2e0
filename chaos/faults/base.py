"""The fault contract: ``inject()`` once, ``heal()`` idempotently, a context manager, timestamped records.

Every fault resolves its target (a broker id, or a role such as "leader of t-0") at inject time and
appends a :class:`FaultRecord` to a :class:`FaultLog`; heal replaces it with the healed record.
A later history recorder consumes the log (``records()`` or ``subscribe()``); this package does not
import the history package.
"""

from __future__ import annotations

import abc
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

from chaos.errors import FaultError
from chaos.faults.targets import Target, describe_target, resolve

if TYPE_CHECKING:
    from types import TracebackType

    from chaos.cluster.cluster import KafkaCluster

Param = int | float | str | bool | tuple[str, ...] | tuple[int, ...]


@dataclass(frozen=True)
class FaultRecord:
    """One fault: what, on whom (as asked and as resolved), with which parameters, from when to when.

    Times are wall-clock epoch seconds; ``healed_at`` is None while the fault is active.
    """

    seq: int
    kind: str
    target: str
    brokers: tuple[int, ...]
    params: tuple[tuple[str, Param], ...]
    injected_at: float
    healed_at: float | None = None
    error: str | None = None


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


DEFAULT_LOG = FaultLog()
"""Where faults record when no log is given."""


class Fault(abc.ABC):
    """Base of every fault. Subclasses implement ``_inject`` / ``_heal`` for the resolved broker ids."""

    kind: ClassVar[str]

    def __init__(self, cluster: KafkaCluster, target: Target, log: FaultLog | None = None) -> None:
        self.cluster = cluster
        self.target = target
        self.log = log if log is not None else DEFAULT_LOG
        self.brokers: tuple[int, ...] = ()
        self.record: FaultRecord | None = None
        self._lock = threading.Lock()
        self._healed = False

    def params(self) -> dict[str, Param]:
        """The fault's parameters, for its record (override to add some)."""
        return {}

    def resolve_brokers(self) -> tuple[int, ...]:
        return (resolve(self.cluster, self.target),)

    @abc.abstractmethod
    def _inject(self) -> None: ...

    @abc.abstractmethod
    def _heal(self) -> None: ...

    @property
    def active(self) -> bool:
        return self.record is not None and not self._healed

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
            try:
                self._inject()
            except BaseException as exc:
                self._heal_locked(error=f"inject failed: {exc}")
                raise
        return self

    def heal(self) -> None:
        """Undo the fault; a second call, or a call before inject, does nothing."""
        with self._lock:
            self._heal_locked()

    def _heal_locked(self, error: str | None = None) -> None:
        if self.record is None or self._healed:
            return
        try:
            self._heal()
        except BaseException as exc:
            error = f"{error + '; ' if error else ''}heal failed: {exc}"
            raise FaultError(
                f"could not heal {self.kind} on brokers {self.brokers}: {exc}\n"
                f"  fix: heal_all(cluster) retries every heal; `chaos clean` removes the run"
            ) from exc
        finally:
            self._healed = True
            self.record = replace(self.record, healed_at=time.time(), error=error)
            self.log._healed(self.record)

    @property
    def target_text(self) -> str:
        return describe_target(self.target)

    def __enter__(self) -> Fault:
        return self.inject()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.heal()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.target_text}, {self.params()})"

    @staticmethod
    def _as_params(**values: Any) -> dict[str, Param]:
        return {k: v for k, v in values.items() if v is not None}
