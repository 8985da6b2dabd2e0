"""Cluster operations as faults without Docker: their validation, their record, a refused operation, the
proof that one landed (the metadata shows it), and when one would change nothing (the nemesis skips it)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from chaos.cluster import introspect
from chaos.errors import ClusterError, FaultError, KafkaErrorAnswer
from chaos.faults.base import Effect, Fault, FaultLog
from chaos.faults.operations import AddPartitions, PreferredElection, ReassignReplicas, RemoveBroker
from chaos.run.events import PartitionState


class TopicCluster:
    """A cluster that describes one topic of ``count`` partitions (no admin client: nothing may change)."""

    def __init__(self, topic: str, count: int) -> None:
        self.states = [
            PartitionState(topic=topic, partition=p, leader=1, isr=(1, 2, 3), replicas=(1, 2, 3))
            for p in range(count)
        ]

    def describe_partitions(self, topics: list[str] | None = None, via: int | None = None) -> list[Any]:
        return [s for s in self.states if topics is None or s.topic in topics]

    def broker(self, node_id: int) -> int:
        if node_id not in (1, 2, 3):
            raise FaultError(f"no broker {node_id}: this cluster has node ids 1..3")
        return node_id

    def admin(self) -> Any:
        raise AssertionError("the operation must be refused before it asks the cluster for anything")


@pytest.mark.parametrize("count", [1, 0, 2.0, "4"])
def test_add_partitions_wants_a_new_count_of_at_least_two(count: Any) -> None:
    with pytest.raises(FaultError, match="count is the topic's new partition count"):
        AddPartitions(TopicCluster("t", 2), "t", count)  # type: ignore[arg-type]


@pytest.mark.parametrize("partitions", [[0], (0, -1), ("0",)])
def test_preferred_election_wants_a_tuple_of_partition_numbers(partitions: Any) -> None:
    with pytest.raises(FaultError, match="tuple of partition numbers"):
        PreferredElection(TopicCluster("t", 2), "t", partitions)  # type: ignore[arg-type]


def test_an_operation_names_its_topic_and_no_broker() -> None:
    log = FaultLog()
    grow = AddPartitions(TopicCluster("t", 2), "t", 2, log=log)  # type: ignore[arg-type]
    with pytest.raises(FaultError, match="has 2 partitions already; count=2 must be more"):
        grow.inject()
    (record,) = log.records()
    assert (record.kind, record.target, record.brokers) == ("add_partitions", "topic t", ())
    assert dict(record.params) == {"topic": "t", "count": 2}
    assert record.error is not None
    assert "inject failed" in record.error
    assert record.healed_at is not None  # a refused operation's window is closed at once
    assert log.active() == []


def test_adding_partitions_to_a_missing_topic_says_to_create_it() -> None:
    with pytest.raises(FaultError, match="does not exist"):
        AddPartitions(TopicCluster("t", 2), "u", 4, log=FaultLog()).inject()  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("replicas", "says"),
    [
        ((), "tuple of distinct broker ids"),
        ((1, 1), "tuple of distinct broker ids"),
        ([1, 2], "tuple of distinct broker ids"),
        ((1, 4), "no broker 4: this cluster has node ids 1..3"),
    ],
)
def test_a_reassignment_wants_distinct_brokers_of_the_cluster(replicas: Any, says: str) -> None:
    with pytest.raises(FaultError, match=says):
        ReassignReplicas(TopicCluster("t", 2), "t", 0, replicas)  # type: ignore[arg-type]


def test_a_reassignment_of_a_missing_partition_is_refused_before_the_cluster_is_asked() -> None:
    log = FaultLog()
    with pytest.raises(FaultError, match="has no partition 5"):
        ReassignReplicas(TopicCluster("t", 2), "t", 5, (2, 3), log=log).inject()  # type: ignore[arg-type]
    (record,) = log.records()
    assert (record.kind, record.target) == ("reassign_replicas", "topic t")
    assert dict(record.params) == {"topic": "t", "partition": 5, "replicas": (2, 3), "revert": True}


# ---- the proof that an operation landed, and the steps a nemesis skips --------------------------------


def effect_of(fault: Fault) -> Effect:
    """The effect a healed fault's record carries."""
    assert fault.record is not None
    assert fault.record.effect is not None
    return fault.record.effect


