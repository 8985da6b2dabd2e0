"""What the cluster looks like right now: controller, partitions (leader/replicas/ISR), coordinators.

State is read with one Metadata request to one broker at a time (``wire.metadata``), trying the
broker that answered last first and moving on after a short socket timeout. So a cut or paused
broker costs one short timeout instead of hanging the caller — librdkafka's admin client would keep
sending to a silent broker whose connection still looks open. The two operations confluent-kafka's admin
client lacks (replica reassignment, unregistering a broker) go the same way, for
:mod:`chaos.faults.operations`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

from chaos.cluster import wire
from chaos.errors import ClusterError, KafkaErrorAnswer
from chaos.run.events import PartitionState as PartitionState  # re-exported: the answer's type

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from chaos.cluster.broker import Broker

PROBE_TIMEOUT_S = 2.0
T = TypeVar("T")


class ClusterHandle(Protocol):
    """What introspection reads of a cluster (:class:`chaos.cluster.cluster.KafkaCluster` has it); a
    protocol, so that the cluster module and this one do not import each other."""

    @property
    def run_id(self) -> str: ...

    @property
    def brokers(self) -> tuple[Broker, ...]: ...

    def broker(self, node_id: int) -> Broker: ...

    def probe_order(self) -> Iterator[Broker]: ...

    def answered(self, broker: Broker) -> None: ...

    def admin(self) -> Any: ...


def partition_states(meta: wire.WireMetadata) -> tuple[PartitionState, ...]:
    """The partitions of a Metadata answer; the wire's leader -1 (no leader) becomes ``None``."""
    return tuple(
        PartitionState(
            topic=p.topic,
            partition=p.partition,
            leader=p.leader if p.leader >= 0 else None,
            isr=p.isr,
            replicas=p.replicas,
        )
        for p in meta.partitions
    )


def _ask(cluster: ClusterHandle, question: Callable[[Broker], T], what: str) -> T:
    errors = []
    for broker in cluster.probe_order():
        try:
            answer = question(broker)
        except KafkaErrorAnswer:
            raise  # an answer: every broker forwards to the same controller
        except (OSError, ClusterError) as exc:
            errors.append(f"broker {broker.node_id}: {exc}")
            continue
        cluster.answered(broker)
        return answer
    raise ClusterError(f"no broker answered {what}: " + "; ".join(errors))


def _metadata(cluster: ClusterHandle, topics: list[str] | None, via: int | None = None) -> wire.WireMetadata:
    if via is not None:
        broker = cluster.broker(via)
        return wire.metadata("127.0.0.1", broker.ext_port, topics, PROBE_TIMEOUT_S)

    def question(broker: Broker) -> wire.WireMetadata:
        return wire.metadata("127.0.0.1", broker.ext_port, topics, PROBE_TIMEOUT_S)

    return _ask(cluster, question, "Metadata")


def registered_brokers(cluster: ClusterHandle) -> set[int]:
    """Node ids of the brokers that metadata lists (registered and not fenced)."""
    return {node for node, _, _ in _metadata(cluster, []).brokers}


def advertised_addresses(cluster: ClusterHandle, via: int) -> list[tuple[int, str, int]]:
    """(node id, host, port) of every broker as broker ``via`` advertises them to clients."""
    broker = cluster.broker(via)
    return list(wire.metadata("127.0.0.1", broker.ext_port, [], PROBE_TIMEOUT_S).brokers)


def controller_id(cluster: ClusterHandle) -> int:
    """The active KRaft controller (the quorum leader), or -1 while there is none: every broker that answers
    DescribeQuorum is asked, and the leader of the highest epoch wins — one broker's view may be stale
    during an election (a random nemesis once aimed a quorum-path toxic at a former leader, which no voter
    fetched from any more)."""
    answers: list[tuple[int, int]] = []
    errors = []
    for broker in cluster.probe_order():
        try:
            leader, epoch = wire.quorum_leader_epoch("127.0.0.1", broker.ext_port, PROBE_TIMEOUT_S)
        except (OSError, ClusterError) as exc:
            errors.append(f"broker {broker.node_id}: {exc}")
            continue
        cluster.answered(broker)
        answers.append((epoch, leader))
    if not answers:
        raise ClusterError("no broker answered DescribeQuorum: " + "; ".join(errors))
    return max(answers)[1]


