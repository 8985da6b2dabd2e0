"""Faults on one broker's disk: ``DiskFull`` fills its log directory.

Each broker's log directory is a filesystem of its own, ``ClusterConfig.log_dir_mb`` large (a tmpfs volume,
docs/cluster.md), mounted as well in the cluster's keeper container (``/logdirs/<node id>``), which runs the
whole cluster's life. The fault works through the keeper, so it reaches the directory whether the broker
runs or not: inject fills the filesystem with a ballast file (``fallocate``, then zeros until ENOSPC);
the broker's next write fails with "No space left on device", Kafka marks the directory failed, and as it
is also the KRaft metadata log's directory, the broker shuts itself down — its leaderships move once the
controller fences it. Heal removes the ballast, checks it is gone, and restarts the broker when it stopped
or took its directory offline (a cluster started with ``log_dir_mb=0`` has no such directory:
:class:`~chaos.errors.FaultUnsupported`).

**Proof that it landed**: the broker logged a storage error (``KafkaStorageException``, "Stopping serving
logs in dir", "No space left on device") after the fill; the partitions it led and whether their
leadership moved are its figures.
"""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING, Any, Final

from chaos.cluster.logs import docker_time
from chaos.errors import ClusterError, FaultError, FaultUnsupported
from chaos.faults.base import Effect, Fault, FaultLog
from chaos.faults.targets import Target

if TYPE_CHECKING:
    from chaos.cluster.cluster import KafkaCluster

BALLAST: Final = "chaos-ballast"
"""The ballast's file name in the log directory's root (Kafka only loads directories from there)."""
LEFT_FREE_KB: Final = 64
"""A fill that leaves more than this free failed (the filesystem did not take the ballast)."""
STORAGE_ERROR: Final = re.compile(
    r"KafkaStorageException|Stopping serving logs in dir|No space left on device|"
    r"Shutdown broker because all log dirs|[Ll]og directory .* (?:has )?failed|metadata log dir .* failed"
)
"""What a broker logs when a write to its log directory fails."""
OFFLINE: Final = re.compile(r"Stopping serving logs in dir|Shutdown broker because all log dirs")
"""A broker that logged this since it started no longer serves its log directory: heal restarts it."""


def text_of(output: Any) -> str:
    """What ``docker exec`` or ``docker logs`` gave, as text."""
    return output.decode(errors="replace") if isinstance(output, bytes) else str(output)


def restart_if_offline(fault: Fault, broker_id: int, timeout_s: float) -> bool:
    """Start broker ``broker_id`` again when, since ``fault`` was injected, it stopped or took its log
    directory offline (what Kafka does when a write to it fails); True when it was restarted."""
    container = fault.cluster.broker(broker_id).docker
    container.reload()
    if container.status == "paused":
        return False  # another fault's; its heal (or heal_all) resumes it
    if container.status == "running" and not _went_offline(container, fault):
        return False
    fresh = container.status == "running"  # alive but without its log directory: a new process
    if fault.interrupted:
        fault.cluster.restart_broker(broker_id, timeout_s, wait=False, fresh=fresh)
        fault.note("restarted without waiting for it to start (the session was interrupted)")
    else:
        fault.cluster.restart_broker(broker_id, timeout_s, fresh=fresh)
    fault.note(
        f"broker {broker_id} restarted ({'it took its log directory offline' if fresh else 'it had stopped'})"
    )
    return True


def _went_offline(container: Any, fault: Fault) -> bool:
    """The running broker logged that it stopped serving its log directory since it last started."""
    started = _started_at(container)
    since = max(started, fault.record.injected_at if fault.record else started)
    return bool(OFFLINE.search(text_of(container.logs(since=since))))


