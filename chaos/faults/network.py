"""Silent network faults from iptables inside a broker's network namespace.

A sidecar (the local JRE base image, which carries iptables) runs with
``network_mode=container:<broker>`` and NET_ADMIN, so its rules apply to the broker's own interfaces.
Rules DROP (never REJECT): peers and clients see silence, not a reset — the seed's "network cut".
Heal flushes the rules and removes the sidecar. A sidecar carries the run's label, so the reaper and
``chaos clean`` remove it if the process dies.

Shapes:

* ``NetworkCut(b)`` — everything to and from b except loopback: "one broker alone", clients included.
* ``Partition(groups)`` — brokers in different groups cannot reach each other on the replication and
  quorum paths; clients still reach everyone. Every peer path goes to a per-broker proxy port
  (int-j, ctl-j), so each broker drops its *outgoing* packets to the other side's proxy ports. That
  covers both directions of every peer connection (a connection is always opened towards a proxy
  port) — something Toxiproxy alone cannot do, since all peers of j share j's proxy.
* ``IsolateFromQuorum(b)`` — ``Partition([[b], rest])``: b is cut from the quorum and replication but
  still serves clients.
* ``ReplicationCut(f, l)`` — follower f cannot fetch from leader l; quorum and client paths stay open, so f
  silently leaves l's ISR. With three combined broker/controller nodes, a full cut of the follower plus a
  crash of the leader would leave one voter of three — no quorum, so no ISR change, no fencing and no
  election could be observed (CATALOG ISR2/L4 need all three).
"""

from __future__ import annotations

import contextlib
import uuid
from typing import TYPE_CHECKING, Any

from chaos.cluster.cluster import ROLE_LABEL
from chaos.cluster.engine import LABEL, docker_client
from chaos.errors import FaultError
from chaos.faults.base import Fault, FaultLog, Param
from chaos.faults.targets import Target, resolve

if TYPE_CHECKING:
    from chaos.cluster.cluster import KafkaCluster

SIDECAR_ROLE = "netcut"
SIDECAR_LIFETIME_S = 3600  # the sidecar's sleep; heal removes it much sooner


def sidecar_image() -> str:
    """The local JRE base image (it carries iptables and tc); built once if missing."""
    from chaos.cluster.images.local import ensure_local

    return ensure_local("jre-base")


def _iptables(sidecar: Any, rules: list[str]) -> None:
    script = " && ".join(f"iptables -w {rule}" for rule in rules)
    for binary in ("iptables", "iptables-legacy"):
        code, output = sidecar.exec_run(["sh", "-c", script.replace("iptables ", f"{binary} ")])
        if code == 0:
            return
    raise FaultError(
        f"iptables failed in sidecar {sidecar.name} (exit {code}): {output.decode(errors='replace')[-500:]}\n"
        f"  fix: the sidecar needs NET_ADMIN and a kernel with netfilter; check `docker info`"
    )


def start_sidecar(cluster: KafkaCluster, broker_id: int) -> Any:
    broker = cluster.broker(broker_id)
    wrapped = broker.docker
    wrapped.reload()
    if wrapped.status != "running":
        raise FaultError(f"broker {broker_id} is {wrapped.status}; a network fault needs it running")
    return docker_client().containers.run(
        sidecar_image(),
        ["sleep", str(SIDECAR_LIFETIME_S)],
        name=f"chaos-{cluster.run_id}-netcut-{broker_id}-{uuid.uuid4().hex[:6]}",
        network_mode=f"container:{wrapped.id}",
        cap_add=["NET_ADMIN"],
        labels={LABEL: cluster.run_id, ROLE_LABEL: SIDECAR_ROLE},
        detach=True,
    )


def drop_outgoing(cluster: KafkaCluster, broker_id: int, ports: list[int]) -> Any:
    """Start a sidecar in ``broker_id``'s namespace that DROPs its outgoing TCP packets to ``ports``;
    returns the sidecar (heal with :func:`remove_sidecar`)."""
    sidecar = start_sidecar(cluster, broker_id)
    try:
        _iptables(sidecar, [f"-I OUTPUT 1 -p tcp --dport {port} -j DROP" for port in ports])
    except FaultError:
        remove_sidecar(sidecar)
        raise
    return sidecar


