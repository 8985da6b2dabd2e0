"""Heal everything, whoever injected it: the between-tests and end-of-run safety net."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final

from chaos.errors import FaultError
from chaos.faults.base import DEFAULT_LOG, Fault, FaultLog, live_faults
from chaos.faults.network import remove_all_sidecars
from chaos.faults.toxics import forget_proxy_faults, restart_toxiproxy

if TYPE_CHECKING:
    from chaos.cluster.cluster import KafkaCluster

HEAL_ATTEMPTS: Final = 3
RETRY_BACKOFF_S: Final = 0.5  # times the attempt number: 0.5 s, then 1 s
RETRY_WITHIN_S: Final = 60.0  # no retry starts later than this after heal_all began (a heal may be slow)
RESET_NOTE: Final = "healed by Toxiproxy's reset (heal_all)"


def heal_all(
    cluster: KafkaCluster,
    log: FaultLog | None = None,
    restart_timeout_s: float = 90.0,
    attempts: int = HEAL_ATTEMPTS,
    backoff_s: float = RETRY_BACKOFF_S,
    *,
    interrupted: bool = False,
) -> list[str]:
    """Heal the active faults of ``log`` and every other fault still live on the cluster (whichever log
    records it), retrying failed heals up to ``attempts`` times; then reset Toxiproxy, remove iptables
    sidecars, unpause and restart brokers. Returns what it did (empty when nothing was broken).
    ``interrupted``: the session is ending; nothing waits for a restarted broker to start
    (:attr:`Fault.interrupted`).

    Never raises for one step; at the end raises a :class:`FaultError` naming every fault still not
    healed (each stays active, its record carrying the error), else the first other error — so a caller
    rebuilds the cluster rather than run on a cut one.
    """
    errors: list[BaseException] = []
    actions, pending = heal_faults(
        _faults_of(cluster, log or DEFAULT_LOG), attempts, backoff_s, interrupted=interrupted
    )
    try:
        cluster.toxiproxy.reset()
        # the reset undid whatever Toxiproxy fault could not heal itself: record those healed by it
        actions += [f"healed {f!r} by Toxiproxy's reset" for f in forget_proxy_faults(cluster, RESET_NOTE)]
    except Exception:  # a wedged link (Toxiproxy#558) blocks the reset too: start Toxiproxy afresh
        try:
            restart_toxiproxy(cluster)
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
                cluster.restart_broker(broker.node_id, restart_timeout_s, wait=not interrupted)
                actions.append(f"restarted broker {broker.node_id} (was {status})")
        except Exception as exc:
            errors.append(exc)
    stuck = [f for f in pending if f.active]  # the reset above may have healed some
    if stuck:
        raise not_healed(stuck, cluster.run_id)
    if errors:
        raise errors[0]
    return actions


def heal_faults(
    faults: list[Fault],
    attempts: int = HEAL_ATTEMPTS,
    backoff_s: float = RETRY_BACKOFF_S,
    *,
    interrupted: bool = False,
) -> tuple[list[str], list[Fault]]:
    """Heal ``faults``, retrying those whose heal failed up to ``attempts`` times (no retry starts later
    than ``RETRY_WITHIN_S`` after the first). Returns what was done and the faults still not healed (each
    stays active, its record carrying the error). ``interrupted``: see :attr:`Fault.interrupted`."""
    actions: list[str] = []
    started = time.monotonic()
    pending = faults
    for attempt in range(1, attempts + 1):
        failed: list[Fault] = []
        for fault in pending:
            if not fault.active:  # healed meanwhile (its own thread, or a Toxiproxy restart)
                continue
            try:
                fault.heal(interrupted=interrupted)
                actions.append(f"healed {fault!r}" + (f" (attempt {attempt})" if attempt > 1 else ""))
            except Exception:  # recorded on the fault; retried below, reported by the caller
                failed.append(fault)
        pending = failed
        if not pending or attempt == attempts or time.monotonic() - started > RETRY_WITHIN_S:
            break
        time.sleep(backoff_s * attempt)
    return actions, [f for f in pending if f.active]


def not_healed(faults: list[Fault], run_id: str) -> FaultError:
    """The error for faults still not healed after their retries: each with its record's error."""
    lines = "\n".join(f"  {f!r}: {f.record.error if f.record else '?'}" for f in faults)
    return FaultError(
        f"{len(faults)} fault(s) of run {run_id} still not healed after their retries:\n{lines}\n"
        f"  fix: rebuild the cluster (the plugin does) or `chaos clean --run-id {run_id}`; "
        "the faults' records say why"
    )


def _faults_of(cluster: KafkaCluster, log: FaultLog) -> list[Fault]:
    """The log's active faults on ``cluster``, then the cluster's other live faults (other logs')."""
    faults = [f for f in log.active() if f.cluster is cluster]
    return faults + [f for f in live_faults(cluster) if not any(f is g for g in faults)]