def describe_partitions(
    cluster: ClusterHandle, topics: list[str] | None = None, via: int | None = None
) -> list[PartitionState]:
    """Every partition of ``topics`` (all topics when None), sorted by topic and partition.

    ``via`` asks that broker only. A broker cut from the quorum still answers clients from a stale
    metadata cache, so while such a fault is on, ask a broker on the quorum's side.
    """
    meta = _metadata(cluster, topics, via)
    missing = [name for name, code in meta.topic_errors]
    if missing and topics is not None:
        raise ClusterError(f"metadata has no topic(s) {missing} (error codes {dict(meta.topic_errors)})")
    return list(partition_states(meta))


def partition(cluster: ClusterHandle, topic: str, index: int, via: int | None = None) -> PartitionState:
    for state in describe_partitions(cluster, [topic], via):
        if state.partition == index:
            return state
    raise ClusterError(f"topic {topic!r} has no partition {index}")


def is_internal(topic: str) -> bool:
    """Whether ``topic`` is Kafka's own (``__consumer_offsets``, ``__transaction_state``…): never a test's."""
    return topic.startswith("__")


def topics(cluster: ClusterHandle, *, internal: bool = True) -> set[str]:
    """The cluster's topics; without ``internal``, only the ones a client created (:func:`is_internal`)."""
    return {p.topic for p in describe_partitions(cluster) if internal or not is_internal(p.topic)}


def group_coordinator(
    cluster: ClusterHandle, group: str, timeout_s: float = 30.0, key_type: int = wire.GROUP_KEY
) -> int:
    """Node id of ``group``'s coordinator (the leader of its __consumer_offsets partition; ``key_type``
    :data:`~chaos.cluster.wire.TRANSACTION_KEY`: of the ``transactional.id`` ``group``, the leader of its
    __transaction_state partition).

    The first call may create the internal topic; it is retried until ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:

        def question(broker: Broker) -> tuple[int, int]:
            return wire.find_group_coordinator("127.0.0.1", broker.ext_port, group, PROBE_TIMEOUT_S, key_type)

        error, node = _ask(cluster, question, "FindCoordinator")
        if error == 0:
            return node
        last = f"error code {error}"
        time.sleep(0.2)
    what = "transactional.id" if key_type == wire.TRANSACTION_KEY else "group"
    raise ClusterError(f"no coordinator for {what} {group!r} within {timeout_s} s ({last})")


def describe_group(cluster: ClusterHandle, group: str) -> wire.WireGroup:
    """``group``'s state and member ids as its coordinator reports them now (one attempt per broker).

    Raises :class:`ClusterError` when no broker names a coordinator or the coordinator does not answer.
    """

    def find(broker: Broker) -> tuple[int, int]:
        return wire.find_group_coordinator("127.0.0.1", broker.ext_port, group, PROBE_TIMEOUT_S)

    error, node = _ask(cluster, find, "FindCoordinator")
    if error:
        raise ClusterError(f"no coordinator for group {group!r} now (FindCoordinator error code {error})")
    coordinator = cluster.broker(node)
    try:
        return wire.describe_group("127.0.0.1", coordinator.ext_port, group, PROBE_TIMEOUT_S)
    except OSError as exc:
        raise ClusterError(f"coordinator {node} of group {group!r} did not answer: {exc}") from exc


def create_topic(
    cluster: ClusterHandle,
    name: str,
    partitions: int,
    replication_factor: int,
    config: dict[str, str],
    timeout_s: float,
) -> None:
    """Create ``name`` and wait until every partition has a leader and a full ISR."""
    from confluent_kafka.cimpl import NewTopic

    if replication_factor > len(cluster.brokers):
        raise ClusterError(
            f"replication_factor {replication_factor} exceeds the {len(cluster.brokers)} brokers; "
            f"lower it or start more brokers"
        )
    spec = NewTopic(name, num_partitions=partitions, replication_factor=replication_factor, config=config)
    futures = cluster.admin().create_topics([spec], operation_timeout=timeout_s, request_timeout=timeout_s)
    try:
        futures[name].result(timeout=timeout_s + 5)
    except Exception as exc:
        raise ClusterError(f"could not create topic {name!r} with config {config}: {exc}") from exc
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            states = describe_partitions(cluster, [name])
        except ClusterError:
            states = []
        if (
            len(states) == partitions
            and all(not s.offline and not s.under_replicated for s in states)
            and _known_everywhere(cluster, name, partitions)
        ):
            return
        time.sleep(0.1)
    raise ClusterError(f"topic {name!r} was created but its partitions had no full ISR within {timeout_s} s")


POLICY_CONFIGS: Final = ("cleanup.policy", "retention.ms", "retention.bytes", "delete.retention.ms")
"""The topic configs that say what Kafka removes on purpose."""


def topic_configs(cluster: ClusterHandle, name: str, keys: Sequence[str], timeout_s: float) -> dict[str, str]:
    """The effective values of topic ``name``'s configs ``keys`` (DescribeConfigs: the topic's own value,
    else the broker's default)."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]  # exported, not in __all__
        ConfigResource,
        ResourceType,
    )

    resource = ConfigResource(ResourceType.TOPIC, name)
    futures = cluster.admin().describe_configs([resource], request_timeout=timeout_s)
    try:
        entries = futures[resource].result(timeout=timeout_s + 5)
    except Exception as exc:
        raise ClusterError(f"could not describe the configs of topic {name!r}: {exc}") from exc
    missing = [k for k in keys if k not in entries]
    if missing:
        raise ClusterError(f"topic {name!r}: the broker did not describe {missing}")
    return {k: str(entries[k].value) for k in keys}


