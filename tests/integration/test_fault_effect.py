"""Issue 18, item 3 on the real cluster: a toxic proves it landed, or the run is inconclusive.

One producer writes to a one-partition topic through the shared client path for 12 s. Two latency toxics
hold for 4 s each: one on the ext path of the partition's leader (the producer's traffic goes through it),
one on client path ``ext1`` of the same broker, which no client of this run uses. Toxiproxy's own byte
counters (``-proxy-metrics``) decide: the first toxic's links moved bytes, the second's none — so the run,
which lost nothing, is ``unknown`` (a fault had no observable effect), never ``pass``, with the idle toxic
named in its reason, and the heal events in the history carry both measures.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest

from chaos.faults.targets import LeaderOf
from chaos.faults.toxics import Latency
from chaos.history import FaultEvent
from chaos.scenario import Scenario, ScenarioRun, Variant, views
from chaos.workload import IDEMPOTENT

pytestmark = pytest.mark.integration

IDLE_TOXIC = Scenario(
    scenario_id="toxic_on_an_unused_path",
    case_id="X18",
    title="A latency toxic on a client path no client uses",
    source="tests/integration/test_fault_effect.py",
    symptom="a run whose toxic never touched traffic was reported as a pass",
    client=IDEMPOTENT,
    guarantee="at_least_once",
    expected_verdict="unknown",
    variants=(Variant("idle", "one toxic on the producer's path, one on ext1, which nobody uses"),),
)


@pytest.mark.timeout(300)
def test_a_toxic_no_traffic_went_through_makes_the_run_inconclusive(
    scenario_run: Callable[..., ScenarioRun],
) -> None:
    with scenario_run(IDLE_TOXIC, "idle") as run:
        topic = run.create_topic(partitions=1, replication_factor=3)
        producer = run.producer(rate=100.0, duration_s=12.0)
        run.wait_for("the first acks", lambda ev: bool(views.outcomes(ev, "ok")), 30)
        leader = LeaderOf(topic, 0)
        used = run.fault(Latency, leader, ms=200, direction="both").inject()
        idle = run.fault(Latency, leader, ms=200, paths=("ext1",), direction="both").inject()
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
    assert f"fault {idle.record.seq} (latency on leader of {topic}-0)" in reasons, reasons
    assert f"fault {used.record.seq} " not in reasons, reasons
    effects = {
        json.loads(e.params or "{}")["seq"]: json.loads(e.params or "{}").get("effect")
        for e in result.events
        if isinstance(e, FaultEvent) and e.action == "heal"
    }
    assert effects[used.record.seq]["observed"] is True
    assert effects[idle.record.seq]["observed"] is False
    result.judge()  # the variant expects exactly this: unknown
