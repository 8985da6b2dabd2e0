"""Cluster operations as faults (``chaos.faults.operations``) on the real cluster, under load.

- **partitions added mid-run**: a topic of 2 partitions grows to 4 while a producer writes and a member
  consumes, both refreshing metadata every second. The operation is in the history (inject and heal, target
  ``topic <name>``); the new partitions are written and read; the audit finds nothing lost or unseen.
- **replicas reassigned**: partition 0 (2 replicas) moves to the third broker and one of its own, and back
  (the heal), under acks=all load: nothing lost.
- **a broker removed**: a follower of partition 0 is stopped and unregistered — gone from the metadata and
  the ISR — and started again (the heal): it registers anew; under acks=all load nothing is lost.
- **a preferred-leader election**: the leader of partition 0 is stopped (controlled shutdown moves its
  leaderships) and restarted, so another replica leads; the election under load moves leadership back to
  the preferred replica. With ``acks=all`` and idempotence nothing acknowledged is lost.

Each test is bounded (every wait has a timeout) and takes under a minute here.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from chaos.cluster.introspect import registered_brokers
from chaos.faults.operations import AddPartitions, PreferredElection, ReassignReplicas, RemoveBroker
from chaos.faults.process import Stop
from chaos.faults.targets import FollowerOf, LeaderOf
from chaos.history import FaultEvent, SendOutcome
from chaos.scenario import Scenario, ScenarioResult, ScenarioRun, Variant, views
from chaos.workload import IDEMPOTENT, AnyProducer

pytestmark = pytest.mark.integration

SOURCE = "tests/integration/test_cluster_operations.py"
REFRESH = {"topic.metadata.refresh.interval.ms": 1000}

GROW = Scenario(
    scenario_id="partitions_added_mid_run",
    case_id="X17",
    title="Partitions added to a topic while it is written and read",
    source=SOURCE,
    symptom="adding partitions was done by hand through the admin client, outside the history",
    client=IDEMPOTENT,
    guarantee="at_least_once",
    expected_verdict="pass",
    variants=(Variant("grow", "2 -> 4 partitions under load; clients refresh metadata every second"),),
)


def faults_of(events: list[FaultEvent], kind: str) -> list[tuple[str, str]]:
    return [(e.action, e.target) for e in events if e.fault == kind]


def start_load(run: ScenarioRun, duration_s: float, overrides: dict[str, int] | None = None) -> AnyProducer:
    """A member consuming the run's topic and a producer writing 100/s for ``duration_s``, both started."""
    run.member("consumer-0", overrides=overrides)
    producer = run.producer(rate=100.0, duration_s=duration_s, overrides=tuple((overrides or {}).items()))
    run.wait_for("the group consuming", lambda ev: bool(views.deliveries(ev)), 30)
    return producer


def finish_load(run: ScenarioRun, producer: AnyProducer) -> ScenarioResult:
    """Let the producer finish (every send acknowledged), the group catch up, and audit the run."""
    assert producer.join().fail == 0
    run.wait_caught_up(30)
    return run.finish()


def test_partitions_added_mid_run_are_recorded_written_and_read(
    scenario_run: Callable[..., ScenarioRun],
) -> None:
    with scenario_run(GROW, "grow") as run:
        run.create_topic(partitions=2, replication_factor=3)
        producer = start_load(run, 20.0, REFRESH)
        grow = run.fault(AddPartitions, run.topic, 4)
        with grow:
            pass
        run.wait_for(
            "the new partitions written and read",
            lambda ev: {2, 3} <= {d.partition for d in views.deliveries(ev)},
            30,
        )
        result = finish_load(run, producer)

    events = list(result.events)
    written = {
        e.partition
        for e in events
        if isinstance(e, SendOutcome) and e.outcome == "ok" and e.partition is not None
    }
    read = {d.partition for d in views.deliveries(events)}
    recorded = faults_of(views.faults(events), "add_partitions")
    print(f"\n{grow.record}; written {sorted(written)}, read {sorted(read)}; {result.summary()}")
    assert recorded == [("inject", f"topic {run.topic}"), ("heal", f"topic {run.topic}")]
    params = json.loads(views.faults(events, "add_partitions")[0].params)
    assert (params["topic"], params["count"]) == (run.topic, 4)
    assert written == read == {0, 1, 2, 3}
    assert result.count("lost_acked") == 0
    assert result.count("unseen_by_group") == 0
    assert result.audit.verdict == "pass", result.audit.failed_by


ELECT = Scenario(
    scenario_id="preferred_election_under_load",
    case_id="X17",
    title="Leadership moved back to the preferred replica while an acks=all producer writes",
    source=SOURCE,
    symptom="moving leadership was done by hand through the admin client, outside the history",
    client=IDEMPOTENT,
    guarantee="idempotent",
    expected_verdict="pass",
    variants=(
        Variant("elect", "stop and restart partition 0's leader, then a preferred election under load"),
    ),
)


