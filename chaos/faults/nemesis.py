"""The nemesis: runs a plan's steps on a background thread and heals everything in ``finally``."""

from __future__ import annotations

import heapq
import threading
import time
from typing import TYPE_CHECKING

from chaos.errors import FaultError
from chaos.faults.base import DEFAULT_LOG, Fault, FaultLog
from chaos.faults.heal import HEAL_ATTEMPTS, heal_all
from chaos.faults.plan import CLUSTER_KINDS, FaultStep, Plan, build_fault

if TYPE_CHECKING:
    from types import TracebackType

    from chaos.cluster.cluster import KafkaCluster

_HEAL, _INJECT = 0, 1  # at one instant a heal goes first: the broker it frees may be the next one's target
HEAL_RETRY_S = 5.0
"""A step whose heal failed is healed again this long after (at most ``HEAL_ATTEMPTS`` in all), not only at
the plan's end: until then its broker stays hit, and every later step aimed at it is skipped."""


class Nemesis:
    """``start(plan)``, then ``stop()`` (or leave the ``with`` block): the cluster is healed either way.

    Steps start at their ``at_s`` and heal after their ``duration_s``, several at once when the plan
    overlaps them, in one thread (an inject or heal that takes seconds delays the next event; the history
    records when each really happened; a step injected late still holds for its whole ``duration_s``, so a
    short window is never cut shorter than planned; a heal that failed is tried again ``HEAL_RETRY_S`` later,
    up to ``HEAL_ATTEMPTS`` times, then at the plan's end). A step whose brokers, resolved when it is due, are
    already hit by an active step is skipped (``skipped``): two faults on one broker (a crash under a network
    cut) could not be healed in either order; so is a step that would change nothing when it is due
    (:meth:`~chaos.faults.base.Fault.idle_reason`: a preferred election where the preferred replicas
    lead). ``resolved``: step index -> the brokers its fault hit (what
    :meth:`~chaos.faults.plan.Plan.resolved` turns into a replayable plan). ``must_land``: each fault's
    (:attr:`~chaos.faults.base.Fault.must_land`). Errors from a step are collected in ``errors`` (the run
    continues with the next step); the nemesis never asserts anything.
    """

    def __init__(self, cluster: KafkaCluster, log: FaultLog | None = None, *, must_land: bool = True) -> None:
        self.cluster = cluster
        self.log = log if log is not None else DEFAULT_LOG
        self.must_land = must_land
        self.errors: list[str] = []
        self.done: list[Fault] = []
        self.resolved: dict[int, tuple[int, ...]] = {}
        self.skipped: list[int] = []
        self._stop = threading.Event()
        self._interrupted = False
        self._thread: threading.Thread | None = None
        self._active: dict[int, Fault] = {}

    def start(self, plan: Plan) -> Nemesis:
        if self._thread is not None:
            raise FaultError("this nemesis already ran a plan; create another one")
        self._thread = threading.Thread(target=self._run, args=(plan,), name="chaos-nemesis", daemon=True)
        self._thread.start()
        return self

    def _run(self, plan: Plan) -> None:
        began = time.monotonic()
        due = [(step.at_s, _INJECT, index) for index, step in enumerate(plan.steps)]
        heapq.heapify(due)
        try:
            while due:
                at, action, index = heapq.heappop(due)
                if self._stop.wait(max(0.0, began + at - time.monotonic())):
                    return
                step = plan.steps[index]
                if action == _HEAL:
                    fault = self._heal(index, f"{step.kind} at {step.at_s}s")
                    if fault is not None and fault.record and fault.record.heal_attempts < HEAL_ATTEMPTS:
                        heapq.heappush(due, (time.monotonic() - began + HEAL_RETRY_S, _HEAL, index))
                else:
                    # an inject started late (the thread was busy with a slow heal) still holds its whole
                    # window; the inject's own time (a reassignment's wait) is part of the window
                    late = max(0.0, time.monotonic() - began - step.at_s)
                    if self._inject(index, plan):
                        heapq.heappush(due, (step.end_s + late, _HEAL, index))
        finally:
            for index in sorted(self._active, reverse=True):
                self._heal(index, "final heal")

    def _inject(self, index: int, plan: Plan) -> bool:
        step = plan.steps[index]
        where = f"{step.kind} at {step.at_s}s"
        try:
            skip = self._crowded(step, plan)
            if skip is None:
                fault = build_fault(self.cluster, step, self.log)
                fault.must_land = self.must_land
                brokers = set(fault.resolve_brokers())
                busy = {b for f in self._active.values() for b in f.brokers} & brokers
                skip = f"broker(s) {sorted(busy)} already hit" if busy else self._quorum_left(fault, brokers)
                skip = skip or fault.idle_reason()
            if skip is not None:
                self.skipped.append(index)
                self.errors.append(f"{where}: skipped, {skip}")
                return False
            fault.inject()
        except Exception as exc:
            self.errors.append(f"{where}: inject: {exc}")
            return False
        self._active[index] = fault
        self.resolved[index] = fault.brokers
        return True

    def _crowded(self, step: FaultStep, plan: Plan) -> str | None:
        """Why ``step`` would exceed the plan's concurrency now: a late step keeps its whole window
        (:meth:`_run`), so the faults that hold at once are bounded here, as the plan bounds them."""
        active = [plan.steps[i].kind for i in self._active]
        if not active:
            return None
        if step.kind in CLUSTER_KINDS or any(kind in CLUSTER_KINDS for kind in active):
            return f"{step.kind} may not hold beside {', '.join(active)} (a whole-cluster fault runs alone)"
        if len(active) >= max(plan.max_concurrent, 1):
            return f"{len(active)} faults already hold (the plan's most at once: {plan.max_concurrent})"
        return None

    def _quorum_left(self, fault: Fault, brokers: set[int]) -> str | None:
        """Why ``fault`` would leave no quorum: with the brokers the holding faults took down, it would take
        down a majority of the voters (every broker is one), and no heal could start a broker again — each
        registers only with a quorum. None when a quorum stays up, or the fault takes nothing down."""
        if not fault.stops_brokers:
            return None
        down = brokers | {b for f in self._active.values() if f.stops_brokers for b in f.brokers}
        voters = len(self.cluster.brokers) or self.cluster.config.brokers
        if len(down) <= (voters - 1) // 2:
            return None
        return f"brokers {sorted(down)} down at once would leave the {voters} quorum voters no majority"

    def _heal(self, index: int, where: str) -> Fault | None:
        """Heal step ``index``; the fault when its heal failed (it stays active), else None."""
        fault = self._active.get(index)
        if fault is None:
            return None
        try:
            fault.heal(interrupted=self._interrupted)
        except Exception as exc:
            self.errors.append(f"{where}: heal: {exc}")
            return fault
        del self._active[index]
        self.done.append(fault)
        return None

    def wait(self, timeout_s: float) -> bool:
        """Wait for the plan to finish; True when it did."""
        if self._thread is None:
            return True
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def stop(self, timeout_s: float = 120.0, *, interrupted: bool = False) -> None:
        """Interrupt the plan, heal the current faults, then heal everything in the cluster.
        ``interrupted``: the session is ending (Ctrl-C, SIGTERM): every heal undoes its fault without
        waiting for the cluster to settle (:attr:`Fault.interrupted`)."""
        self._interrupted = self._interrupted or interrupted
        self._stop.set()
        try:
            if self._thread is not None:
                self._thread.join(timeout_s)
                if self._thread.is_alive():
                    self.errors.append(f"nemesis thread still running after {timeout_s} s")
        finally:
            heal_all(self.cluster, self.log, interrupted=self._interrupted)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def __enter__(self) -> Nemesis:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop(interrupted=exc_type is not None and issubclass(exc_type, KeyboardInterrupt))
