"""Faults a scenario needs that :mod:`chaos.faults` does not have yet (candidates to move there).

:class:`ReplicationCut` takes one follower out of one leader's ISR while every broker stays in the KRaft
quorum and reachable by clients. With three combined broker/controller nodes, a full network cut of the
follower plus a crash of the leader would leave one voter of three — no quorum, so no ISR change, no
fencing and no election could be observed (CATALOG ISR2/L4 need all three).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chaos.faults.base import Fault, FaultLog, Param
from chaos.faults.network import _iptables, remove_sidecar, start_sidecar
from chaos.faults.targets import Target, resolve

if TYPE_CHECKING:
    from chaos.cluster.cluster import KafkaCluster


class ReplicationCut(Fault):
    """The follower cannot fetch from the leader; quorum and client paths stay open.

    In the follower's network namespace (a sidecar, as for ``NetworkCut``), DROP its outgoing TCP packets
    to the leader's replication proxy port (``int-<leader>``): its fetch requests go unanswered, it falls
    behind and leaves the leader's ISR after ``replica.lag.time.max.ms``, silently. Healed like every
    iptables fault (sidecar flushed and removed; ``heal_all`` also removes it).
    """

    kind = "replication_cut"

    def __init__(
        self, cluster: KafkaCluster, follower: Target, leader: Target, log: FaultLog | None = None
    ) -> None:
        super().__init__(cluster, follower, log)
        self.leader_target = leader
        self.leader: int | None = None
        self._sidecars: list[Any] = []

    def resolve_brokers(self) -> tuple[int, ...]:
        self.leader = resolve(self.cluster, self.leader_target)
        follower = resolve(self.cluster, self.target)
        return (follower,)

    def params(self) -> dict[str, Param]:
        return {"leader": self.leader if self.leader is not None else -1}

    def _inject(self) -> None:
        (follower,) = self.brokers
        assert self.leader is not None
        port = self.cluster.broker(self.leader).int_port
        sidecar = start_sidecar(self.cluster, follower)
        self._sidecars.append(sidecar)
        _iptables(sidecar, [f"-I OUTPUT 1 -p tcp --dport {port} -j DROP"])

    def _heal(self) -> None:
        while self._sidecars:
            remove_sidecar(self._sidecars.pop())
