"""A partition's leader lost while its followers lag (L2 with a kill, DF1 with a full disk): the writes the
leader acknowledged alone (``acks=1``) die with it in a clean election; with ``acks=all`` and
``min.insync.replicas=2`` none was acknowledged, and none is lost.

:func:`leader_lost_before_replication` runs the timeline and its checks with any fault kind that takes a
broker away (``Crash``, ``DiskFull``, a team's own): the followers cut from the leader (``ReplicationCut``,
shorter than ``replica.lag.time.max.ms``, so they stay in the ISR), the leader lost, a follower elected,
the cuts and the fault healed, the audit judged. The variant named ``vulnerable`` must lose what the
leader acknowledged alone; any other must lose nothing, and have had nothing acknowledged during the cut.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from chaos.faults.base import Fault, FaultRecord
from chaos.faults.network import ReplicationCut
from chaos.history import Event, SendOutcome
from chaos.scenario import views
from chaos.scenario.load import steady_load

if TYPE_CHECKING:
    from chaos.scenario.runner import ScenarioRun

RATE = 50.0
CUT_BEFORE_LOSS_S = 2.5
CUT_DONE = "cut-done"
"""The mark written once both replication cuts are in place (after the second inject returned)."""
SETTLE_S = 0.5
"""Acks this soon after the cut was done may have been replicated before it: not counted."""


def _state(run: ScenarioRun, partition: int) -> tuple[int | None, tuple[int, ...]]:
    state = run.cluster.partition(run.topic, partition)
    return state.leader, tuple(state.isr)


def acked_during_cut(
    events: Sequence[Event], led: Collection[int], loss: Fault | FaultRecord
) -> list[SendOutcome]:
    """The writes to L's partitions (``led``) acknowledged while the followers could not fetch: from
    :data:`SETTLE_S` after the :data:`CUT_DONE` mark to the inject event of the fault that lost L (its
    crash) — found by name and by the fault's identity, whatever notes (a gate run's) or other faults the
    history holds."""
    cut_done = views.mark(events, CUT_DONE)
    crashed = views.fault_event(events, loss, "inject")
    return [
        e
        for e in views.outcomes(events, "ok")
        if e.partition in led and cut_done.mono + SETTLE_S < e.mono < crashed.mono
    ]


def leader_lost_before_replication(run: ScenarioRun, lose: type[Fault], how: str) -> None:
    """L2's timeline and checks with the leader lost to fault kind ``lose`` on its broker (``how`` it went,
    in words: "killed"): the followers cut, the leader lost, a follower elected, the cuts and the fault
    healed; the audit judged, the case's preconditions checked."""
    variant = run.variant.name
    run.create_topic(partitions=3, replication_factor=3)
    producer = steady_load(run, rate=RATE, duration_s=120.0, flush_timeout_s=10.0)

    target = run.target_partition()
    leader, partition = target.leader, target.partition
    followers = tuple(b for b in target.replicas if b != leader)
    led = {s.partition for s in run.cluster.describe_partitions([run.topic]) if s.leader == leader}
    cuts = [run.fault(ReplicationCut, f, leader) for f in followers]
    for cut in cuts:
        cut.inject()
    run.mark(CUT_DONE)
    run.note(f"followers {followers} cut from leader {leader} (partitions {sorted(led)})")
    time.sleep(CUT_BEFORE_LOSS_S)
    isr_at_loss = _state(run, partition)[1]
    loss = run.fault(lose, leader)
    loss.inject()
    fence_s: float | None = None
    with contextlib.suppress(AssertionError):  # a precondition, recorded after finish()
        fence_s = run.wait_until(
            f"a new leader of p{partition}", lambda: _state(run, partition)[0] not in (leader, None), 40
        )
    new_leader = _state(run, partition)[0]
    fenced = f"{fence_s:.1f} s" if fence_s is not None else "not within 40 s"
    run.note(f"p{partition}: leader {new_leader} {fenced} after leader {leader} was {how}")
    for cut in cuts:
        cut.heal()
    acked_at_move = len(views.acked_ids(run.events()))
    loss.heal()
    run.wait_for(
        "writes acknowledged again",
        lambda ev: len(views.acked_ids(ev)) >= acked_at_move + RATE,
        30,
    )
    producer.stop()
    run.wait_caught_up(40)
    result = run.finish()

    events = result.events
    cut_at = min((views.fault_event(events, cut) for cut in cuts), key=lambda e: e.mono)
    lost_at = views.fault_event(events, loss)
    lost = dict(result.audit.facts.anomalies)["lost_acked"].examples
    # Both cuts in place (the mark is written after the second inject returned) until the loss.
    acked_led_during = acked_during_cut(events, led, loss)
    spans = views.leader_timeline(events, run.topic, partition, process="introspect")
    timeline = [(s.leader, round(s.first_mono - lost_at.mono, 1), s.samples) for s in spans]
    not_ok = [e for e in views.outcomes(events) if e.outcome != "ok"]
    print(
        f"\n{variant}: leader {leader} of p{partition} (leads {sorted(led)}), followers {followers}; ISR at "
        f"the loss {isr_at_loss}; new leader {new_leader} {fenced} after L was {how}; acks on L's "
        f"partitions between cuts + {SETTLE_S} s and the loss: {len(acked_led_during)}; non-ok sends "
        f"{len(not_ok)} "
        f"{sorted({e.error or '' for e in not_ok})}; timeline {timeline}"
    )

    assert result.count("unseen_by_group") == 0
    # The followers were still in the ISR when L died: a clean election of a follower.
    in_isr = result.precondition(
        f"P's followers {followers} were still in its ISR when L ({leader}) was {how}",
        set(isr_at_loss) == {leader, *followers},
        f"ISR at the loss {isr_at_loss}",
    )
    elected = result.precondition(
        f"a follower of L was elected leader of p{partition} (a clean election)",
        fence_s is not None and new_leader in followers,
        f"leader {new_leader} {fenced} after L was {how}; timeline {timeline}",
    )
    parts = ", ".join(map(str, sorted(led)))
    during = f"{len(acked_led_during)} acks on partitions {parts} between the cuts + {SETTLE_S} s and L {how}"
    if variant == "vulnerable":
        acked_alone = result.precondition(
            "acks=1: L acknowledged writes alone while its followers could not fetch",
            bool(acked_led_during),
            during,
        )
        if in_isr and elected and acked_alone:
            assert result.count("lost_acked") > 0
            assert "lost_acked" in result.audit.failed_by
            # Lost: values L acknowledged alone, on its partitions, between the cut and the loss.
            assert all(e.partition in led for e in lost), lost
            assert all(e.ts is not None and cut_at.ts <= e.ts <= lost_at.ts + 1.0 for e in lost), lost
    else:
        result.precondition(
            "the cut held: no write to L's partitions acknowledged (acks=all) while the followers were cut",
            not acked_led_during,
            f"{during}: {views.values_text(e.value_id for e in acked_led_during)}",
        )
        assert result.count("lost_acked") == 0
