"""Faults on a team's service instead of a broker: crash, graceful stop and freeze of one instance.

Each is a :class:`~chaos.faults.base.Fault` (recorded, healed once, retried, healed at the run's end) whose
target is the instance by name (``Client("service-0")``) and which touches no broker. Its heal restarts the
instance (a crash or a stop: a new process, the same container started again) or thaws it (a pause). Its
proof (:class:`~chaos.faults.base.Effect`) is the instance's own state, read from the kernel or the engine:
a crash landed when the instance had exited by SIGKILL (137 in a container) just before the heal, a stop
when it had exited, a pause when its process was stopped (``T`` in ``/proc``) or its container paused.
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

from chaos.faults.base import Effect, Fault, FaultLog, Param
from chaos.faults.targets import Client
from chaos.service.instance import ServiceInstance

if TYPE_CHECKING:
    from chaos.cluster.cluster import KafkaCluster

KILLED_CODES = (-signal.SIGKILL, 128 + signal.SIGKILL)


class _ServiceFault(Fault):
    def __init__(
        self,
        cluster: KafkaCluster,
        instance: ServiceInstance,
        log: FaultLog | None = None,
        *,
        restart: bool = True,
    ) -> None:
        super().__init__(cluster, Client(instance.name), log)
        self.instance = instance
        self.restart = restart

    def resolve_brokers(self) -> tuple[int, ...]:
        return ()

    def params(self) -> dict[str, Param]:
        return {"restart": self.restart}

    def _heal(self) -> None:
        if not self.restart:
            self.note(f"{self.instance.name} left down (restart=False)")
            return
        if self.instance.running:
            self.note(
                f"{self.instance.name} was running again before the heal ({self.instance.state().detail})"
            )
            return
        self.instance.start()
        self.note(f"{self.instance.name} restarted: {self.instance.state().detail}")


class ServiceCrash(_ServiceFault):
    """SIGKILL to the instance's process group (``docker kill``); the heal starts it again."""

    kind = "service_crash"

    def _inject(self) -> None:
        self.instance.crash()

    def _effect(self) -> Effect | None:
        state = self.instance.state()
        if state.status == "exited" and state.exit_code in KILLED_CODES:
            return Effect(True, f"{self.instance.name} was killed just before the heal: {state.detail}")
        return Effect(False, f"{self.instance.name} was not down by SIGKILL before the heal: {state.detail}")


class ServiceStop(_ServiceFault):
    """SIGTERM (``docker stop``), SIGKILL after ``grace_s``: the service closes its clients, commits and
    leaves its group if it handles the signal; the heal starts it again."""

    kind = "service_stop"

    def __init__(
        self,
        cluster: KafkaCluster,
        instance: ServiceInstance,
        grace_s: float = 10.0,
        log: FaultLog | None = None,
        *,
        restart: bool = True,
    ) -> None:
        super().__init__(cluster, instance, log, restart=restart)
        self.grace_s = grace_s
        self.exit_code: int | None = None

    def params(self) -> dict[str, Param]:
        return {"grace_s": self.grace_s, "restart": self.restart}

    def _inject(self) -> None:
        self.instance._need_running("stop")
        self.exit_code = self.instance.stop(self.grace_s)
        self.note(f"{self.instance.name} exited with {self.exit_code}")

    def _effect(self) -> Effect | None:
        state = self.instance.state()
        if state.status == "exited":
            return Effect(True, f"{self.instance.name} was down just before the heal: {state.detail}")
        return Effect(False, f"{self.instance.name} was up before the heal: {state.detail}")


class ServicePause(_ServiceFault):
    """SIGSTOP to the instance's process group (``docker pause``): no thread runs — no poll, no heartbeat —
    with its sockets open; the heal sends SIGCONT (``docker unpause``)."""

    kind = "service_pause"

    def params(self) -> dict[str, Param]:
        return {}

    def _inject(self) -> None:
        self.instance.pause()

    def _effect(self) -> Effect | None:
        state = self.instance.state()
        if state.status == "stopped":
            return Effect(True, f"{self.instance.name} was frozen just before the heal: {state.detail}")
        return Effect(False, f"{self.instance.name} was not frozen before the heal: {state.detail}")

    def _heal(self) -> None:
        if self.instance.state().status != "stopped":
            self.note(f"{self.instance.name} was not frozen at the heal: {self.instance.state().detail}")
            return
        self.instance.resume()
