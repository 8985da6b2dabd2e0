"""The consumer side on the real cluster: the audit measures the outages a consumer sees.

- **a frozen transactional producer blocks a read_committed group**: producer ``frozen`` (``freeze_in_txn``)
  SIGSTOPs itself inside its second transaction, after that transaction's records are in the log; producer
  ``steady`` keeps committing transactions to the same single partition. The group reads ``read_committed``:
  it cannot read past the frozen transaction's first record (the last stable offset stays there), so
  ``steady``'s commits pile up unread until the test thaws ``frozen`` ``STALL_S`` later and it commits. The
  audit's longest consume gap must be that stall — within 1 s of the freeze-to-thaw time the test measured
  on the same clock — and resumed.
- **a killed member**: member ``doomed`` (a child process) and member ``survivor`` share 4 partitions while
  a producer writes; ``doomed`` is SIGKILLed — no LeaveGroup — so its partitions wait for the coordinator
  to expire its session (``session.timeout.ms``) and hand them to ``survivor``. The audit's handover of
  those partitions must be about the session timeout: at least the timeout less one heartbeat interval and
  a margin (the session timer runs from ``doomed``'s last heartbeat), at most the timeout plus the
  rebalance's few seconds.
- **a frozen member** (``chaos.faults.client.ClientPause``): the same two members, ``doomed``
  frozen by SIGSTOP instead of killed, until ``survivor`` owns its partitions: the freeze is a fault window
  in the history (target the member), ``survivor`` takes each partition over after about the session
  timeout (measured on the history: :func:`takeovers` says why not with the audit's handover), and the
  audit's longest gap of each partition is at least as long; nothing is lost.
- **a member cut from the cluster** (a network fault on one client): ``doomed`` runs on a client
  path of its own (``ext1``); ``Refuse`` on it cuts that path on every broker while ``survivor`` and the
  producer keep the shared path. ``doomed``'s partitions move to ``survivor`` after about the session
  timeout, and ``survivor``'s deliveries never stop during the cut.

Each test is bounded (every wait has a timeout) and takes under a minute here.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from chaos.faults.base import Fault
from chaos.faults.client import ClientPause
from chaos.faults.toxics import Refuse
from chaos.history import Event, FaultEvent, TxnMarker
from chaos.scenario import Scenario, ScenarioResult, ScenarioRun, Variant, views
from chaos.workload import IDEMPOTENT, TRANSACTIONAL, AnyProducer, ProcessMember

pytestmark = pytest.mark.integration

SOURCE = "tests/integration/test_consumer_outages.py"
SESSION_S, HEARTBEAT_S = 6.0, 1.0
GROUP = {
    "session.timeout.ms": int(SESSION_S * 1000),
    "heartbeat.interval.ms": int(HEARTBEAT_S * 1000),
    "max.poll.interval.ms": 10_000,
}

# ---- a frozen transactional producer blocks a read_committed group ----------------------------------

STALL_S = 8.0
TXN = 10

FROZEN = Scenario(
    scenario_id="read_committed_behind_a_frozen_transaction",
    case_id="X14",
    title="A read_committed group blocked behind the open transaction of a frozen producer",
    source=SOURCE,
    symptom=(
        "a read_committed consumer blocked 23.5 s behind an open transaction showed a longest outage of "
        "1.2 s: the availability figures measured the producers only"
    ),
    client=TRANSACTIONAL,
    guarantee="exactly_once",
    expected_verdict="pass",
    consumer_config=GROUP,
    variants=(
        Variant(
            "frozen",
            f"one of two transactional producers SIGSTOPs itself inside a transaction for {STALL_S:.0f} s",
        ),
    ),
)


def froze(events: list[Event]) -> bool:
    return bool(views.client_logs(events, facility="TXN_FREEZE"))


def test_a_frozen_transaction_stalls_the_read_committed_group_for_as_long_as_it_is_frozen(
    scenario_run: Callable[..., ScenarioRun],
) -> None:
    with scenario_run(FROZEN, "frozen") as run:
        run.create_topic(partitions=1, replication_factor=3)
        run.member("consumer-0")  # read_committed (the TRANSACTIONAL profile)
        steady = run.txn_producer("steady", txn_size=5, rate=50.0, duration_s=STALL_S + 12.0)
        run.wait_for("the group reads steady's commits", lambda ev: bool(views.deliveries(ev)), 30)
        frozen = run.txn_producer("frozen", txn_size=TXN, rate=100.0, count=TXN * 3, freeze_in_txn=2)
        run.wait_for("frozen stopped itself inside its second transaction", froze, 30, interval_s=0.02)
        time.sleep(STALL_S)
        frozen.resume()
        run.note("frozen resumed")
        assert frozen.wait(30.0) == 0, f"frozen did not finish: {frozen.stderr_tail()}"
        assert steady.wait(30.0) == 0, f"steady did not finish: {steady.stderr_tail()}"
        run.wait_caught_up(30)
        result = run.finish()

    events = list(result.events)
    freeze = views.client_logs(events, facility="TXN_FREEZE")[0]
    thaw = next(e for e in views.client_logs(events, facility="SCENARIO") if e.message == "frozen resumed")
    stalled = thaw.mono - freeze.mono
    frozen_commits = [
        e for e in events if isinstance(e, TxnMarker) and e.process == "frozen" and e.action == "commit"
    ]
    during = [
        e for e in events if isinstance(e, TxnMarker) and e.process == "steady" and e.action == "commit"
        and freeze.mono < e.mono < thaw.mono and e.outcome == "ok"
    ]  # fmt: skip
    gap = result.audit.facts.availability.consumer.longest_gap()
    print(
        f"\nfrozen {stalled:.2f} s, {len(during)} of steady's transactions committed meanwhile; "
        f"longest consume gap {gap}; {result.summary()}"
    )
    assert len(frozen_commits) == 3, "the frozen producer committed its three transactions once thawed"
    assert len(during) >= 10, "steady kept committing while frozen was stopped: records were readable"
    assert gap is not None
    assert gap.resumed
    assert gap.start_mono < thaw.mono < gap.end_mono
    assert abs(gap.gap_s - stalled) <= 1.0, f"gap {gap.gap_s:.2f} s, the producer was frozen {stalled:.2f} s"
    assert result.audit.verdict == "pass", result.audit.failed_by


# ---- a killed member: its partitions wait for the session timeout -----------------------------------

PARTITIONS = 4
DOOMED, SURVIVOR = "doomed", "survivor"

KILLED = Scenario(
    scenario_id="killed_member_handover",
    case_id="X14",
    title="A group member SIGKILLed: its partitions unconsumed until its session expires",
    source=SOURCE,
    symptom=(
        "a crashed member's partitions were left unconsumed for 10.9 s until session.timeout.ms, and the "
        "run's longest outage read 1.4 s"
    ),
    client=IDEMPOTENT,
    guarantee="at_least_once",
    expected_verdict="pass",
    consumer_config=GROUP,
    variants=(Variant("killed", f"one of two members SIGKILLed; session.timeout.ms {SESSION_S * 1000:.0f}"),),
)


def owned(events: list[Event], process: str) -> set[int]:
    """The partitions ``process`` was last assigned (eager or cooperative: assigns minus later revokes)."""
    held: set[int] = set()
    for r in views.rebalances(events, process):
        parts = {p.partition for p in r.partitions}
        held = held | parts if r.action == "assign" else held - parts
    return held


def two_members_consuming(
    run: ScenarioRun, client_path: str | None = None
) -> tuple[ProcessMember, AnyProducer, set[int]]:
    """``DOOMED`` (a child process, on ``client_path``) and ``SURVIVOR`` sharing the run's ``PARTITIONS``
    partitions while a producer writes, both consuming; returns the doomed member, the producer and the
    partitions it holds."""
    run.create_topic(partitions=PARTITIONS, replication_factor=3)
    doomed = ProcessMember(run.context_on(client_path), run.member_spec(DOOMED)).start()
    run.on_close(lambda: doomed.stop())
    run.member(SURVIVOR)
    producer = run.producer(rate=100.0, duration_s=30.0)
    run.wait_for(
        "both members consuming",
        lambda ev: all(views.deliveries(ev, p) for p in (DOOMED, SURVIVOR)) and bool(owned(ev, DOOMED)),
        45,
    )
    time.sleep(2.0)
    return doomed, producer, owned(run.events(), DOOMED)


def fault_until_taken_over(
    run: ScenarioRun, fault: Callable[..., Fault], client_path: str | None = None
) -> tuple[ScenarioResult, set[int]]:
    """Two members consuming (:func:`two_members_consuming`, ``DOOMED`` on ``client_path``); ``fault`` on
    ``DOOMED`` until ``SURVIVOR`` owns its partitions, healed, the producer done, the group caught up;
    the run finished. Its result and the partitions ``DOOMED`` held."""
    doomed, producer, held = two_members_consuming(run, client_path)
    with run.fault(fault, doomed):
        run.wait_for(
            f"{SURVIVOR} consumes {DOOMED}'s partitions",
            lambda ev: held <= owned(ev, SURVIVOR),
            SESSION_S + 20,
        )
    producer.join()
    run.wait_caught_up(45)
    return run.finish(), held


def test_a_killed_members_partitions_are_handed_over_after_its_session_timeout(
    scenario_run: Callable[..., ScenarioRun],
) -> None:
    with scenario_run(KILLED, "killed") as run:
        doomed, producer, held = two_members_consuming(run)
        doomed.crash()
        run.note(f"{DOOMED} SIGKILLed holding partitions {sorted(held)}")
        run.wait_for(
            f"{SURVIVOR} consumes {DOOMED}'s partitions",
            lambda ev: held <= owned(ev, SURVIVOR) and held <= {
                d.partition for d in views.deliveries(ev, SURVIVOR) if d.mono > kill_mono(ev)
            },
            SESSION_S + 20,
        )  # fmt: skip
        producer.join()
        run.wait_caught_up(30)
        result = run.finish()

    events = list(result.events)
    kill = kill_mono(events)
    handovers = {h.partition: h for h in result.audit.facts.availability.consumer.handovers}
    gaps = {g.partition: g for g in result.audit.facts.availability.consumer.gaps}
    print(
        f"\n{DOOMED} held {sorted(held)}; handovers "
        + ", ".join(f"p{p} {handovers[p].handover_s:.2f} s" for p in sorted(held) if p in handovers)
        + f"; gaps {', '.join(f'p{p} {g.gap_s:.2f} s' for p, g in sorted(gaps.items()))}; {result.summary()}"
    )
    assert held, f"{DOOMED} held no partition when it was killed"
    for partition in held:
        handover = handovers.get(partition)
        assert handover is not None, f"no handover of partition {partition}"
        assert (handover.from_process, handover.to_process) == (DOOMED, SURVIVOR)
        assert not handover.left, "a SIGKILLed member runs no revoke callback"
        assert handover.start_mono <= kill < handover.end_mono
        assert SESSION_S - HEARTBEAT_S - 0.5 <= handover.handover_s <= SESSION_S + 5.0, handover
        # the partition waited for as long: records were readable all along (the producer kept writing)
        assert gaps[partition].gap_s >= handover.handover_s - 0.5, gaps[partition]
    assert result.audit.verdict == "pass", result.audit.failed_by


def takeovers(events: list[Event], held: set[int], inject: FaultEvent, heal: FaultEvent) -> dict[int, float]:
    """Per partition ``DOOMED`` held, how long it went unconsumed across the fault: from ``DOOMED``'s last
    delivery of it in the first half of the fault window (or before) to ``SURVIVOR``'s first delivery of it
    after the inject.

    Measured on the history, not with the audit's handover, on purpose: a member thawed or reconnected at
    the heal may deliver one more record it had fetched before it learns it lost the partition (a zombie
    delivery, measured once: 8 ms before ``SURVIVOR``'s first), and the handover then starts there.
    """
    half = inject.mono + (heal.mono - inject.mono) / 2
    found: dict[int, float] = {}
    for partition in held:
        before = [
            d.mono for d in views.deliveries(events, DOOMED) if d.partition == partition and d.mono < half
        ]
        after = [
            d.mono
            for d in views.deliveries(events, SURVIVOR)
            if d.partition == partition and d.mono > inject.mono
        ]
        if before and after:
            found[partition] = min(after) - max(before)
    return found


def kill_mono(events: list[Event]) -> float:
    """When the test killed the member (its note), on the history's clock; infinity before that."""
    notes = [e for e in views.client_logs(events, facility="SCENARIO") if "SIGKILLed" in e.message]
    return notes[0].mono if notes else float("inf")


# ---- a frozen member: the client fault ---------------------------------------------------------------

FROZEN_MEMBER = Scenario(
    scenario_id="frozen_member_handover",
    case_id="X14",
    title="A group member frozen (SIGSTOP) past its session: its partitions handed over, then it rejoins",
    source=SOURCE,
    symptom="a member stalled by a long GC pause lost its partitions after session.timeout.ms",
    client=IDEMPOTENT,
    guarantee="at_least_once",
    expected_verdict="pass",
    consumer_config=GROUP,
    variants=(
        Variant(
            "frozen", f"one of two members frozen until its partitions moved (session {SESSION_S:.0f} s)"
        ),
    ),
)


def test_a_frozen_members_partitions_are_handed_over_and_the_freeze_is_a_recorded_fault(
    scenario_run: Callable[..., ScenarioRun],
) -> None:
    """``ClientPause`` on a process member: the history holds the fault's window (target the member, no
    broker), the member's partitions move to its colleague after about the session timeout (the audit's
    gaps agree), and nothing is lost once it is thawed and rejoins."""
    with scenario_run(FROZEN_MEMBER, "frozen") as run:
        result, held = fault_until_taken_over(run, ClientPause)

    events = list(result.events)
    inject, heal = views.faults(events, "client_pause")
    moved = takeovers(events, held, inject, heal)
    gaps = {g.partition: g for g in result.audit.facts.availability.consumer.gaps}
    print(
        f"\n{DOOMED} held {sorted(held)}, frozen {heal.mono - inject.mono:.2f} s; taken over after "
        + ", ".join(f"p{p} {s:.2f} s" for p, s in sorted(moved.items()))
        + f"; {result.summary()}"
    )
    assert (inject.action, inject.target, heal.action, heal.target) == ("inject", DOOMED, "heal", DOOMED)
    assert heal.error is None
    assert held, f"{DOOMED} held no partition when it was frozen"
    assert_taken_over(held, moved, gaps)
    assert result.audit.verdict == "pass", result.audit.failed_by


def assert_taken_over(held: set[int], moved: dict[int, float], gaps: dict[int, Any]) -> None:
    """Each partition ``DOOMED`` held went to ``SURVIVOR`` after about the session timeout (at least the
    timeout less one heartbeat and a margin: the timer runs from the last heartbeat; at most the timeout
    plus the rebalance's seconds), and the audit's longest gap of that partition saw as long a wait."""
    for partition in held:
        assert partition in moved, f"{SURVIVOR} never delivered partition {partition} after the fault"
        waited = moved[partition]
        assert SESSION_S - HEARTBEAT_S - 0.5 <= waited <= SESSION_S + 5.0, (partition, waited)
        assert gaps[partition].gap_s >= waited - 0.5, (gaps[partition], waited)


# ---- a member cut from the cluster: a network fault on one client -------------------------------------

CUT_MEMBER = Scenario(
    scenario_id="cut_member_handover",
    case_id="X14",
    title="A member cut from the cluster: its partitions handed over while its colleague keeps consuming",
    source=SOURCE,
    symptom=(
        "a consumer cut from the coordinator (a zombie) lost its partitions after session.timeout.ms while "
        "the rest of the group kept consuming"
    ),
    client=IDEMPOTENT,
    guarantee="at_least_once",
    expected_verdict="pass",
    consumer_config=GROUP,
    variants=(
        Variant(
            "cut",
            f"one of two members cut (its own client path refused) until its partitions moved "
            f"(session {SESSION_S:.0f} s)",
        ),
    ),
)
SURVIVOR_STALL_S = 2.0
"""The longest ``survivor`` may go without a delivery during the cut: the producer writes ~25 records/s to
each partition, and the eager rebalance that hands it ``doomed``'s partitions takes well under a second."""


def test_a_cut_members_partitions_move_while_its_colleague_keeps_consuming(
    scenario_run: Callable[..., ScenarioRun],
) -> None:
    with scenario_run(CUT_MEMBER, "cut") as run:
        result, held = fault_until_taken_over(run, Refuse, client_path="ext1")

    events = list(result.events)
    inject, heal = views.faults(events, "refuse")
    during = [d.mono for d in views.deliveries(events, SURVIVOR) if inject.mono <= d.mono <= heal.mono]
    marks = [inject.mono, *during, heal.mono]
    longest = max(b - a for a, b in itertools.pairwise(marks))
    moved = takeovers(events, held, inject, heal)
    gaps = {g.partition: g for g in result.audit.facts.availability.consumer.gaps}
    print(
        f"\n{DOOMED} held {sorted(held)}, cut {heal.mono - inject.mono:.2f} s; {SURVIVOR} delivered "
        f"{len(during)} meanwhile, longest pause {longest:.2f} s; taken over after "
        + ", ".join(f"p{p} {s:.2f} s" for p, s in sorted(moved.items()))
        + f"; {result.summary()}"
    )
    assert (inject.target, heal.target, heal.error) == (DOOMED, DOOMED, None)
    assert json.loads(inject.params)["paths"] == ["ext1"], inject.params
    assert held, f"{DOOMED} held no partition when it was cut"
    assert_taken_over(held, moved, gaps)
    assert longest <= SURVIVOR_STALL_S, f"{SURVIVOR} stopped consuming for {longest:.2f} s during the cut"
    assert result.audit.verdict == "pass", result.audit.failed_by
