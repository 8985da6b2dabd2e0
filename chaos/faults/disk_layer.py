"""Faults through the fault layer under a broker's log directory: a slow disk, a failing disk, a power loss.

A cluster started with ``ClusterConfig(disk_layer=True)`` on the local Kafka image mounts each broker's log
directory through ``faultfs`` (a FUSE pass-through of the project's own, built into the image:
chaos/cluster/images/context/faultfs). The layer passes every operation to the broker's log volume and,
when told through its control socket (``faultfs ctl`` inside the container), makes writes and fsyncs wait
(``SlowDisk``), fails writes or reads or corrupts what is read (``DiskError``), or drops every write the
broker never fsynced and lets no more I/O through (``PowerLoss``, then the broker is killed and started
again). It counts what went through it; those counts are the proofs that a fault landed.

Its durability model: a file's bytes up to its size at its last fsync are on disk, the rest (appends since)
is in a page cache that the power loss empties; writes in place over bytes already on disk are kept, and a
file created and never fsynced is left empty, not removed — Kafka's log segments are append-only and its
checkpoint files are written to a temporary file, fsynced and renamed. Kafka fsyncs a segment only when it
rolls, at ``flush.messages`` / ``flush.ms`` (off by default) and on a clean shutdown, and its KRaft
metadata log on every write: so a power loss of every replica of a partition loses the acknowledged
records since its last roll, unless the topic flushes each one.

On any other cluster, and on the official image (no layer), these faults refuse with
:class:`~chaos.errors.FaultUnsupported`, naming the fix.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Final

from chaos.errors import FaultError, FaultUnsupported
from chaos.faults.base import Effect, Fault, FaultLog, Param
from chaos.faults.disk import STORAGE_ERROR, restart_if_offline, text_of
from chaos.faults.targets import FollowerOf, LeaderOf, Target, resolve

if TYPE_CHECKING:
    from chaos.cluster.cluster import KafkaCluster

IO_ERROR: Final = re.compile(
    rf"{STORAGE_ERROR.pattern}|Input/output error|a fault occurred in a recent unsafe memory access"
)
"""What a broker logs when its disk fails it: a storage error, an I/O error, or the JVM's fault on a read
of a mapped file that failed (Kafka then stops the process)."""
ERRORS: Final = ("unwritable", "unreadable", "corrupt")
"""What a :class:`DiskError` makes the layer do: fail writes (EIO), fail reads (EIO), flip bytes read."""
_FIX: Final = (
    "  fix: disk-layer faults need a cluster started with ClusterConfig(disk_layer=True) on the local Kafka "
    "image (CHAOS_IMAGES=local, then `chaos images ensure`), whose brokers mount their log directories "
    "through faultfs; a scenario asks for it with Scenario(cluster=ClusterNeeds(disk_layer=True))"
)


@dataclass(frozen=True)
class LayerStats:
    """What went through one broker's layer since it was mounted (``faultfs ctl '{"op":"stats"}'``)."""

    writes: int = 0
    write_bytes: int = 0
    fsyncs: int = 0
    reads: int = 0
    delayed: int = 0
    delay_s: float = 0.0
    failed: int = 0
    corrupt_reads: int = 0
    tracked: int = 0
    unsynced_bytes: int = 0
    frozen: bool = False
    started: int = 0
    """When the layer was mounted (Unix ns): another value is another layer, its counts begun anew."""

    @classmethod
    def of(cls, data: dict[str, Any]) -> LayerStats:
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


@dataclass(frozen=True)
class Dropped:
    """What a power loss cut from one broker's log directory: the files and bytes cut (a preallocated index
    counts whole), the written bytes among them (data lost), and those by path under the directory."""

    files: int
    bytes: int
    data_bytes: int
    paths: dict[str, int]

    @classmethod
    def of(cls, data: dict[str, Any]) -> Dropped:
        paths = {str(k): int(v) for k, v in (data.get("paths") or {}).items()}
        files, cut, data_bytes = (int(data.get(k, 0)) for k in ("files", "bytes", "data_bytes"))
        return cls(files, cut, data_bytes, paths)