class Election:
    """What ``admin().elect_leaders(...)`` returns: the result per partition (None: elected)."""

    def __init__(self, cluster: MovingCluster, partitions: list[Any]) -> None:
        self.cluster, self.partitions = cluster, partitions

    def result(self, timeout: float) -> dict[Any, None]:
        for tp in self.partitions:
            state = self.cluster.states[tp.partition]
            self.cluster.states[tp.partition] = replace(state, leader=state.replicas[0])
        return {tp: None for tp in self.partitions}


class MovingCluster(TopicCluster):
    """A topic whose partitions move when asked: elections, reassignments, unregistrations."""

    def __init__(self, topic: str, count: int) -> None:
        super().__init__(topic, count)
        self.registered = {1, 2, 3}

    def admin(self) -> Any:
        cluster = self

        class Admin:
            def elect_leaders(self, election_type: Any, partitions: list[Any]) -> Election:
                return Election(cluster, partitions)

        return Admin()


@pytest.fixture
def moving(monkeypatch: pytest.MonkeyPatch) -> MovingCluster:
    cluster = MovingCluster("t", 2)

    def reassign(kafka: Any, topic: str, replicas: dict[int, tuple[int, ...]]) -> None:
        for p, ids in replicas.items():
            cluster.states[p] = replace(cluster.states[p], replicas=ids, isr=ids, leader=ids[0])

    monkeypatch.setattr(introspect, "alter_reassignments", reassign)
    return cluster


def test_a_preferred_election_that_moved_a_leader_landed(moving: MovingCluster) -> None:
    moving.states[1] = replace(moving.states[1], leader=3)
    election = PreferredElection(moving, "t", log=FaultLog())  # type: ignore[arg-type]
    assert election.idle_reason() is None
    election.inject().heal()
    assert effect_of(election).observed
    assert effect_of(election).evidence == "leadership moved (p1: 3 -> 1), seen in the metadata"
    assert moving.states[1].leader == 1


def test_a_preferred_election_with_nothing_to_move_is_idle_and_did_nothing(moving: MovingCluster) -> None:
    election = PreferredElection(moving, "t", (0,), log=FaultLog())  # type: ignore[arg-type]
    assert election.idle_reason() == "every partition asked is led by its preferred replica already"
    election.inject().heal()
    assert not effect_of(election).observed
    assert election.record is not None
    assert election.record.proven is False


def test_a_reassignment_landed_when_the_metadata_lists_the_new_replicas(moving: MovingCluster) -> None:
    move = ReassignReplicas(moving, "t", 0, (3, 1, 2), log=FaultLog())  # type: ignore[arg-type]
    assert move.idle_reason() is None
    move.inject().heal()
    assert effect_of(move).observed
    assert effect_of(move).evidence == "p0: replicas [1, 2, 3] -> [3, 1, 2] in the metadata (asked [3, 1, 2])"
    assert moving.states[0].replicas == (1, 2, 3)  # moved back by the heal


