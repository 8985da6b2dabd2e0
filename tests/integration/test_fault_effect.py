"""Issue 18, item 3 on the real cluster: a fault proves it landed, or the run is inconclusive.

One producer writes to a one-partition topic for 12 s, a group member reads it. Two replication cuts
hold for 4 s each, both iptables DROP rules in a broker's namespace: one cuts a follower of the partition
from its leader (the follower fetches from it all the time), the other is made ineffective on purpose —
the leader cut from its own replication port, which it never dials. The rules' own packet counters
decide: the first dropped packets, the second none — so the run, which lost nothing, is ``unknown`` (a
fault had no observable effect), never ``pass``, with the idle cut named in its reason; the heal events
in the history carry both measures, and so does the report's fault table.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest

from chaos.faults.network import ReplicationCut
from chaos.faults.targets import FollowerOf, LeaderOf
from chaos.history import FaultEvent
from chaos.scenario import Scenario, ScenarioRun, Variant, views
from chaos.workload import IDEMPOTENT

pytestmark = pytest.mark.integration

IDLE_CUT = Scenario(
    scenario_id="cut_nobody_crosses",
    case_id="X18",
    title="A replication cut no broker's traffic crosses",
    source="tests/integration/test_fault_effect.py",
    symptom="a run whose fault never touched traffic was reported as a pass",
    client=IDEMPOTENT,
    guarantee="at_least_once",
    expected_verdict="unknown",
    variants=(Variant("idle", "a follower cut from its leader; the leader cut from itself"),),
)


@pytest.mark.timeout(300)
def test_a_fault_no_traffic_crossed_makes_the_run_inconclusive(
    scenario_run: Callable[..., ScenarioRun],
) -> None:
    with scenario_run(IDLE_CUT, "idle") as run:
        topic = run.create_topic(partitions=1, replication_factor=3)
        run.member("consumer-0")
        producer = run.producer(rate=100.0, duration_s=12.0)
        run.wait_for("the first acks", lambda ev: bool(views.outcomes(ev, "ok")), 30)
        leader = LeaderOf(topic, 0)
        used = run.fault(ReplicationCut, FollowerOf(topic, 0, 0), leader).inject()
        idle = run.fault(ReplicationCut, leader, leader).inject()
        time.sleep(4.0)
        used.heal()
        idle.heal()
        producer.join()
        run.wait_caught_up(30)
        result = run.finish()

    assert used.record is not None
    assert used.record.effect is not None
    assert idle.record is not None
    assert idle.record.effect is not None
    print(f"\nused: {used.record.effect}\nidle: {idle.record.effect}\n{result.summary()}")
    assert used.record.effect.observed, used.record.effect.evidence
    assert not idle.record.effect.observed, idle.record.effect.evidence
    assert result.audit.verdict == "pass", result.audit.failed_by  # nothing was lost: only the proof failed
    assert result.verdict == "unknown"
    reasons = " ".join(result.evidence.reasons())
    assert f"fault {idle.record.seq} (replication_cut on leader of {topic}-0)" in reasons, reasons
    assert f"fault {used.record.seq} " not in reasons, reasons
    effects = {
        json.loads(e.params or "{}")["seq"]: json.loads(e.params or "{}").get("effect")
        for e in result.events
        if isinstance(e, FaultEvent) and e.action == "heal"
    }
    assert effects[used.record.seq]["observed"] is True
    assert effects[idle.record.seq]["observed"] is False
    result.judge()  # the variant expects exactly this: unknown