def layer_request(cluster: KafkaCluster, broker_id: int, request: dict[str, Any]) -> dict[str, Any]:
    """Send ``request`` to broker ``broker_id``'s layer; its reply (``ok`` true). FaultUnsupported when the
    broker has no layer, FaultError when it is not running or the layer refused."""
    container = cluster.broker(broker_id).docker
    container.reload()
    if container.status != "running":
        raise FaultError(f"broker {broker_id} is {container.status}: its disk layer is up only while it runs")
    code, output = container.exec_run(["faultfs", "ctl", json.dumps(request, separators=(",", ":"))])
    text = text_of(output).strip()
    reply: dict[str, Any] | None = None
    try:
        parsed = json.loads(text.splitlines()[-1]) if text else None
        reply = parsed if isinstance(parsed, dict) else None
    except json.JSONDecodeError:
        pass
    if reply is None:
        if code in (126, 127) or "executable file not found" in text or "no such file" in text.lower():
            raise FaultUnsupported(f"broker {broker_id} has no disk layer ({code}: {text[-200:]})\n{_FIX}")
        raise FaultError(f"broker {broker_id}'s disk layer did not answer ({code}): {text[-300:]}\n{_FIX}")
    if not reply.get("ok"):
        raise FaultError(f"broker {broker_id}'s disk layer refused {request}: {reply.get('error')}")
    return reply


def layer_stats(cluster: KafkaCluster, broker_id: int) -> LayerStats:
    """Broker ``broker_id``'s layer counts."""
    return LayerStats.of(layer_request(cluster, broker_id, {"op": "stats"})["stats"])


class LayerFault(Fault):
    """Base of the faults that set the layer of one broker; heal clears its settings."""

    def __init__(self, cluster: KafkaCluster, target: Target, log: FaultLog | None = None) -> None:
        super().__init__(cluster, target, log)
        self.before: LayerStats | None = None
        """The layer's counts at the inject."""
        self.restart_timeout_s = 90.0
        self.restarted = False

    def settings(self) -> dict[str, Any]:
        """What the fault sets on the layer (``faultfs ctl`` ``set``)."""
        raise NotImplementedError

    def _inject(self) -> None:
        (broker_id,) = self.brokers
        self.before = layer_stats(self.cluster, broker_id)
        layer_request(self.cluster, broker_id, {"op": "set", "settings": self.settings()})

    def _delta(self) -> tuple[LayerStats, LayerStats] | None:
        """The layer's counts now and at the inject; None when the broker stopped or restarted since (its
        layer's counts gone, or begun anew)."""
        (broker_id,) = self.brokers
        assert self.before is not None
        container = self.cluster.broker(broker_id).docker
        container.reload()
        if container.status != "running":
            return None
        now = layer_stats(self.cluster, broker_id)
        if now.started != self.before.started:
            return None
        return now, self.before

    def _heal(self) -> None:
        if self.before is None:  # refused before it set anything
            return
        (broker_id,) = self.brokers
        container = self.cluster.broker(broker_id).docker
        container.reload()
        if container.status == "running":
            layer_request(self.cluster, broker_id, {"op": "set", "settings": {}})
        else:
            self.note(f"broker {broker_id} was {container.status}: its layer starts clear when it starts")
        self.restarted = restart_if_offline(self, broker_id, self.restart_timeout_s)