def delete_records(cluster: ClusterHandle, topic: str, partition: int, before: int, timeout_s: float) -> int:
    """Delete ``topic[partition]``'s records below offset ``before`` (DeleteRecords); returns the
    partition's new log start offset as the leader reported it."""
    from confluent_kafka import TopicPartition

    futures = cluster.admin().delete_records(
        [TopicPartition(topic, partition, before)], request_timeout=timeout_s, operation_timeout=timeout_s
    )
    try:
        (done,) = futures.values()
        result = done.result(timeout=timeout_s + 5)
    except Exception as exc:
        raise ClusterError(f"DeleteRecords of {topic}[{partition}] below {before} failed: {exc}") from exc
    return int(result.low_watermark)


GROUP_SESSION_CONFIG = {"session.timeout.ms": "consumer.session.timeout.ms",
                        "heartbeat.interval.ms": "consumer.heartbeat.interval.ms"}  # fmt: skip
"""A classic member's setting -> the group config (KIP-848) that sets it for the consumer protocol's group."""


def set_group_config(cluster: ClusterHandle, group: str, settings: dict[str, str], timeout_s: float) -> None:
    """Set dynamic group configs (``consumer.session.timeout.ms``…) of ``group``, which need not exist yet
    (IncrementalAlterConfigs on the GROUP resource; Kafka 4.0 and later)."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]  # exported, not in __all__
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in settings.items()]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    futures = cluster.admin().incremental_alter_configs([resource], request_timeout=timeout_s)
    try:
        for future in futures.values():
            future.result(timeout=timeout_s + 5)
    except Exception as exc:
        raise ClusterError(
            f"could not set group {group!r}'s configs {settings}: {exc} (group configs need Kafka 4.0+, "
            "and values within the broker's group.consumer.min/max.* bounds)"
        ) from exc


def _known_everywhere(cluster: ClusterHandle, name: str, partitions: int) -> bool:
    """Every broker that answers has ``name`` with all partitions in its metadata cache."""
    for broker in cluster.brokers:
        try:
            meta = wire.metadata("127.0.0.1", broker.ext_port, [name], PROBE_TIMEOUT_S)
        except (OSError, ClusterError):
            continue  # a broker under a fault does not hold the others back
        if meta.topic_errors or len(meta.partitions) != partitions:
            return False
    return True


def delete_topics(cluster: ClusterHandle, names: list[str], timeout_s: float) -> None:
    """Delete ``names``; an internal topic is refused (:class:`ClusterError`): recreated, Kafka 3's group
    coordinator ignores the new ``__consumer_offsets`` partitions (their epoch 0 is below the one it kept)
    and every group hashed to them is refused with NOT_COORDINATOR."""
    internal = [name for name in names if is_internal(name)]
    if internal:
        raise ClusterError(
            f"refusing to delete Kafka's internal topics {internal}: only topics a client created can be "
            "deleted (a recreated __consumer_offsets leaves Kafka 3's group coordinators unloaded)"
        )
    if not names:
        return
    futures = cluster.admin().delete_topics(names, operation_timeout=timeout_s, request_timeout=timeout_s)
    for name, future in futures.items():
        try:
            future.result(timeout=timeout_s + 5)
        except Exception as exc:
            if "UNKNOWN_TOPIC" not in str(exc):
                raise ClusterError(f"could not delete topic {name!r}: {exc}") from exc


def unhealthy(cluster: ClusterHandle) -> list[str]:
    """Reasons the cluster is not healthy: a broker not running/registered, an offline or short ISR."""
    problems = [f"broker {b.node_id} is {b.status()}" for b in cluster.brokers if b.status() != "running"]
    registered = registered_brokers(cluster)
    problems += [f"broker {b.node_id} not registered" for b in cluster.brokers if b.node_id not in registered]
    for state in describe_partitions(cluster):
        if state.offline or state.under_replicated:
            problems.append(f"{state.topic}-{state.partition} leader {state.leader} isr {list(state.isr)}")
    return problems


def wait_healthy(cluster: ClusterHandle, timeout_s: float) -> None:
    """Wait until every broker is registered and every partition's ISR is full; raise with the reasons."""
    deadline = time.monotonic() + timeout_s
    problems: list[str] = []
    while time.monotonic() < deadline:
        try:
            problems = unhealthy(cluster)
        except ClusterError as exc:
            problems = [str(exc)]
        if not problems:
            return
        time.sleep(0.25)
    raise ClusterError(
        f"cluster {cluster.run_id} not healthy after {timeout_s:.0f} s: {'; '.join(problems[:10])}"
    )


