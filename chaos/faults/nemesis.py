"""The nemesis: runs a plan's steps on a background thread and heals everything in ``finally``."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from chaos.errors import FaultError
from chaos.faults.base import DEFAULT_LOG, Fault, FaultLog
from chaos.faults.heal import heal_all
from chaos.faults.plan import Plan, build_fault

if TYPE_CHECKING:
    from types import TracebackType

    from chaos.cluster.cluster import KafkaCluster


class Nemesis:
    """``start(plan)``, then ``stop()`` (or leave the ``with`` block): the cluster is healed either way.

    Errors from a step are collected in ``errors`` (the run continues with the next step); the nemesis
    never asserts anything.
    """

    def __init__(self, cluster: KafkaCluster, log: FaultLog | None = None) -> None:
        self.cluster = cluster
        self.log = log if log is not None else DEFAULT_LOG
        self.errors: list[str] = []
        self.done: list[Fault] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._current: Fault | None = None

    def start(self, plan: Plan) -> Nemesis:
        if self._thread is not None:
            raise FaultError("this nemesis already ran a plan; create another one")
        self._thread = threading.Thread(target=self._run, args=(plan,), name="chaos-nemesis", daemon=True)
        self._thread.start()
        return self

    def _run(self, plan: Plan) -> None:
        began = time.monotonic()
        try:
            for step in plan.steps:
                if self._stop.wait(max(0.0, began + step.at_s - time.monotonic())):
                    return
                try:
                    fault = build_fault(self.cluster, step, self.log)
                    self._current = fault
                    fault.inject()
                except Exception as exc:
                    self.errors.append(f"{step.kind} at {step.at_s}s: inject: {exc}")
                    continue
                self._stop.wait(step.duration_s)
                try:
                    fault.heal()
                except Exception as exc:
                    self.errors.append(f"{step.kind} at {step.at_s}s: heal: {exc}")
                self.done.append(fault)
                self._current = None
        finally:
            current = self._current
            if current is not None:
                try:
                    current.heal()
                except Exception as exc:
                    self.errors.append(f"final heal of {current!r}: {exc}")

    def wait(self, timeout_s: float) -> bool:
        """Wait for the plan to finish; True when it did."""
        if self._thread is None:
            return True
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def stop(self, timeout_s: float = 120.0) -> None:
        """Interrupt the plan, heal the current fault, then heal everything in the cluster."""
        self._stop.set()
        try:
            if self._thread is not None:
                self._thread.join(timeout_s)
                if self._thread.is_alive():
                    self.errors.append(f"nemesis thread still running after {timeout_s} s")
        finally:
            heal_all(self.cluster, self.log)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def __enter__(self) -> Nemesis:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