class SlowDisk(LayerFault):
    """Broker ``target``'s log directory writes at ``write_bps`` bytes a second (0: no limit), every write
    waits ``write_ms`` first and every fsync ``fsync_ms``. Landed: writes or fsyncs waited in the window."""

    kind = "slow_disk"

    def __init__(
        self,
        cluster: KafkaCluster,
        target: Target,
        write_bps: int = 262_144,
        write_ms: float = 50.0,
        fsync_ms: float = 500.0,
        log: FaultLog | None = None,
    ) -> None:
        super().__init__(cluster, target, log)
        if write_bps < 0 or write_ms < 0 or fsync_ms < 0 or not (write_bps or write_ms or fsync_ms):
            raise FaultError(
                f"SlowDisk(write_bps={write_bps}, write_ms={write_ms}, fsync_ms={fsync_ms}): each must be "
                ">= 0 and one of them > 0 (e.g. write_bps=262144: 256 KiB/s)"
            )
        self.write_bps, self.write_ms, self.fsync_ms = write_bps, write_ms, fsync_ms

    def params(self) -> dict[str, Param]:
        return {"write_bps": self.write_bps, "write_ms": self.write_ms, "fsync_ms": self.fsync_ms}

    def settings(self) -> dict[str, Any]:
        return self.params()

    def _effect(self) -> Effect | None:
        if self.before is None:
            return None
        (broker_id,) = self.brokers
        delta = self._delta()
        if delta is None:
            return Effect(False, f"broker {broker_id} stopped or restarted in the window: no counts to read")
        now, before = delta
        waited, seconds = now.delayed - before.delayed, now.delay_s - before.delay_s
        wrote = now.write_bytes - before.write_bytes
        fsyncs = now.fsyncs - before.fsyncs
        text = (
            f"broker {broker_id}'s disk held {waited} writes and fsyncs back for {seconds:.1f} s in all "
            f"({now.writes - before.writes} writes of {wrote} bytes, {fsyncs} fsyncs in the window)"
        )
        return Effect(waited > 0, text if waited else f"{text}: nothing was written, nothing waited")


class DiskError(LayerFault):
    """Broker ``target``'s log directory fails: ``error`` "unwritable" (every write, fsync, create, rename
    or truncate fails with EIO), "unreadable" (every read that reaches the disk fails with EIO; the page
    cache is dropped first) or "corrupt" (every such read returns its bytes with one in 97 flipped). Heal
    clears it and restarts the broker if it took its directory offline (what Kafka does on an I/O error).
    Landed: operations failed, or reads were corrupted, in the window."""

    kind = "disk_error"
    stops_brokers = True

    def __init__(
        self,
        cluster: KafkaCluster,
        target: Target,
        error: str = "unwritable",
        restart_timeout_s: float = 90.0,
        log: FaultLog | None = None,
    ) -> None:
        super().__init__(cluster, target, log)
        if error not in ERRORS:
            raise FaultError(f"DiskError(error={error!r}) must be one of {', '.join(ERRORS)}")
        self.error = error
        self.restart_timeout_s = restart_timeout_s

    def params(self) -> dict[str, Param]:
        return {"error": self.error}

    def settings(self) -> dict[str, Any]:
        return {"error": self.error}

    def _effect(self) -> Effect | None:
        if self.before is None:
            return None
        (broker_id,) = self.brokers
        container = self.cluster.broker(broker_id).docker
        assert self.record is not None
        logs = text_of(container.logs(since=self.record.injected_at))
        storage = [line for line in logs.splitlines() if IO_ERROR.search(line)]
        logged = f"; it logged {len(storage)} I/O error lines" if storage else "; no I/O error logged"
        delta = self._delta()
        if delta is None:
            return Effect(bool(storage), f"broker {broker_id} stopped or restarted in the window{logged}")
        now, before = delta
        hit = (now.failed - before.failed) + (now.corrupt_reads - before.corrupt_reads)
        what = "reads corrupted" if self.error == "corrupt" else "operations failed"
        return Effect(hit > 0, f"broker {broker_id}'s disk ({self.error}): {hit} {what} in window{logged}")


