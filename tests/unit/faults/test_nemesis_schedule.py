"""The nemesis runs overlapping steps on one thread, heals each after its duration, skips a step whose
broker an active step already hits or that would change nothing, and reports what each step hit (the
resolved plan's input)."""

from __future__ import annotations

import time
from typing import Any, ClassVar

import pytest

import chaos.faults.nemesis
from chaos.cluster.cluster import KafkaCluster
from chaos.cluster.images import ImageSet
from chaos.errors import FaultError
from chaos.faults.base import Fault, FaultLog
from chaos.faults.nemesis import Nemesis
from chaos.faults.plan import FaultStep, Plan


class OnBroker(Fault):
    """Touches nothing; hits the broker its step names (an int target) and remembers when it held."""

    kind = "on_broker"
    held: ClassVar[list[tuple[int, str]]] = []

    def resolve_brokers(self) -> tuple[int, ...]:
        assert isinstance(self.target, int)
        return (self.target,)

    def _inject(self) -> None:
        OnBroker.held.append((self.target, "inject"))  # type: ignore[arg-type]

    def _heal(self) -> None:
        OnBroker.held.append((self.target, "heal (interrupted)" if self.interrupted else "heal"))  # type: ignore[arg-type]


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> KafkaCluster:
    OnBroker.held = []
    monkeypatch.setattr(
        chaos.faults.nemesis, "build_fault", lambda kafka, step, log: OnBroker(kafka, step.target, log=log)
    )
    monkeypatch.setattr(chaos.faults.nemesis, "heal_all", lambda kafka, log=None, interrupted=False: [])
    return KafkaCluster(ImageSet("kafka:x", "toxiproxy:x", "reaper:x", ()))


def test_overlapping_steps_hold_together_and_a_busy_broker_is_skipped(cluster: KafkaCluster) -> None:
    plan = Plan(
        1,
        3,
        (
            FaultStep(0.0, 0.6, "pause", 1),
            FaultStep(0.1, 0.2, "crash", 2),  # inside step 0: both hold
            FaultStep(0.2, 0.2, "network_cut", 1),  # broker 1 is paused: skipped
            FaultStep(0.7, 0.1, "stop", 1),  # after step 0 healed: runs
        ),
    )
    log = FaultLog()
    nemesis = Nemesis(cluster, log).start(plan)
    assert nemesis.wait(10)
    assert OnBroker.held == [
        (1, "inject"),
        (2, "inject"),
        (2, "heal"),
        (1, "heal"),
        (1, "inject"),
        (1, "heal"),
    ]
    assert nemesis.resolved == {0: (1,), 1: (2,), 3: (1,)}
    assert nemesis.skipped == [2]
    assert nemesis.errors == ["network_cut at 0.2s: skipped, broker(s) [1] already hit"]
    assert [r.kind for r in log.records()] == ["on_broker"] * 3
    assert all(r.healed_at is not None for r in log.records())
    assert [s.target for s in plan.resolved(nemesis.resolved).steps] == [1, 2, 1]


def test_stopping_mid_plan_heals_every_active_step(cluster: KafkaCluster) -> None:
    plan = Plan(1, 3, (FaultStep(0.0, 60.0, "pause", 1), FaultStep(0.0, 60.0, "pause", 2)))
    nemesis = Nemesis(cluster).start(plan)
    deadline = time.monotonic() + 5
    while len(OnBroker.held) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    nemesis.stop()
    assert time.monotonic() - started < 5
    assert sorted(OnBroker.held) == [(1, "heal"), (1, "inject"), (2, "heal"), (2, "inject")]
    assert not nemesis.running