def alter_reassignments(
    cluster: ClusterHandle, topic: str, replicas: dict[int, tuple[int, ...]], timeout_s: float = 10.0
) -> None:
    """Start moving each partition of ``topic`` to its ``replicas`` (AlterPartitionReassignments, through
    the first broker that answers within ``timeout_s``); the replicas catch up after this returns."""

    def ask(broker: Broker) -> None:
        wire.alter_partition_reassignments("127.0.0.1", broker.ext_port, topic, replicas, timeout_s)

    _ask(cluster, ask, "AlterPartitionReassignments")


_BROKER_ID_NOT_REGISTERED: Final = 102


def unregister_broker(cluster: ClusterHandle, broker_id: int, timeout_s: float = 10.0) -> None:
    """Remove a shut-down broker's registration from the KRaft metadata (UnregisterBroker). Idempotent: a
    broker no longer registered counts as done (an earlier request whose answer timed out went through).
    ``timeout_s`` per broker asked: the request is forwarded to the controller, which commits a record."""

    def ask(broker: Broker) -> None:
        try:
            wire.unregister_broker("127.0.0.1", broker.ext_port, broker_id, timeout_s)
        except KafkaErrorAnswer as exc:
            if exc.code != _BROKER_ID_NOT_REGISTERED:
                raise

    _ask(cluster, ask, "UnregisterBroker")