class PowerLoss(Fault):
    """The brokers lose every write they had not fsynced, at once, and start again: broker ``target``, or
    with ``every_replica`` every replica of the partition ``target`` names (a :class:`LeaderOf` or
    :class:`FollowerOf`). Inject has each layer truncate what was never fsynced and let no more I/O through,
    then kills the brokers; heal starts them (a retried heal kills one a failed attempt left frozen).
    Landed: every broker's layer lost power before its container was killed; the bytes it dropped are the
    figure."""

    kind = "power_loss"
    stops_brokers = True

    def __init__(
        self,
        cluster: KafkaCluster,
        target: Target,
        every_replica: bool = False,
        restart_timeout_s: float = 120.0,
        log: FaultLog | None = None,
    ) -> None:
        super().__init__(cluster, target, log)
        if every_replica and not isinstance(target, LeaderOf | FollowerOf):
            raise FaultError(
                "PowerLoss(every_replica=True) needs a partition's LeaderOf or FollowerOf target, "
                f"not {target!r}"
            )
        self.every_replica = every_replica
        self.restart_timeout_s = restart_timeout_s
        self.dropped: dict[int, Dropped] = {}
        self.killed: list[int] = []

    def params(self) -> dict[str, Param]:
        return {"every_replica": True} if self.every_replica else {}

    def resolve_brokers(self) -> tuple[int, ...]:
        if not self.every_replica:
            return super().resolve_brokers()
        assert isinstance(self.target, LeaderOf | FollowerOf)
        resolve(self.cluster, self.target)  # the partition has the holder the target names
        state = self.cluster.partition(self.target.topic, self.target.partition)
        return tuple(sorted(state.replicas))

    def _inject(self) -> None:
        for broker_id in self.brokers:  # every layer stops before any broker dies: "at once"
            reply = layer_request(self.cluster, broker_id, {"op": "powerloss"})
            self.dropped[broker_id] = Dropped.of(reply.get("dropped") or {})
        for broker_id in self.brokers:
            self.cluster.broker(broker_id).docker.kill()
            self.killed.append(broker_id)
        for broker_id in self.brokers:  # gone before any starts again (a start while it exits fails)
            self.cluster.broker(broker_id).docker.wait(timeout=30)
        self.note(
            "written and never fsynced, dropped: "
            + ", ".join(
                f"broker {b} {d.data_bytes} B in {d.files} files" for b, d in sorted(self.dropped.items())
            )
        )

    def dropped_from(self, topic: str, partition: int | None = None) -> int:
        """Written bytes the power loss cut from ``topic``'s partition directories (``partition``: one)."""
        directory = re.compile(rf"{re.escape(topic)}-{partition if partition is not None else '[0-9]+'}/")
        return sum(
            size for d in self.dropped.values() for path, size in d.paths.items() if directory.match(path)
        )

    def _effect(self) -> Effect | None:
        if not self.dropped:
            return None
        lost = [b for b in self.brokers if b in self.dropped and b in self.killed]
        data = sum(d.data_bytes for d in self.dropped.values())
        text = (
            f"brokers {', '.join(map(str, lost)) or 'none'} of {', '.join(map(str, self.brokers))} lost "
            f"power and were killed: {data} bytes written and never fsynced were dropped"
        )
        return Effect(len(lost) == len(self.brokers), text)

    def _heal(self) -> None:
        frozen = [b for b in self.dropped if b not in self.killed]  # a failed inject: its layer hangs
        for broker_id in frozen:
            container = self.cluster.broker(broker_id).docker
            container.reload()
            if container.status == "running":
                container.kill()
                container.wait(timeout=30)
            self.killed.append(broker_id)
        down = []
        for broker_id in self.brokers:
            container = self.cluster.broker(broker_id).docker
            container.reload()
            if container.status != "running":
                down.append(broker_id)
        if down:
            self.cluster.restart_brokers(down, self.restart_timeout_s, wait=not self.interrupted)
            self.note(f"brokers {', '.join(map(str, down))} started again")