def remove_sidecar(sidecar: Any) -> None:
    """Flush the rules (when the namespace still exists) and remove the sidecar."""
    with contextlib.suppress(Exception):
        sidecar.reload()
        if sidecar.status == "running":
            sidecar.exec_run(["sh", "-c", "iptables -w -F INPUT; iptables -w -F OUTPUT"])
    with contextlib.suppress(Exception):
        sidecar.remove(force=True)


def remove_all_sidecars(cluster: KafkaCluster) -> list[str]:
    """Heal every iptables fault of this run, whoever injected it."""
    removed = []
    selector = [f"{LABEL}={cluster.run_id}", f"{ROLE_LABEL}={SIDECAR_ROLE}"]
    for sidecar in docker_client().containers.list(all=True, filters={"label": selector}):
        remove_sidecar(sidecar)
        removed.append(str(sidecar.name))
    return removed


class NetworkCut(Fault):
    """Drop every packet to and from the broker except loopback (symmetric, silent)."""

    kind = "network_cut"

    def __init__(self, cluster: KafkaCluster, target: Target, log: FaultLog | None = None) -> None:
        super().__init__(cluster, target, log)
        self._sidecars: list[Any] = []

    def _inject(self) -> None:
        (broker_id,) = self.brokers
        sidecar = start_sidecar(self.cluster, broker_id)
        self._sidecars.append(sidecar)
        _iptables(sidecar, ["-I INPUT 1 ! -i lo -j DROP", "-I OUTPUT 1 ! -o lo -j DROP"])

    def _heal(self) -> None:
        while self._sidecars:
            remove_sidecar(self._sidecars.pop())


class Partition(Fault):
    """Split the brokers into ``groups`` on the replication and quorum paths (clients unaffected).

    Brokers not named in any group form one more group.
    """

    kind = "partition"

    def __init__(
        self, cluster: KafkaCluster, groups: list[list[Target]], log: FaultLog | None = None
    ) -> None:
        super().__init__(cluster, 0, log)
        self.groups = groups
        self.resolved: list[tuple[int, ...]] = []
        self._sidecars: list[Any] = []

    @property
    def target_text(self) -> str:
        return "groups " + " | ".join(",".join(map(str, g)) for g in self.resolved or self.groups)

    def params(self) -> dict[str, Param]:
        return {"groups": tuple("|".join(",".join(map(str, g)) for g in self.resolved).split("|"))}

    def resolve_brokers(self) -> tuple[int, ...]:
        groups = [tuple(sorted({resolve(self.cluster, t) for t in group})) for group in self.groups]
        named = {b for g in groups for b in g}
        if len(named) != sum(len(g) for g in groups):
            raise FaultError(f"partition groups {groups} overlap; each broker may be in one group only")
        rest = tuple(b.node_id for b in self.cluster.brokers if b.node_id not in named)
        if rest:
            groups.append(rest)
        if len(groups) < 2:
            raise FaultError(f"partition {groups} has one side only; name at least two groups")
        self.resolved = groups
        return tuple(sorted(named | set(rest)))

    def _inject(self) -> None:
        for group in self.resolved:
            others = [b for g in self.resolved if g is not group for b in g]
            ports = [
                p for b in others for p in (self.cluster.broker(b).int_port, self.cluster.broker(b).ctl_port)
            ]
            for broker_id in group:
                self._sidecars.append(drop_outgoing(self.cluster, broker_id, ports))

    def _heal(self) -> None:
        while self._sidecars:
            remove_sidecar(self._sidecars.pop())


class IsolateFromQuorum(Partition):
    """One broker cut from the quorum and replication, still reachable by clients."""

    kind = "isolate_from_quorum"

    def __init__(self, cluster: KafkaCluster, target: Target, log: FaultLog | None = None) -> None:
        super().__init__(cluster, [[target]], log)
        self.target = target


class ReplicationCut(Fault):
    """The follower cannot fetch from the leader; quorum and client paths stay open.

    In the follower's network namespace (a sidecar, as for :class:`NetworkCut`), DROP its outgoing TCP
    packets to the leader's replication proxy port (``int-<leader>``): its fetch requests go unanswered, it
    falls behind and leaves the leader's ISR after ``replica.lag.time.max.ms``, silently. Healed like every
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
        self._sidecars.append(drop_outgoing(self.cluster, follower, [port]))

    def _heal(self) -> None:
        while self._sidecars:
            remove_sidecar(self._sidecars.pop())
