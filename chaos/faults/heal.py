"""Heal everything, whoever injected it: the between-tests and end-of-run safety net."""

from __future__ import annotations

from typing import TYPE_CHECKING

from chaos.faults.base import DEFAULT_LOG, FaultLog
from chaos.faults.network import remove_all_sidecars

if TYPE_CHECKING:
    from chaos.cluster.cluster import KafkaCluster


def heal_all(
    cluster: KafkaCluster, log: FaultLog | None = None, restart_timeout_s: float = 90.0
) -> list[str]:
    """Heal active faults of ``log``, then reset Toxiproxy, remove iptables sidecars, unpause and
    restart brokers. Returns what it had to do (empty when nothing was broken). Never raises for one
    step; raises the first error at the end so a caller can rebuild the cluster.
    """
    actions: list[str] = []
    errors: list[BaseException] = []
    for fault in (log or DEFAULT_LOG).active():
        if fault.cluster is not cluster:
            continue
        try:
            fault.heal()
            actions.append(f"healed {fault!r}")
        except Exception as exc:
            errors.append(exc)
    try:
        cluster.toxiproxy.reset()
    except Exception:  # a wedged link (Toxiproxy issue 558) blocks the reset too: start Toxiproxy afresh
        try:
            cluster.reset_toxiproxy()
            actions.append("restarted Toxiproxy")
        except Exception as exc:
            errors.append(exc)
    actions += [f"removed {name}" for name in remove_all_sidecars(cluster)]
    for broker in cluster.brokers:
        try:
            status = broker.status()
            if status == "paused":
                broker.docker.unpause()
                actions.append(f"unpaused broker {broker.node_id}")
            elif status != "running":
                cluster.restart_broker(broker.node_id, restart_timeout_s)
                actions.append(f"restarted broker {broker.node_id} (was {status})")
        except Exception as exc:
            errors.append(exc)
    if errors:
        raise errors[0]
    return actions
