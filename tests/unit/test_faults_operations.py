"""Cluster operations as faults without Docker: their validation, their record, a refused operation."""

from __future__ import annotations

from typing import Any

import pytest

from chaos.errors import FaultError
from chaos.faults.base import FaultLog
from chaos.faults.operations import AddPartitions, PreferredElection, ReassignReplicas
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
