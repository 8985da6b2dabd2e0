"""Reliability 4: iptables faults heal clean, cycle after cycle, even when their sidecar is killed.

On the session cluster: 30 inject/heal cycles of each iptables fault (network cut, partition, replication
cut), once with the fault's sidecar left alone and once with it killed (``docker kill``) before the heal.
After every heal, every broker's namespace is listed with both backends (``iptables`` and
``iptables-legacy``) from an inspector container of its own: no ``CHAOS-`` chain, no DROP rule. Each test
prints one line of figures (cycles, leftovers, seconds) for docs/measurements.md's reliability table.

Needs Docker and the harness's images; not collected by a bare ``pytest`` (``tests/reliability/conftest.py``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from chaos.cluster.cluster import ROLE_LABEL, KafkaCluster
from chaos.cluster.engine import LABEL, docker_client, labelled_containers
from chaos.faults.base import FaultLog
from chaos.faults.network import (
    BACKENDS,
    CHAIN_PREFIX,
    SIDECAR_ROLE,
    IptablesFault,
    IsolateFromQuorum,
    NetworkCut,
    ReplicationCut,
    sidecar_image,
)

pytestmark = pytest.mark.reliability

CYCLES = 30
INSPECTOR_ROLE = "inspect"  # not the sidecars' role: heal_all's sidecar sweep leaves the inspectors alone

Build = Callable[[KafkaCluster, int, FaultLog], IptablesFault]
KINDS: dict[str, Build] = {
    "network_cut": lambda c, i, log: NetworkCut(c, i % 3 + 1, log=log),
    "isolate_from_quorum": lambda c, i, log: IsolateFromQuorum(c, i % 3 + 1, log=log),
    "replication_cut": lambda c, i, log: ReplicationCut(c, i % 3 + 1, (i + 1) % 3 + 1, log=log),
}


@pytest.fixture
def inspectors(kafka_cluster: KafkaCluster) -> Iterator[dict[int, Any]]:
    """One long-lived container per broker in its namespace (NET_ADMIN), to list its rules."""
    started: dict[int, Any] = {}
    try:
        for broker in kafka_cluster.brokers:
            started[broker.node_id] = docker_client().containers.run(
                sidecar_image(),
                ["sleep", "3600"],
                name=f"chaos-{kafka_cluster.run_id}-inspect-{broker.node_id}-{uuid.uuid4().hex[:6]}",
                network_mode=f"container:{broker.docker.id}",
                cap_add=["NET_ADMIN"],
                labels={LABEL: kafka_cluster.run_id, ROLE_LABEL: INSPECTOR_ROLE},
                detach=True,
            )
        yield started
    finally:
        for container in started.values():
            container.remove(force=True)


def rules(inspector: Any) -> dict[str, list[str]]:
    """``-S`` of the broker's filter table, per backend."""
    listed = {}
    for backend in BACKENDS:
        code, output = inspector.exec_run([backend, "-w", "-S"])
        assert code == 0, f"{backend} -S failed in {inspector.name}: {output!r}"
        listed[backend] = output.decode(errors="replace").splitlines()
    return listed


def leftovers(inspectors: dict[int, Any]) -> list[str]:
    """Every chaos chain or DROP rule in any broker namespace, in either backend."""
    return [
        f"broker {node_id} {backend}: {line}"
        for node_id, inspector in inspectors.items()
        for backend, lines in rules(inspector).items()
        for line in lines
        if CHAIN_PREFIX in line or "-j DROP" in line
    ]


def kill_sidecars(cluster: KafkaCluster) -> int:
    selector = [f"{LABEL}={cluster.run_id}", f"{ROLE_LABEL}={SIDECAR_ROLE}"]
    sidecars = labelled_containers(selector, stopped=False)
    for sidecar in sidecars:
        sidecar.kill()
    return len(sidecars)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("sidecar", ["kept", "killed"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_iptables_fault_heals_clean_every_cycle(
    kafka_cluster: KafkaCluster, inspectors: dict[int, Any], kind: str, sidecar: str
) -> None:
    assert leftovers(inspectors) == [], "the cluster starts with rules left by an earlier test"
    log = FaultLog()
    started = time.monotonic()
    found: list[str] = []
    for cycle in range(CYCLES):
        fault = KINDS[kind](kafka_cluster, cycle, log)
        fault.inject()
        installed = [line for line in leftovers(inspectors) if fault.chain in line]
        assert installed, f"cycle {cycle}: {fault!r} installed no chain {fault.chain}"
        if sidecar == "killed":
            assert kill_sidecars(kafka_cluster) > 0
        fault.heal()
        left = leftovers(inspectors)
        found += [f"cycle {cycle}: {line}" for line in left]
        assert fault.record is not None
        assert fault.record.healed_at is not None
        assert fault.record.error is None
        assert left == [], f"cycle {cycle} of {kind} (sidecar {sidecar}) left {left}"
    assert log.active() == []
    still = labelled_containers([f"{LABEL}={kafka_cluster.run_id}", f"{ROLE_LABEL}={SIDECAR_ROLE}"])
    assert still == [], f"sidecars left: {[c.name for c in still]}"
    print(
        f"\nreliability iptables {kind} sidecar={sidecar}: {CYCLES} cycles, {len(found)} leftovers, "
        f"{time.monotonic() - started:.1f} s"
    )


@pytest.mark.timeout(300)
def test_two_faults_on_one_broker_heal_independently(
    kafka_cluster: KafkaCluster, inspectors: dict[int, Any]
) -> None:
    log = FaultLog()
    cut = NetworkCut(kafka_cluster, 1, log=log)
    fetch = ReplicationCut(kafka_cluster, 1, 2, log=log)
    cut.inject()
    fetch.inject()
    cut.heal()
    left = leftovers(inspectors)
    assert left, "healing the network cut also removed the replication cut"
    assert all(fetch.chain in line for line in left), left
    assert any(f"--dport {kafka_cluster.broker(2).int_port} -j DROP" in line for line in left), left
    fetch.heal()
    assert leftovers(inspectors) == []
