"""Packet counters on every Toxiproxy proxy: the proof that traffic used a proxy while a toxic held.

Toxiproxy's own byte counters (``-proxy-metrics``) are added to only when a connection closes, and Kafka's
connections stay open for a whole run, so a toxic proves it landed with iptables counters instead: one
sidecar per cluster in Toxiproxy's network namespace (started by the first toxic, role ``meter``) holds a
chain of counting rules — each proxy's listen port, packets in (``--dport``) and out (``--sport``), named
by a comment — that match and return, dropping nothing. A Toxiproxy restart gives it a new namespace:
:func:`forget_meter` drops the old meter, the next reading starts another (counters from zero).
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from typing import TYPE_CHECKING, Any, Final

from chaos.errors import FaultError
from chaos.faults.network import (
    BACKENDS,
    Command,
    remove_sidecar,
    rule_counters,
    run_in,
    sidecar_usable,
    start_sidecar_in,
)

if TYPE_CHECKING:
    from chaos.cluster.cluster import KafkaCluster

METER_ROLE: Final = "meter"
METER_CHAIN: Final = "CHAOS-METER"


class _Meter:
    def __init__(self, sidecar: Any, backend: str) -> None:
        self.sidecar = sidecar
        self.backend = backend


_LOCK = threading.Lock()
_METERS: weakref.WeakKeyDictionary[Any, _Meter | str] = weakref.WeakKeyDictionary()


def proxy_packets(cluster: KafkaCluster) -> dict[str, int] | None:
    """Packets in and out of each proxy's listen port since the cluster's meter started, by proxy name;
    None when no meter can run (the reason is kept: :func:`meter_problem`)."""
    with _LOCK:
        meter = _METERS.get(cluster)
        if isinstance(meter, str):
            return None
        if meter is None or not sidecar_usable(meter.sidecar):
            if meter is not None:
                remove_sidecar(meter.sidecar)
            try:
                meter = _start(cluster)
            except Exception as exc:
                why = str(exc).splitlines()[0] if str(exc) else repr(exc)
                _METERS[cluster] = f"no traffic meter: {why}"
                return None
            _METERS[cluster] = meter
        rules = rule_counters(meter.sidecar, meter.backend, METER_CHAIN)
    found: dict[str, int] = {}
    for packets, _, proxy in rules:
        if proxy is not None:
            found[proxy] = found.get(proxy, 0) + packets
    return found


def meter_problem(cluster: KafkaCluster) -> str | None:
    """Why this cluster has no meter (None: it has one, or none was tried yet)."""
    meter = _METERS.get(cluster)
    return meter if isinstance(meter, str) else None


def forget_meter(cluster: KafkaCluster) -> None:
    """Drop the cluster's meter (Toxiproxy restarted: its namespace, and the counters, are new)."""
    with _LOCK:
        meter = _METERS.pop(cluster, None)
    if isinstance(meter, _Meter):
        remove_sidecar(meter.sidecar)


def _rules(cluster: KafkaCluster) -> list[Command]:
    rules: list[Command] = []
    for broker in cluster.brokers:
        for spec in cluster.proxy_specs(broker):
            port = spec.listen.rpartition(":")[2]
            for match in ("--dport", "--sport"):
                rules.append(
                    ["-p", "tcp", match, port, "-m", "comment", "--comment", spec.name, "-j", "RETURN"]
                )
    return rules


def _start(cluster: KafkaCluster) -> _Meter:
    name = f"chaos-{cluster.run_id}-meter"
    sidecar = start_sidecar_in(cluster, cluster.toxiproxy_container_id(), name, METER_ROLE)
    failures = []
    for backend in BACKENDS:
        commands = [[backend, "-w", "-N", METER_CHAIN]]
        commands += [[backend, "-w", "-A", METER_CHAIN, *rule] for rule in _rules(cluster)]
        commands += [
            [backend, "-w", "-I", builtin, "1", "-j", METER_CHAIN] for builtin in ("INPUT", "OUTPUT")
        ]
        code, output = run_in(sidecar, commands)
        if code == 0:
            return _Meter(sidecar, backend)
        failures.append(f"{backend} (exit {code}): {output.strip()[-200:]}")
        with contextlib.suppress(Exception):
            run_in(sidecar, [[backend, "-w", "-F", METER_CHAIN]])
    remove_sidecar(sidecar)
    raise FaultError(f"iptables failed in Toxiproxy's namespace: {'; '.join(failures)}")
