"""Whom a fault hits: a broker id, or a role resolved against the cluster at inject time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chaos.errors import FaultError, PlanError

if TYPE_CHECKING:
    from chaos.cluster.cluster import KafkaCluster


@dataclass(frozen=True)
class LeaderOf:
    """The current leader of ``topic``-``partition``."""

    topic: str
    partition: int = 0


@dataclass(frozen=True)
class FollowerOf:
    """The ``index``-th follower (replicas order, leader excluded) of ``topic``-``partition``."""

    topic: str
    partition: int = 0
    index: int = 0


@dataclass(frozen=True)
class ActiveController:
    """The KRaft quorum leader."""


@dataclass(frozen=True)
class CoordinatorOf:
    """The coordinator of consumer group ``group``."""

    group: str


@dataclass(frozen=True)
class TxnCoordinatorOf:
    """The transaction coordinator of ``transactional_id``."""

    transactional_id: str


@dataclass(frozen=True)
class Client:
    """A client of the run, by its name in the history (``producer-0``, ``consumer-1``): the target of the
    client faults (:mod:`chaos.faults.client`), never of a broker fault or a plan. ``path``: the client path
    its traffic takes (``ext1``, ...), for a network fault on it (:func:`chaos.faults.client.on_client`)."""

    name: str
    path: str | None = None


Role = LeaderOf | FollowerOf | ActiveController | CoordinatorOf | TxnCoordinatorOf
Target = int | Role
AnyTarget = Target | Client


def resolve(cluster: KafkaCluster, target: AnyTarget) -> int:
    """The broker id ``target`` means right now; raises FaultError when the role has no holder."""
    if isinstance(target, bool | Client):
        raise FaultError(f"target {target!r} is not a broker id or role")
    if isinstance(target, int):
        cluster.broker(target)  # validates the id
        return target
    if isinstance(target, LeaderOf):
        state = cluster.partition(target.topic, target.partition)
        if state.leader is None:
            raise FaultError(f"{target.topic}-{target.partition} has no leader to target (offline)")
        return state.leader
    if isinstance(target, FollowerOf):
        state = cluster.partition(target.topic, target.partition)
        followers = state.followers
        if target.index >= len(followers):
            raise FaultError(
                f"{target.topic}-{target.partition} has followers {list(followers)}; index {target.index} is "
                f"out of range (use a topic with a higher replication factor)"
            )
        return followers[target.index]
    if isinstance(target, ActiveController):
        leader = cluster.controller_id()
        if leader < 0:
            raise FaultError("the quorum has no leader right now; wait for an election before targeting it")
        return leader
    if isinstance(target, TxnCoordinatorOf):
        return cluster.txn_coordinator(target.transactional_id)
    return cluster.group_coordinator(target.group)


def describe_target(target: AnyTarget) -> str:
    if isinstance(target, Client):
        return target.name
    if isinstance(target, int):
        return f"broker {target}"
    if isinstance(target, LeaderOf):
        return f"leader of {target.topic}-{target.partition}"
    if isinstance(target, FollowerOf):
        return f"follower {target.index} of {target.topic}-{target.partition}"
    if isinstance(target, ActiveController):
        return "active controller"
    if isinstance(target, TxnCoordinatorOf):
        return f"transaction coordinator of {target.transactional_id}"
    return f"coordinator of group {target.group}"


def target_to_json(target: Target) -> dict[str, Any]:
    if isinstance(target, int):
        return {"role": "broker", "id": target}
    if isinstance(target, LeaderOf):
        return {"role": "leader", "topic": target.topic, "partition": target.partition}
    if isinstance(target, FollowerOf):
        return {
            "role": "follower",
            "topic": target.topic,
            "partition": target.partition,
            "index": target.index,
        }
    if isinstance(target, ActiveController):
        return {"role": "controller"}
    if isinstance(target, TxnCoordinatorOf):
        return {"role": "txn_coordinator", "transactional_id": target.transactional_id}
    return {"role": "coordinator", "group": target.group}


def target_from_json(data: dict[str, Any]) -> Target:
    role = data.get("role")
    try:
        if role == "broker":
            return int(data["id"])
        if role == "leader":
            return LeaderOf(str(data["topic"]), int(data["partition"]))
        if role == "follower":
            return FollowerOf(str(data["topic"]), int(data["partition"]), int(data["index"]))
        if role == "controller":
            return ActiveController()
        if role == "coordinator":
            return CoordinatorOf(str(data["group"]))
        if role == "txn_coordinator":
            return TxnCoordinatorOf(str(data["transactional_id"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise PlanError(f"target {data!r} is missing or has a bad field: {exc}") from exc
    raise PlanError(
        f"target role {role!r} is not one of broker, leader, follower, controller, coordinator, "
        "txn_coordinator"
    )
