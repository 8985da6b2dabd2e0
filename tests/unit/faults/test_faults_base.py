"""The fault contract without Docker: records, idempotent heal, heal on a failed inject."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from chaos.errors import FaultError
from chaos.faults.base import Fault, FaultLog


class FakeCluster:
    """Just enough of a cluster for targets given as broker ids."""

    brokers = (1, 2, 3)

    def broker(self, node_id: int) -> int:
        if node_id not in self.brokers:
            raise FaultError(f"no broker {node_id}")
        return node_id


class Counting(Fault):
    kind = "counting"

    def __init__(self, *args: Any, fail_inject: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.injected = 0
        self.healed = 0
        self.fail_inject = fail_inject

    def _inject(self) -> None:
        self.injected += 1
        if self.fail_inject:
            raise RuntimeError("inject broke")

    def _heal(self) -> None:
        self.healed += 1


def test_context_manager_records_and_heals_once() -> None:
    log = FaultLog()
    events: list[str] = []
    log.subscribe(lambda event, record: events.append(f"{event}:{record.kind}:{record.brokers}"))
    fault = Counting(FakeCluster(), 2, log=log)
    with fault:
        assert fault.active
        assert [f for f in log.active()] == [fault]
        (record,) = log.records()
        assert record.healed_at is None
    fault.heal()
    fault.heal()
    assert (fault.injected, fault.healed) == (1, 1)
    (record,) = log.records()
    assert record.healed_at is not None
    assert record.healed_at >= record.injected_at
    assert log.active() == []
    assert events == ["inject:counting:(2,)", "heal:counting:(2,)"]


def test_heal_runs_when_the_body_raises() -> None:
    log = FaultLog()
    fault = Counting(FakeCluster(), 1, log=log)
    with pytest.raises(ZeroDivisionError), fault:
        _ = 1 / 0
    assert fault.healed == 1
    assert log.active() == []


def test_failed_inject_is_healed_and_recorded() -> None:
    log = FaultLog()
    fault = Counting(FakeCluster(), 3, log=log, fail_inject=True)
    with pytest.raises(RuntimeError, match="inject broke"):
        fault.inject()
    assert fault.healed == 1
    (record,) = log.records()
    assert record.error is not None
    assert "inject failed" in record.error


def test_a_fault_is_injected_once() -> None:
    fault = Counting(FakeCluster(), 1, log=FaultLog())
    fault.inject()
    with pytest.raises(FaultError, match="already injected"):
        fault.inject()
    fault.heal()


def test_unknown_broker_is_refused_before_anything_happens() -> None:
    log = FaultLog()
    fault = Counting(FakeCluster(), 9, log=log)
    with pytest.raises(FaultError, match="no broker 9"):
        fault.inject()
    assert fault.injected == 0
    assert log.records() == []


class RestartingCluster(FakeCluster):
    """Records how Crash restarts a broker."""

    def __init__(self) -> None:
        self.restarts: list[bool] = []
        self.fresh: list[bool] = []
        self.killed: list[int] = []
        self.fail_restarts = 0

    def broker(self, node_id: int) -> Any:
        cluster = self

        class Docker:
            def kill(self) -> None:
                cluster.killed.append(node_id)

        class Broker:
            docker = Docker()

        return Broker()

    def restart_broker(
        self, node_id: int, timeout_s: float = 90.0, *, wait: bool = True, fresh: bool = False
    ) -> float:
        self.restarts.append(wait)
        self.fresh.append(fresh)
        if self.fail_restarts:
            self.fail_restarts -= 1
            raise TimeoutError(f"broker {node_id} did not log started within {timeout_s} s")
        return 0.0


@pytest.mark.parametrize(
    ("body_raises", "waited"), [(None, True), (ValueError, True), (KeyboardInterrupt, False)]
)
def test_a_crash_healed_by_an_interrupt_restarts_the_broker_without_waiting_for_it(
    body_raises: type[BaseException] | None, waited: bool
) -> None:
    from chaos.faults.process import Crash

    cluster = RestartingCluster()
    fault = Crash(cluster, 2, log=FaultLog())  # type: ignore[arg-type]
    with contextlib.suppress(ValueError, KeyboardInterrupt), fault:
        if body_raises is not None:
            raise body_raises
    assert cluster.killed == [2]
    assert cluster.restarts == [waited]
    assert not fault.active
    assert fault.record is not None
    assert any("interrupted" in n for n in fault.record.notes) is not waited


def test_an_interrupt_during_the_inject_undoes_it_without_waiting_and_records_it_undone() -> None:
    """SIGTERM lands while ``docker kill`` runs: the broker is restarted without waiting, the record is
    healed (``healed_at`` set) and carries the inject's failure; the interrupt propagates."""
    from chaos.faults.process import Crash

    class KillInterrupted(RestartingCluster):
        def broker(self, node_id: int) -> Any:
            class Docker:
                def kill(self) -> None:
                    raise KeyboardInterrupt("signal SIGTERM")

            class Broker:
                docker = Docker()

            return Broker()

    cluster = KillInterrupted()
    log = FaultLog()
    fault = Crash(cluster, 2, log=log)  # type: ignore[arg-type]
    with pytest.raises(KeyboardInterrupt):
        fault.inject()
    assert cluster.restarts == [False]
    (record,) = log.records()
    assert record.healed_at is not None
    assert record.error == "inject failed: signal SIGTERM"
    assert log.active() == []


def test_a_retried_crash_heal_starts_a_new_process() -> None:
    """The first restart timed out (the broker ran but never registered: the quorum was down then); the
    retry must not wait on that stuck process again but start a new one."""
    from chaos.faults.process import Crash

    cluster = RestartingCluster()
    cluster.fail_restarts = 1
    fault = Crash(cluster, 2, log=FaultLog())  # type: ignore[arg-type]
    fault.inject()
    with pytest.raises(FaultError, match="did not log started"):
        fault.heal()
    assert fault.active
    fault.heal()
    assert not fault.active
    assert cluster.fresh == [False, True]
    assert fault.record is not None
    assert fault.record.heal_attempts == 2
