"""Faults on the broker process: crash (SIGKILL), clean stop (SIGTERM), pause (freezer).

Through the broker's proxies a crashed or stopped broker looks *refused*: Toxiproxy accepts the client,
fails to dial the dead upstream and closes at once. A paused broker looks *silent*: its kernel still
completes TCP handshakes but the frozen JVM never answers. Heal of crash/stop restarts the same
container (``docker start``: data and fixed addresses kept) and waits for "started" logged since then; a
retried heal kills a container the failed attempt left running and starts it again.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from chaos.errors import FaultError
from chaos.faults.base import Effect, Fault, FaultLog, Param
from chaos.faults.targets import Target

if TYPE_CHECKING:
    from chaos.cluster.cluster import KafkaCluster


def container_effect(fault: Fault, held: tuple[str, ...], word: str) -> Effect:
    """Landed when the broker's container was still ``held`` (its Docker status) just before the heal: the
    fault held its whole window — no restart policy, operator or other tool undid it."""
    (broker_id,) = fault.brokers
    container = fault.cluster.broker(broker_id).docker
    container.reload()
    status = container.status
    if status in held:
        return Effect(True, f"broker {broker_id}'s container was {status} just before the heal")
    return Effect(
        False, f"broker {broker_id}'s container was {status}, not {word}, before the heal: something undid it"
    )


class Crash(Fault):
    """``docker kill`` (SIGKILL): the process dies, nothing is flushed or handed over."""

    kind = "crash"
    stops_brokers = True

    def __init__(
        self,
        cluster: KafkaCluster,
        target: Target,
        restart_timeout_s: float = 90.0,
        log: FaultLog | None = None,
    ) -> None:
        super().__init__(cluster, target, log)
        self.restart_timeout_s = restart_timeout_s
        self.restart_s: float | None = None

    def _inject(self) -> None:
        (broker_id,) = self.brokers
        self.cluster.broker(broker_id).docker.kill()

    def _effect(self) -> Effect | None:
        return container_effect(self, ("exited", "dead"), "down")

    def _heal(self) -> None:
        (broker_id,) = self.brokers
        if self.interrupted:  # started again; the session ends, so nobody needs it ready
            self.cluster.restart_broker(broker_id, self.restart_timeout_s, wait=False)
            self.note("restarted without waiting for it to start (the session was interrupted)")
            return
        # a retry: the last attempt's start may have left the process running but stuck (waiting for a
        # quorum that was down then); only a new process registers afresh
        fresh = self.record is not None and self.record.heal_attempts > 0
        self.restart_s = self.cluster.restart_broker(broker_id, self.restart_timeout_s, fresh=fresh)


class Stop(Crash):
    """``docker stop`` (SIGTERM, then SIGKILL after ``grace_s``): controlled shutdown moves leaderships."""

    kind = "stop"

    def __init__(
        self, cluster: KafkaCluster, target: Target, grace_s: int = 30, log: FaultLog | None = None
    ) -> None:
        super().__init__(cluster, target, log=log)
        self.grace_s = grace_s

    def params(self) -> dict[str, Param]:
        return {"grace_s": self.grace_s}

    def _inject(self) -> None:
        (broker_id,) = self.brokers
        self.cluster.broker(broker_id).docker.stop(timeout=self.grace_s)


class Pause(Fault):
    """``docker pause``: the JVM is frozen with every socket open."""

    kind = "pause"

    def _effect(self) -> Effect | None:
        return container_effect(self, ("paused",), "paused")

    def _inject(self) -> None:
        import docker.errors

        (broker_id,) = self.brokers
        try:
            self.cluster.broker(broker_id).docker.pause()
        except docker.errors.APIError as exc:
            if "freezer" not in str(exc) and "cgroup" not in str(exc):
                raise
            raise FaultError(
                f"the engine cannot pause broker {broker_id}: {exc.explanation or exc}\n"
                "  fix: `docker pause` needs the cgroup freezer; a rootless engine has it only on cgroup v2 "
                "with systemd delegating the cgroup to the user (docs/platforms.md): run on a rootful "
                "engine or enable delegation, or use a Stop/Crash fault instead"
            ) from exc

    def _heal(self) -> None:
        (broker_id,) = self.brokers
        wrapped = self.cluster.broker(broker_id).docker
        wrapped.reload()
        if wrapped.status == "paused":
            with contextlib.suppress(Exception):
                wrapped.unpause()
            wrapped.reload()
            if wrapped.status == "paused":
                wrapped.unpause()