def test_an_interrupted_stop_heals_without_waiting_for_the_cluster(
    cluster: KafkaCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    swept: list[bool] = []

    def heal_all(kafka: KafkaCluster, log: FaultLog | None = None, interrupted: bool = False) -> list[str]:
        swept.append(interrupted)
        return []

    monkeypatch.setattr(chaos.faults.nemesis, "heal_all", heal_all)
    plan = Plan(1, 3, (FaultStep(0.0, 60.0, "pause", 1),))

    def interrupted_mid_fault() -> None:
        with Nemesis(cluster).start(plan):
            deadline = time.monotonic() + 5
            while not OnBroker.held and time.monotonic() < deadline:
                time.sleep(0.01)
            raise KeyboardInterrupt  # Ctrl-C, or SIGTERM through the plugin

    with pytest.raises(KeyboardInterrupt):
        interrupted_mid_fault()
    assert OnBroker.held == [(1, "inject"), (1, "heal (interrupted)")]
    assert swept == [True]


def test_a_failed_inject_is_an_error_and_the_plan_goes_on(
    cluster: KafkaCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    def build(kafka: KafkaCluster, step: FaultStep, log: Any) -> Fault:
        if step.target == 3:
            raise FaultError("no leader to target")
        return OnBroker(kafka, step.target, log=log)

    monkeypatch.setattr(chaos.faults.nemesis, "build_fault", build)
    plan = Plan(1, 3, (FaultStep(0.0, 0.1, "pause", 3), FaultStep(0.1, 0.1, "pause", 1)))
    nemesis = Nemesis(cluster).start(plan)
    assert nemesis.wait(10)
    assert nemesis.errors == ["pause at 0.0s: inject: no leader to target"]
    assert nemesis.resolved == {1: (1,)}


def test_a_step_that_would_change_nothing_is_skipped_with_the_reason(
    cluster: KafkaCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Idle(OnBroker):
        def idle_reason(self) -> str | None:
            return "every partition asked is led by its preferred replica already"

    def build(kafka: KafkaCluster, step: FaultStep, log: Any) -> Fault:
        kind = Idle if step.kind == "preferred_election" else OnBroker
        return kind(kafka, step.target, log=log)

    monkeypatch.setattr(chaos.faults.nemesis, "build_fault", build)
    plan = Plan(1, 3, (FaultStep(0.0, 0.1, "preferred_election", 2), FaultStep(0.1, 0.1, "pause", 1)))
    log = FaultLog()
    nemesis = Nemesis(cluster, log).start(plan)
    assert nemesis.wait(10)
    assert nemesis.skipped == [0]
    assert nemesis.errors == [
        "preferred_election at 0.0s: skipped, every partition asked is led by its preferred replica already"
    ]
    assert nemesis.resolved == {1: (1,)}
    assert [r.kind for r in log.records()] == ["on_broker"]  # the skipped step left no fault behind


def test_a_step_injected_late_still_holds_its_whole_window(
    cluster: KafkaCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Step 1 is due while step 0's heal takes 0.6 s (a broker restarting): injected late, it still holds
    its planned 0.3 s instead of being healed at once."""
    held: dict[int, list[float]] = {}

    class Timed(OnBroker):
        def _inject(self) -> None:
            held.setdefault(self.target, []).append(time.monotonic())  # type: ignore[arg-type]

        def _heal(self) -> None:
            held[self.target].append(time.monotonic())  # type: ignore[index]
            if self.target == 1:
                time.sleep(0.6)

    monkeypatch.setattr(
        chaos.faults.nemesis, "build_fault", lambda kafka, step, log: Timed(kafka, step.target, log=log)
    )
    plan = Plan(1, 3, (FaultStep(0.0, 0.1, "crash", 1), FaultStep(0.2, 0.3, "pause", 2)))
    nemesis = Nemesis(cluster).start(plan)
    assert nemesis.wait(10)
    inject, heal = held[2]
    assert inject - held[1][0] >= 0.6  # late: after step 0's slow heal
    assert heal - inject >= 0.3 - 0.02  # and still its whole window


def test_late_steps_never_hold_more_faults_at_once_than_the_plan(
    cluster: KafkaCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One at a time in the plan: B is injected late (behind A's 0.4 s heal) and keeps its window, so C,
    due while B still holds, is skipped instead of making two at once (once seen in RN1's strong seed 3:
    three faults held together and no broker could start alone)."""

    class SlowHeal(OnBroker):
        def _heal(self) -> None:
            super()._heal()
            if self.target == 1:
                time.sleep(0.4)

    monkeypatch.setattr(
        chaos.faults.nemesis, "build_fault", lambda kafka, step, log: SlowHeal(kafka, step.target, log=log)
    )
    plan = Plan(
        1,
        3,
        (FaultStep(0.0, 0.2, "crash", 1), FaultStep(0.25, 0.2, "crash", 2), FaultStep(0.5, 0.2, "crash", 3)),
    )
    assert plan.max_concurrent == 1
    nemesis = Nemesis(cluster).start(plan)
    assert nemesis.wait(10)
    assert nemesis.skipped == [2]
    assert nemesis.errors == ["crash at 0.5s: skipped, 1 faults already hold (the plan's most at once: 1)"]
    assert OnBroker.held == [(1, "inject"), (1, "heal"), (2, "inject"), (2, "heal")]


def test_a_failed_heal_is_retried_before_the_plan_ends(
    cluster: KafkaCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Step 0's first heal fails (a broker that did not start in time): it is healed again
    ``HEAL_RETRY_S`` later, while the plan still runs, so step 1 on the same broker is not skipped."""

    class FailsOnce(OnBroker):
        def _heal(self) -> None:
            super()._heal()
            if self.record is not None and self.record.heal_attempts == 0:
                raise FaultError("broker 1 did not log started")

    monkeypatch.setattr(chaos.faults.nemesis, "HEAL_RETRY_S", 0.1)
    monkeypatch.setattr(
        chaos.faults.nemesis, "build_fault", lambda kafka, step, log: FailsOnce(kafka, step.target, log=log)
    )
    plan = Plan(1, 3, (FaultStep(0.0, 0.1, "crash", 1), FaultStep(0.5, 0.1, "pause", 1)))
    log = FaultLog()
    nemesis = Nemesis(cluster, log).start(plan)
    assert nemesis.wait(10)
    assert OnBroker.held == [(1, "inject"), (1, "heal"), (1, "heal"), (1, "inject"), (1, "heal"), (1, "heal")]
    assert nemesis.skipped == []
    assert nemesis.errors == [
        "crash at 0.0s: heal: broker 1 did not log started",
        "pause at 0.5s: heal: broker 1 did not log started",
    ]
    assert [r.heal_attempts for r in log.records()] == [2, 2]
    assert all(r.healed_at is not None for r in log.records())


class Stopping(OnBroker):
    """Takes its broker's process down, as a crash does."""

    stops_brokers = True


@pytest.mark.parametrize(("brokers", "skipped"), [(3, [1]), (5, [])])
def test_faults_that_stop_brokers_never_hold_on_a_majority_of_the_voters(
    monkeypatch: pytest.MonkeyPatch, brokers: int, skipped: list[int]
) -> None:
    OnBroker.held = []
    stopping = {"crash", "remove_broker"}

    def build(kafka: Any, step: FaultStep, log: FaultLog) -> Fault:
        kind = Stopping if step.kind in stopping else OnBroker
        return kind(kafka, step.target, log=log)

    monkeypatch.setattr(chaos.faults.nemesis, "build_fault", build)
    monkeypatch.setattr(chaos.faults.nemesis, "heal_all", lambda kafka, log=None, interrupted=False: [])
    from chaos.cluster.config import ClusterConfig

    cluster = KafkaCluster(ImageSet("kafka:x", "toxiproxy:x", "reaper:x", ()), ClusterConfig(brokers=brokers))
    plan = Plan(
        1,
        brokers,
        (
            FaultStep(0.0, 0.5, "crash", 1),
            FaultStep(0.1, 0.2, "remove_broker", 2),  # two of three voters down: no quorum left
            FaultStep(0.1, 0.2, "pause", 3),  # a paused broker starts again without a quorum: it runs
        ),
    )
    nemesis = Nemesis(cluster, FaultLog()).start(plan)
    assert nemesis.wait(10)
    assert nemesis.skipped == skipped
    if skipped:
        assert nemesis.errors == [
            "remove_broker at 0.1s: skipped, brokers [1, 2] down at once would leave the 3 quorum voters "
            "no majority"
        ]
    assert sorted(nemesis.resolved) == [i for i in range(3) if i not in skipped]