class DiskFull(Fault):
    """Fill broker ``target``'s log directory; heal removes the ballast, restarts the broker if it needs."""

    kind = "disk_full"
    stops_brokers = True

    def __init__(
        self,
        cluster: KafkaCluster,
        target: Target,
        restart_timeout_s: float = 90.0,
        log: FaultLog | None = None,
    ) -> None:
        super().__init__(cluster, target, log)
        self.restart_timeout_s = restart_timeout_s
        self.filled_kb: int | None = None
        self.led: list[tuple[str, int]] = []
        """The partitions the broker led when the disk filled."""
        self.restarted = False

    def _keeper(self) -> tuple[Any, str]:
        """The keeper container and the broker's log directory in it."""
        (broker_id,) = self.brokers
        try:
            keeper, root = self.cluster.log_dir_keeper()
        except ClusterError as exc:
            raise FaultUnsupported(f"broker {broker_id} cannot take a disk fault: {exc}") from None
        return keeper, f"{root}/{broker_id}"

    def _run(self, keeper: Any, script: str) -> tuple[int, str]:
        code, output = keeper.exec_run(["sh", "-c", script])
        return int(code), text_of(output)

    def _inject(self) -> None:
        (broker_id,) = self.brokers
        keeper, directory = self._keeper()
        self.led = self._leading(broker_id)
        d = shlex.quote(directory)
        ballast = shlex.quote(f"{directory}/{BALLAST}")
        free = f"df -Pk {d} | awk 'NR == 2 {{print $4}}'"
        script = (
            f"test -d {d} || exit 3; "
            f'fallocate -l "$(( $({free}) * 1024 ))" {ballast} 2>/dev/null; '
            f"cat /dev/zero >> {ballast} 2>/dev/null; "
            f"{free}"
        )
        code, output = self._run(keeper, script)
        left = output.strip().splitlines()[-1] if output.strip() else ""
        if code == 3 or not left.isdigit():
            raise FaultError(
                f"could not fill broker {broker_id}'s log directory {directory} in the keeper "
                f"(exit {code}): {output.strip()[-300:]}"
            )
        if int(left) > LEFT_FREE_KB:
            raise FaultError(f"broker {broker_id}'s log directory still has {left} kB free after the fill")
        code, output = self._run(keeper, f"du -k {ballast} | cut -f1")
        self.filled_kb = int(output.strip()) if output.strip().isdigit() else None
        self.note(f"ballast {directory}/{BALLAST}: {self.filled_kb} kB, {left} kB left free")

    def _leading(self, broker_id: int) -> list[tuple[str, int]]:
        try:
            partitions = self.cluster.describe_partitions()
        except Exception:  # evidence only: the fault does not depend on it
            return []
        return sorted((p.topic, p.partition) for p in partitions if p.leader == broker_id)

    def _effect(self) -> Effect | None:
        (broker_id,) = self.brokers
        assert self.record is not None
        container = self.cluster.broker(broker_id).docker
        container.reload()
        logs = text_of(container.logs(since=self.record.injected_at))
        errors = [line for line in logs.splitlines() if STORAGE_ERROR.search(line)]
        moved = self._moved(broker_id)
        status = f"its container {container.status}"
        if errors:
            first = errors[0].strip()[:200]
            return Effect(
                True,
                f"broker {broker_id} logged {len(errors)} storage error lines (first: {first}); "
                f"{status}{moved}",
            )
        return Effect(
            False, f"broker {broker_id} logged no storage error after its disk filled; {status}{moved}"
        )

    def _moved(self, broker_id: int) -> str:
        if not self.led:
            return "; it led no partition"
        others = [b.node_id for b in self.cluster.brokers if b.node_id != broker_id]
        for via in others:
            try:
                now = {(p.topic, p.partition): p.leader for p in self.cluster.describe_partitions(via=via)}
            except Exception:  # that broker cannot answer: ask the next
                continue
            moved = [tp for tp in self.led if now.get(tp) not in (broker_id, None)]
            return f"; leadership of {len(moved)} of the {len(self.led)} partitions it led moved"
        return f"; it led {len(self.led)} partitions (no other broker answered for their leaders)"

    def _heal(self) -> None:
        (broker_id,) = self.brokers
        keeper, directory = self._keeper()
        ballast = shlex.quote(f"{directory}/{BALLAST}")
        code, output = self._run(keeper, f"rm -f {ballast}; test ! -e {ballast}")
        if code != 0:
            raise FaultError(
                f"could not remove the ballast {directory}/{BALLAST} of broker {broker_id} (exit {code}): "
                f"{output.strip()[-300:]}\n  fix: heal_all(cluster) retries; by hand: docker exec "
                f"{keeper.name} rm -f {directory}/{BALLAST}"
            )
        self.restarted = restart_if_offline(self, broker_id, self.restart_timeout_s)


def _started_at(container: Any) -> float:
    """When the container's process last started (epoch s; 0 when Docker does not say)."""
    return docker_time(str((container.attrs.get("State") or {}).get("StartedAt", ""))) or 0.0
