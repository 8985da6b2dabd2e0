"""On the real cluster: a fault proves it landed, or the run is inconclusive.

One producer writes to a one-partition topic for 12 s, a group member reads it. Three faults hold for
4 s together, one of them ineffective on purpose. A replication cut (iptables DROP rules in the
follower's namespace) of a follower of the partition from its leader, which it fetches from all the time:
its rules' packet counters decide. Two 100 ms latency toxics: on the leader's shared client path (the
producer's and the member's traffic) and on its client path ``ext1``, which no client of this run uses —
the cluster's packet meter on the proxies' ports decides. The cut and the first toxic landed, the second
toxic did not, so the run, which lost nothing, is ``unknown`` (a fault had no observable effect), never
``pass``, with the idle toxic named in its reason; the heal events in the history carry every measure.
(A cut of the leader from its own replication port is not reliably idle: on the shared cluster the
leader sent it 2 packets once — transaction markers and other requests go through that listener — so the
idle cut is covered by tests/unit/faults/test_fault_heal.py, where the counters are the fake's.)
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest

from chaos.faults.network import ReplicationCut
from chaos.faults.targets import FollowerOf, LeaderOf
from chaos.faults.toxics import Latency
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
    variants=(Variant("idle", "a follower cut from its leader; toxics on a used and an unused path"),),
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
        slow = run.fault(Latency, leader, 100, direction="both").inject()
        unused = run.fault(Latency, leader, 100, paths=("ext1",), direction="both").inject()
        time.sleep(4.0)
        for fault in (used, slow, unused):
            fault.heal()
        producer.join()
        run.wait_caught_up(30)
        result = run.finish()

    effect, seq = {}, {}
    for name, fault in {"used": used, "slow": slow, "unused": unused}.items():
        assert fault.record is not None
        assert fault.record.effect is not None, f"{name}: not measured: {fault.record.notes}"
        effect[name], seq[name] = fault.record.effect, fault.record.seq
        print(f"\n{name}: {fault.record.effect}")
    print(result.summary())
    assert effect["used"].observed, effect["used"].evidence
    assert effect["slow"].observed, effect["slow"].evidence
    assert not effect["unused"].observed, effect["unused"].evidence
    assert result.audit.verdict == "pass", result.audit.failed_by  # nothing was lost: only the proof failed
    assert result.verdict == "unknown"
    reasons = " ".join(result.evidence.reasons())
    assert f"fault {seq['unused']} (latency on leader of {topic}-0)" in reasons, reasons
    assert f"fault {seq['used']} " not in reasons, reasons
    assert f"fault {seq['slow']} " not in reasons, reasons
    effects = {
        json.loads(e.params or "{}")["seq"]: json.loads(e.params or "{}").get("effect")
        for e in result.events
        if isinstance(e, FaultEvent) and e.action == "heal"
    }
    assert effects[seq["used"]]["observed"] is True
    assert effects[seq["slow"]]["observed"] is True
    assert effects[seq["unused"]]["observed"] is False
    result.judge()  # the variant expects exactly this: unknown