def test_a_preferred_election_under_load_moves_leadership_and_loses_nothing(
    scenario_run: Callable[..., ScenarioRun],
) -> None:
    with scenario_run(ELECT, "elect") as run:
        run.create_topic(partitions=3, replication_factor=3)
        preferred = run.cluster.partition(run.topic, 0).replicas[0]
        producer = start_load(run, 25.0)
        with run.fault(Stop, LeaderOf(run.topic, 0)):
            run.wait_until(
                "another replica leads partition 0",
                lambda: run.cluster.partition(run.topic, 0).leader not in (None, preferred),
                30,
            )
        run.wait_until(
            f"broker {preferred} back in partition 0's ISR",
            lambda: preferred in run.cluster.partition(run.topic, 0).isr,
            60,
        )
        election = run.fault(PreferredElection, run.topic)
        with election:
            pass
        leader = run.cluster.partition(run.topic, 0).leader
        result = finish_load(run, producer)

    print(f"\npreferred {preferred}, moved {election.moved}; {result.summary()}")
    assert 0 in election.moved, "partition 0's leadership did not move back"
    assert election.moved[0][1] == preferred == leader
    events = list(result.events)
    assert faults_of(views.faults(events), "preferred_election") == [
        ("inject", f"topic {run.topic}"),
        ("heal", f"topic {run.topic}"),
    ]
    assert result.count("lost_acked") == 0
    assert result.audit.verdict == "pass", result.audit.failed_by


MOVE = Scenario(
    scenario_id="replicas_reassigned_under_load",
    case_id="X17",
    title="A partition's replicas moved to another broker and back while an acks=all producer writes",
    source=SOURCE,
    symptom="reassigning replicas was done by hand, outside the history",
    client=IDEMPOTENT,
    guarantee="idempotent",
    expected_verdict="pass",
    variants=(Variant("move", "1 partition, 2 replicas: move to the third broker (preferred), then back"),),
)


def test_replicas_reassigned_under_load_and_back_lose_nothing(
    scenario_run: Callable[..., ScenarioRun],
) -> None:
    with scenario_run(MOVE, "move") as run:
        run.create_topic(partitions=1, replication_factor=2)
        original = run.cluster.partition(run.topic, 0).replicas
        (spare,) = {1, 2, 3} - set(original)
        target = (spare, original[0])
        producer = start_load(run, 20.0)
        move = run.fault(ReassignReplicas, run.topic, 0, target)
        with move:
            during = run.cluster.partition(run.topic, 0)
        after = run.cluster.partition(run.topic, 0)
        result = finish_load(run, producer)

    print(
        f"\n{original} -> {during.replicas} (leader {during.leader}) -> {after.replicas}; {result.summary()}"
    )
    assert set(during.replicas) == set(target)
    assert set(after.replicas) == set(original)
    events = list(result.events)
    assert faults_of(views.faults(events), "reassign_replicas") == [
        ("inject", f"topic {run.topic}"),
        ("heal", f"topic {run.topic}"),
    ]
    assert result.count("lost_acked") == 0
    assert result.audit.verdict == "pass", result.audit.failed_by


REMOVE = Scenario(
    scenario_id="broker_removed_under_load",
    case_id="X17",
    title="A broker stopped and unregistered, then started again, while an acks=all producer writes",
    source=SOURCE,
    symptom="taking a broker out of the cluster was done by hand, outside the history",
    client=IDEMPOTENT,
    guarantee="idempotent",
    expected_verdict="pass",
    variants=(Variant("remove", "3 partitions x 3 replicas; a follower of partition 0 removed, then back"),),
)


def test_a_broker_removed_under_load_and_back_loses_nothing(
    scenario_run: Callable[..., ScenarioRun],
) -> None:
    with scenario_run(REMOVE, "remove") as run:
        run.create_topic(partitions=3, replication_factor=3)
        producer = start_load(run, 25.0)
        remove = run.fault(RemoveBroker, FollowerOf(run.topic, 0))
        with remove:
            (gone,) = remove.brokers
            out = registered_brokers(run.cluster)
            isr = run.cluster.partition(run.topic, 0).isr
        back = registered_brokers(run.cluster)
        result = finish_load(run, producer)

    print(
        f"\nbroker {gone} removed: registered {sorted(out)}, p0 ISR {isr}; back {sorted(back)}; "
        f"{result.summary()}"
    )
    assert gone not in out
    assert gone not in isr
    assert gone in back
    events = list(result.events)
    assert faults_of(views.faults(events), "remove_broker") == [
        ("inject", f"broker-{gone}"),
        ("heal", f"broker-{gone}"),
    ]
    assert result.count("lost_acked") == 0
    assert result.audit.verdict == "pass", result.audit.failed_by