def test_a_reassignment_nobody_answers_at_first_is_asked_again(
    moving: MovingCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[tuple[int, ...]] = []
    move_it = introspect.alter_reassignments

    def busy(kafka: Any, topic: str, replicas: dict[int, tuple[int, ...]]) -> None:
        asked.append(replicas[1])
        if len(asked) == 1:  # the controller electing, or too busy to answer in time
            raise ClusterError("no broker answered AlterPartitionReassignments: broker 1: timed out")
        move_it(kafka, topic, replicas)

    monkeypatch.setattr(introspect, "alter_reassignments", busy)
    move = ReassignReplicas(moving, "t", 1, (3, 1), log=FaultLog())  # type: ignore[arg-type]
    move.inject()
    assert moving.states[1].replicas == (3, 1)
    move.heal()
    assert asked == [(3, 1), (3, 1), (1, 2, 3)]
    assert move.record is not None
    assert move.record.error is None


def test_a_reassignment_to_the_replicas_it_has_is_idle(moving: MovingCluster) -> None:
    move = ReassignReplicas(moving, "t", 1, (1, 2, 3), log=FaultLog())  # type: ignore[arg-type]
    assert move.idle_reason() == "p1 is on replicas [1, 2, 3] already"
    move.inject().heal()
    assert not effect_of(move).observed


def test_added_partitions_landed_when_the_metadata_counts_them(moving: MovingCluster) -> None:
    grow = AddPartitions(moving, "t", 3, log=FaultLog())  # type: ignore[arg-type]
    grow.before = 2  # as its inject found it (CreatePartitions needs a real admin client)
    moving.states.append(PartitionState(topic="t", partition=2, leader=2, isr=(2,), replicas=(2,)))
    effect = grow._effect()
    assert effect is not None
    assert effect.observed
    assert effect.evidence == "topic t: 2 -> 3 partitions in the metadata"


class Stoppable:
    """A broker's container for RemoveBroker: stopping it fences the broker; its status as Docker says."""

    def __init__(self, cluster: MovingCluster, broker_id: int) -> None:
        self.cluster, self.broker_id, self.status = cluster, broker_id, "running"
        self.stops = 0

    def stop(self, timeout: int) -> None:
        self.stops += 1
        self.status = "exited"
        self.cluster.registered.discard(self.broker_id)

    def reload(self) -> None:
        pass


@pytest.fixture
def removable(moving: MovingCluster, monkeypatch: pytest.MonkeyPatch) -> tuple[MovingCluster, Stoppable]:
    container = Stoppable(moving, 2)
    late = {"unregistrations": 1}  # one unregistration the quorum applies after the broker came back

    def restart_broker(node_id: int, timeout_s: float) -> float:
        container.status = "running"
        if late["unregistrations"]:
            late["unregistrations"] -= 1  # registers, and is unregistered behind its back: stale epoch
        else:
            moving.registered.add(node_id)
        return 1.0

    class Broker:
        docker = container

    monkeypatch.setattr(moving, "broker", lambda node_id: Broker(), raising=False)
    monkeypatch.setattr(moving, "restart_broker", restart_broker, raising=False)
    monkeypatch.setattr(introspect, "registered_brokers", lambda kafka: set(moving.registered))
    monkeypatch.setattr(introspect, "unregister_broker", lambda kafka, broker_id: None)
    return moving, container


def test_a_broker_unregistered_behind_its_back_is_restarted_until_it_registers(
    removable: tuple[MovingCluster, Stoppable],
) -> None:
    cluster, container = removable
    removal = RemoveBroker(cluster, 2, timeout_s=0.5, log=FaultLog())  # type: ignore[arg-type]
    removal.inject().heal()
    assert effect_of(removal).observed
    assert effect_of(removal).evidence == "registered brokers just before the heal: [1, 3] (broker 2 absent)"
    assert 2 in cluster.registered
    assert container.stops == 2  # the remove, then the restart of a process stuck on a stale epoch
    assert removal.record is not None
    assert any("restarting its process to register anew" in n for n in removal.record.notes)
    assert removal.record.error is None


def test_a_removal_proven_by_its_container_when_no_broker_answers(
    removable: tuple[MovingCluster, Stoppable], monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster, _ = removable
    removal = RemoveBroker(cluster, 2, timeout_s=0.5, log=FaultLog())  # type: ignore[arg-type]
    removal.inject()

    def down(kafka: Any) -> set[int]:
        raise ClusterError("no broker answered Metadata: broker 1: timed out")

    monkeypatch.setattr(introspect, "registered_brokers", down)
    effect = removal._effect()
    assert effect is not None
    assert effect.observed
    assert effect.evidence == (
        "broker 2's container was exited just before the heal; the registrations could not be read then "
        "(no broker answered Metadata: broker 1: timed out)"
    )


def test_an_unregistration_nobody_answers_is_asked_again_until_the_restart_deadline(
    removable: tuple[MovingCluster, Stoppable], monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster, _ = removable
    asked: list[int] = []

    def unanswered(times: float) -> Any:
        def ask(kafka: Any, broker_id: int) -> None:
            asked.append(broker_id)
            if len(asked) <= times:  # the quorum electing a leader after the stopped broker led it
                raise ClusterError("no broker answered UnregisterBroker: broker 1: timed out")

        return ask

    monkeypatch.setattr(introspect, "unregister_broker", unanswered(2))
    removal = RemoveBroker(cluster, 2, timeout_s=0.1, restart_timeout_s=5, log=FaultLog())  # type: ignore[arg-type]
    removal.inject().heal()
    assert asked == [2, 2, 2]
    assert removal.record is not None
    assert "broker 2 stopped and unregistered" in removal.record.notes
    assert removal.record.error is None

    asked.clear()
    monkeypatch.setattr(introspect, "unregister_broker", unanswered(float("inf")))
    never = RemoveBroker(cluster, 2, timeout_s=0.1, restart_timeout_s=0.6, log=FaultLog())  # type: ignore[arg-type]
    with pytest.raises(FaultError) as raised:
        never.inject()
    assert str(raised.value).startswith(
        "remove_broker on broker 2: broker 2 unregistered not seen in 1 s (last: no broker answered "
        "UnregisterBroker: broker 1: timed out)"
    )
    assert len(asked) >= 2


def test_an_unregistration_answered_with_an_error_is_final(
    removable: tuple[MovingCluster, Stoppable], monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster, _ = removable
    asked: list[int] = []

    def refused(kafka: Any, broker_id: int) -> None:
        asked.append(broker_id)
        raise KafkaErrorAnswer("UnregisterBroker 2 via 127.0.0.1:1 failed with Kafka error code 35", 35)

    monkeypatch.setattr(introspect, "unregister_broker", refused)
    removal = RemoveBroker(cluster, 2, timeout_s=0.1, restart_timeout_s=5, log=FaultLog())  # type: ignore[arg-type]
    with pytest.raises(KafkaErrorAnswer, match="error code 35"):
        removal.inject()
    assert asked == [2]


def test_unregistering_a_broker_no_longer_registered_is_done_and_other_errors_are_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from types import SimpleNamespace

    from chaos.cluster import wire

    brokers = [SimpleNamespace(node_id=n, ext_port=9000 + n) for n in (1, 2)]
    cluster = SimpleNamespace(probe_order=lambda: iter(brokers), answered=lambda broker: None)
    ports: list[int] = []
    code = {"value": 102}  # BROKER_ID_NOT_REGISTERED: an earlier request, its answer timed out, went through

    def answer(host: str, port: int, broker_id: int, timeout_s: float) -> None:
        ports.append(port)
        if port == 9001:
            raise OSError("timed out")
        raise KafkaErrorAnswer(
            f"UnregisterBroker {broker_id} failed with Kafka error code {code['value']}", code["value"]
        )

    monkeypatch.setattr(wire, "unregister_broker", answer)
    introspect.unregister_broker(cluster, 3)
    assert ports == [9001, 9002]
    code["value"] = 41  # NOT_CONTROLLER: final, not asked of the next broker
    brokers.reverse()
    ports.clear()
    with pytest.raises(KafkaErrorAnswer, match="code 41"):
        introspect.unregister_broker(cluster, 3)
    assert ports == [9002]
