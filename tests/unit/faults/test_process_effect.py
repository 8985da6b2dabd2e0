"""A process fault proves it held: the broker's container was still down (crash, stop) or frozen (pause)
just before the heal; a container something else brought back makes the fault's effect unobserved."""

from __future__ import annotations

from types import SimpleNamespace

from chaos.faults.base import FaultLog
from chaos.faults.process import Crash, Pause, Stop


class Container:
    def __init__(self) -> None:
        self.status = "running"

    def reload(self) -> None:
        pass

    def kill(self) -> None:
        self.status = "exited"

    def stop(self, timeout: int) -> None:
        self.status = "exited"

    def pause(self) -> None:
        self.status = "paused"

    def unpause(self) -> None:
        self.status = "running"


class Cluster:
    def __init__(self) -> None:
        self.container = Container()

    def broker(self, node_id: int) -> SimpleNamespace:
        return SimpleNamespace(node_id=node_id, docker=self.container)

    def restart_broker(
        self, node_id: int, timeout_s: float = 90.0, wait: bool = True, fresh: bool = False
    ) -> float:
        self.container.status = "running"
        return 0.0


def test_a_crash_a_stop_and_a_pause_that_held_landed() -> None:
    for kind, held in ((Crash, "exited"), (Stop, "exited"), (Pause, "paused")):
        cluster = Cluster()
        fault = kind(cluster, 2, log=FaultLog())  # type: ignore[arg-type]
        fault.inject()
        fault.heal()
        assert fault.record is not None
        assert fault.record.effect is not None
        assert fault.record.effect.observed, fault.record.effect
        assert fault.record.effect.evidence == f"broker 2's container was {held} just before the heal"
        assert cluster.container.status == "running"


def test_a_broker_brought_back_behind_the_faults_back_did_not_stay_down() -> None:
    cluster = Cluster()
    crash = Crash(cluster, 1, log=FaultLog())  # type: ignore[arg-type]
    crash.inject()
    cluster.container.status = "running"  # a restart policy, an operator
    crash.heal()
    assert crash.record is not None
    assert crash.record.effect is not None
    assert not crash.record.effect.observed
    assert "was running, not down, before the heal" in crash.record.effect.evidence
