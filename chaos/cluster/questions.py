"""Questions a scenario asks the cluster about one topic: do the brokers agree on its leaders, which
partition to aim a fault at, where its logs end. Each reads the cluster's own view (introspection or the
AdminClient); none changes anything."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chaos.cluster.cluster import KafkaCluster
    from chaos.cluster.introspect import PartitionState


def converged(cluster: KafkaCluster, topic: str, full_isr: bool = False) -> bool:
    """Every broker, asked itself, names a leader for each partition of ``topic``, and the same one (and,
    with ``full_isr``, every ISR holds every replica).

    A broker back from a network cut answers from stale metadata for a while: it may still call itself the
    leader and report an old high watermark, which a drain would take for lost records.
    """
    try:
        views = [cluster.describe_partitions([topic], via=b.node_id) for b in cluster.brokers]
    except Exception:  # a broker that does not answer yet is not converged
        return False
    leaders = {tuple(s.leader for s in v) for v in views}
    if len(leaders) != 1 or not all(leader is not None for leader in next(iter(leaders))):
        return False
    return not full_isr or all(set(s.isr) == set(s.replicas) for v in views for s in v)


def target_partition(
    cluster: KafkaCluster, topic: str, group: str | None = None, *, avoid_coordinator: bool = False
) -> PartitionState:
    """The lowest partition of ``topic`` whose leader is not the active controller (with
    ``avoid_coordinator``, not ``group``'s coordinator either), so that no quorum election or coordinator
    move blurs a fault on that leader. Falls back to avoiding the controller only, then to partition 0."""
    states = sorted(cluster.describe_partitions([topic]), key=lambda s: s.partition)
    controller = cluster.controller_id()
    avoid = {controller}
    if avoid_coordinator and group is not None:
        avoid.add(cluster.group_coordinator(group))
    return next(
        (s for s in states if s.leader not in avoid),
        next((s for s in states if s.leader != controller), states[0]),
    )


def end_offsets(cluster: KafkaCluster, topic: str, timeout_s: float = 10.0) -> dict[int, int]:
    """``topic``'s end offsets (high watermarks) per partition, read now through the AdminClient."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]  # exported, not in __all__

    admin = cluster.admin()
    partitions = sorted(admin.list_topics(topic, timeout=timeout_s).topics[topic].partitions)
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    futures = admin.list_offsets(
        {TopicPartition(topic, p): latest for p in partitions}, request_timeout=timeout_s
    )
    return {tp.partition: int(f.result(timeout_s).offset) for tp, f in futures.items()}
