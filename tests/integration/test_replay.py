"""On the real cluster: a run's resolved plan, replayed, hits the same brokers with the same
faults in the same order.

The first run runs a plan of five steps aimed by role (a partition's leader and followers, the group's
coordinator, the active controller), two of them overlapping, under one producer and one group member;
it leaves ``plan.json`` (as given) and ``plan.resolved.json`` (what ran, each step aimed at the broker it
hit). A second run of the same variant, given the resolved plan as ``replay`` (what ``chaos replay`` passes
with ``--chaos-plan``), records a history whose injected faults — kind and brokers, in order — equal the
first run's. (``chaos replay`` itself starts a pytest session with a cluster of its own, which this
session's cluster must not run beside: its command line is covered by tests/unit/scenario/test_replay.py.)
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from chaos.faults.plan import RESOLVED_PLAN_FILE, RUN_GROUP, RUN_TOPIC, FaultStep, Plan
from chaos.faults.targets import ActiveController, CoordinatorOf, FollowerOf, LeaderOf
from chaos.run.layout import PLAN_NAME
from chaos.scenario import ScenarioResult, ScenarioRun, find, views

pytestmark = pytest.mark.integration

PLAN = Plan(
    2026,
    3,
    (
        # the replication cut first, while every broker is up and its follower fetches (a cut behind a
        # restarting broker sees no packet: unknown), the crash last, so no later step waits on its restart
        FaultStep(1.0, 3.0, "replication_cut", FollowerOf(RUN_TOPIC, 2, 0)),
        FaultStep(6.0, 4.0, "latency", CoordinatorOf(RUN_GROUP), (("ms", 200), ("paths", ("ext",)))),
        FaultStep(7.0, 3.0, "network_cut", FollowerOf(RUN_TOPIC, 1, 0)),
        FaultStep(12.0, 3.0, "pause", ActiveController()),
        FaultStep(17.0, 4.0, "crash", LeaderOf(RUN_TOPIC, 0)),
    ),
    22.0,
)


def _run(run: ScenarioRun) -> tuple[ScenarioResult, list[str]]:
    with run:
        run.create_topic(partitions=3, replication_factor=3)
        run.member("consumer-0", duration_s=120.0)
        producer = run.producer(rate=100.0, duration_s=120.0)
        run.wait_for("the first acks", lambda ev: bool(views.outcomes(ev, "ok")), 30)
        nemesis = run.nemesis(run.plan())
        assert nemesis.wait(120)
        producer.stop()
        run.wait_converged(60)
        run.wait_caught_up(60)
        result = run.finish()
    injected = [f"{e.fault} on {e.target}" for e in views.faults(result.events) if e.action == "inject"]
    print(f"\n{run.run_id}: {injected}; errors {nemesis.errors}; {result.summary()}")
    return result, injected


@pytest.mark.timeout(600)
def test_a_replayed_plan_hits_the_same_brokers_in_the_same_order(
    scenario_run: Callable[..., ScenarioRun],
) -> None:
    scenario = find("RN1")
    first = scenario_run(scenario, "remediated", replay=PLAN)
    first_result, first_faults = _run(first)
    assert Plan.read(first.dir / PLAN_NAME) == PLAN
    resolved = Plan.read(first.dir / RESOLVED_PLAN_FILE)
    assert len(first_faults) == len(resolved.steps) >= 4  # a step may be skipped: its broker already hit
    by_kind = {s.kind: s.target for s in resolved.steps}
    for kind in ("crash", "network_cut", "pause"):
        assert kind not in by_kind or isinstance(by_kind[kind], int), by_kind  # aimed at the broker it hit
    assert by_kind["replication_cut"] == FollowerOf(RUN_TOPIC, 2, 0)  # a partition's role: the topic is new

    again = scenario_run(scenario, "remediated", replay=resolved)
    again_result, again_faults = _run(again)
    assert again.topic != first.topic
    assert [f.split(" on ")[0] for f in again_faults] == [s.kind for s in resolved.steps]
    broker_kinds = [f for f in first_faults if not f.startswith("replication_cut")]
    assert [f for f in again_faults if not f.startswith("replication_cut")] == broker_kinds
    for result in (first_result, again_result):
        assert result.audit.verdict == "pass", result.audit.failed_by  # acks=all, idempotent: nothing lost
