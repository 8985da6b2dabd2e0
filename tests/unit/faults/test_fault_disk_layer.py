"""The disk-layer faults without Docker: what they ask the layer, their proofs of landing, honest heals.

A fake broker container answers ``faultfs ctl`` as the layer does (its settings, its counts, a power loss
that drops what it was told is unsynced) and logs what the test makes it log.
"""

from __future__ import annotations

import json
import time
from typing import Any

import docker.errors
import pytest

from chaos.cluster.config import ClusterConfig, ClusterNeeds
from chaos.errors import ConfigError, FaultError, FaultUnsupported
from chaos.faults.base import FaultLog
from chaos.faults.disk_layer import DiskError, Dropped, LayerStats, PowerLoss, SlowDisk, layer_stats
from chaos.faults.plan import (
    ALL_KINDS,
    DISK_LOG_DIR_MB,
    LAYER_KINDS,
    FaultStep,
    build_fault,
    generate_plan,
    needs_of,
)
from chaos.faults.targets import LeaderOf
from chaos.run.events import PartitionState
from tests.unit.faults.fake_broker import FakeBroker


class FakeLayerContainer:
    """A broker's container running the layer: ``faultfs ctl`` requests answered from its state."""

    def __init__(self, node_id: int, *, layer: bool = True) -> None:
        self.name = f"chaos-lfake-kafka-{node_id}"
        self.status = "running"
        self.layer = layer
        self.settings: dict[str, Any] = {}
        self.stats = LayerStats()
        self.unsynced: dict[str, int] = {"t-0/00000000000000000000.log": 4096}
        self.refuse_powerloss = False
        self.lines: list[tuple[float, str]] = []
        self.started_at = "2026-01-01T00:00:00.000000000Z"
        self.requests: list[dict[str, Any]] = []
        self.kills = 0

    @property
    def attrs(self) -> dict[str, Any]:
        return {"State": {"StartedAt": self.started_at}}

    def reload(self) -> None:
        pass

    def kill(self) -> None:
        if self.status != "running":
            raise docker.errors.APIError(f"container {self.name} is not running")
        self.status = "exited"
        self.kills += 1

    def wait(self, timeout: float | None = None) -> dict[str, int]:
        return {"StatusCode": 137}

    def start(self) -> None:
        """A new process: a new layer, clear and counting from zero."""
        self.status = "running"
        self.settings, self.stats = {}, LayerStats(started=self.stats.started + 1)

    def log(self, text: str) -> None:
        self.lines.append((time.time(), text))

    def logs(self, since: float | None = None, **_: Any) -> bytes:
        return "".join(f"{t}\n" for at, t in self.lines if since is None or at >= since).encode()

    def exec_run(self, cmd: list[str]) -> tuple[int, bytes]:
        if self.status != "running":
            raise docker.errors.APIError(f"container {self.name} is not running")
        if not self.layer:
            return 126, b'OCI runtime exec failed: exec: "faultfs": executable file not found in $PATH'
        assert cmd[:2] == ["faultfs", "ctl"], cmd
        request = json.loads(cmd[2])
        self.requests.append(request)
        reply: dict[str, Any] = {"ok": True}
        if request["op"] == "set":
            self.settings = request["settings"]
        elif request["op"] == "powerloss":
            if self.refuse_powerloss or self.stats.frozen:
                return 1, b'{"ok":false,"error":"the layer already lost power"}\n'
            dropped = sum(self.unsynced.values())
            self.stats = LayerStats(**{**self.stats.__dict__, "frozen": True})
            reply["dropped"] = {"files": 3, "bytes": dropped + 20_000_000, "data_bytes": dropped,
                                "paths": dict(self.unsynced)}  # fmt: skip
        reply["stats"] = self.stats.__dict__
        return 0, (json.dumps(reply) + "\n").encode()

    def did(self, **delta: Any) -> None:
        """The broker's I/O went through the layer: its counts grew by ``delta``."""
        now = self.stats.__dict__
        self.stats = LayerStats(**{k: now[k] + delta.get(k, 0) if k != "frozen" else now[k] for k in now})


class FakeCluster:
    def __init__(self, brokers: int = 3, *, layer: bool = True) -> None:
        self.run_id = "lfake"
        self.brokers = tuple(FakeBroker(i, FakeLayerContainer(i, layer=layer)) for i in range(1, brokers + 1))
        self.restarts: list[tuple[tuple[int, ...], bool]] = []

    def broker(self, node_id: int) -> FakeBroker[FakeLayerContainer]:
        return self.brokers[node_id - 1]

    def container(self, node_id: int) -> FakeLayerContainer:
        return self.brokers[node_id - 1].docker

    def partition(self, topic: str, partition: int) -> PartitionState:
        return PartitionState(topic=topic, partition=partition, leader=2, isr=(1, 2, 3), replicas=(2, 3, 1))

    def restart_broker(
        self, node_id: int, timeout_s: float = 90.0, *, wait: bool = True, fresh: bool = False
    ) -> float:
        return self.restart_brokers((node_id,), timeout_s, wait=wait, fresh=fresh)

    def restart_brokers(
        self, node_ids: Any, timeout_s: float = 90.0, *, wait: bool = True, fresh: bool = False
    ) -> float:
        for node_id in node_ids:
            container = self.container(node_id)
            if fresh and container.status == "running":
                container.kill()
            if container.status != "running":
                container.start()
        self.restarts.append((tuple(node_ids), fresh))
        return 0.0


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster()


def _k(cluster: FakeCluster) -> Any:
    return cluster


# ---- slow disk --------------------------------------------------------------------------------------


def test_a_slow_disk_sets_the_layer_lands_on_writes_held_back_and_heals_clear(cluster: FakeCluster) -> None:
    log = FaultLog()
    fault = SlowDisk(_k(cluster), 2, write_bps=65_536, write_ms=10.0, fsync_ms=200.0, log=log)
    fault.inject()
    broker = cluster.container(2)
    assert broker.settings == {"write_bps": 65_536, "write_ms": 10.0, "fsync_ms": 200.0}
    broker.did(writes=12, write_bytes=4_000, fsyncs=3, delayed=15, delay_s=1.6)
    fault.heal()
    fault.heal()  # twice is once
    assert broker.settings == {}
    assert [r["op"] for r in broker.requests] == ["stats", "set", "stats", "set"]
    (record,) = log.records()
    assert record.effect is not None
    assert record.effect.observed, record.effect.evidence
    assert "15 writes and fsyncs back for 1.6 s" in record.effect.evidence
    assert record.params == (("fsync_ms", 200.0), ("write_bps", 65_536), ("write_ms", 10.0))


def test_a_slow_disk_nothing_was_written_to_did_not_land(cluster: FakeCluster) -> None:
    fault = SlowDisk(_k(cluster), 1, log=FaultLog())
    with fault:
        pass
    assert fault.record is not None
    assert fault.record.effect is not None
    assert not fault.record.effect.observed
    assert "nothing was written" in fault.record.effect.evidence


def test_a_slow_disk_heals_after_its_broker_was_restarted(cluster: FakeCluster) -> None:
    fault = SlowDisk(_k(cluster), 3, log=FaultLog())
    fault.inject()
    broker = cluster.container(3)
    broker.kill()
    broker.start()  # restarted by something else: a new layer, counts from zero
    fault.heal()
    assert fault.record is not None
    assert fault.record.healed_at is not None
    assert fault.record.effect is not None
    assert not fault.record.effect.observed
    assert "stopped or restarted" in fault.record.effect.evidence
    broker.kill()  # and healed while it is down: nothing to clear, a note says why
    other = SlowDisk(_k(cluster), 1, log=FaultLog())
    other.inject()
    cluster.container(1).kill()
    other.heal()
    assert other.record is not None
    assert any("its layer starts clear" in n for n in other.record.notes)
    assert cluster.restarts == [((1,), False)]  # restart_if_offline: it had stopped


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"write_bps": -1}, "each must be >= 0"),
        ({"write_bps": 0, "write_ms": 0, "fsync_ms": 0}, "one of them"),
    ],
)
def test_a_slow_disk_that_slows_nothing_is_refused(options: dict[str, Any], match: str) -> None:
    with pytest.raises(FaultError, match=match):
        SlowDisk(_k(FakeCluster()), 1, **options)


# ---- disk error -------------------------------------------------------------------------------------


def test_an_unwritable_disk_lands_on_failed_writes_and_restarts_a_broker_that_went_offline(
    cluster: FakeCluster,
) -> None:
    log = FaultLog()
    fault = DiskError(_k(cluster), 1, error="unwritable", log=log)
    fault.inject()
    broker = cluster.container(1)
    assert broker.settings == {"error": "unwritable"}
    broker.did(failed=4)
    broker.log("ERROR Error while writing to checkpoint file (kafka.server.LogDirFailureChannel)")
    broker.log("WARN Stopping serving logs in dir /var/lib/kafka/data (kafka.log.LogManager)")
    fault.heal()
    (record,) = log.records()
    assert record.effect is not None
    assert record.effect.observed, record.effect.evidence
    assert "4 operations failed" in record.effect.evidence
    assert fault.restarted
    assert cluster.restarts == [((1,), True)]  # alive without its directory: a new process


def test_an_unreadable_disk_that_stopped_its_broker_lands_on_the_io_error_it_logged(
    cluster: FakeCluster,
) -> None:
    fault = DiskError(_k(cluster), 2, error="unreadable", log=FaultLog())
    fault.inject()
    broker = cluster.container(2)
    broker.log("ERROR Encountered fatal fault: Unexpected error in raft IO thread")
    broker.log(
        "java.lang.InternalError: a fault occurred in a recent unsafe memory access operation in compiled"
    )
    broker.status = "exited"  # Kafka stopped the process
    fault.heal()
    assert fault.record is not None
    assert fault.record.effect is not None
    assert fault.record.effect.observed, fault.record.effect.evidence
    assert "it logged 1 I/O error lines" in fault.record.effect.evidence
    assert fault.restarted


def test_a_corrupting_disk_lands_on_corrupted_reads_and_an_unknown_error_is_refused(
    cluster: FakeCluster,
) -> None:
    fault = DiskError(_k(cluster), 2, error="corrupt", log=FaultLog())
    with fault:
        cluster.container(2).did(reads=9, corrupt_reads=9)
    assert fault.record is not None
    assert fault.record.effect is not None
    assert fault.record.effect.observed
    assert "9 reads corrupted" in fault.record.effect.evidence
    assert not fault.restarted
    with pytest.raises(FaultError, match="unwritable, unreadable, corrupt"):
        DiskError(_k(cluster), 2, error="melted")


def test_a_broker_without_the_layer_is_refused_with_the_fix() -> None:
    cluster = FakeCluster(layer=False)
    fault = DiskError(_k(cluster), 1, log=FaultLog())
    with pytest.raises(FaultUnsupported, match=r"(?s)no disk layer.*disk_layer=True"):
        fault.inject()
    assert fault.record is not None
    assert fault.record.healed_at is not None  # a refused inject is healed (nothing was set)


# ---- power loss -------------------------------------------------------------------------------------


def test_a_power_loss_of_every_replica_drops_first_kills_after_and_starts_them_together(
    cluster: FakeCluster,
) -> None:
    log = FaultLog()
    fault = PowerLoss(_k(cluster), LeaderOf("t", 0), every_replica=True, log=log)
    fault.inject()
    assert fault.brokers == (1, 2, 3)
    for node_id in (1, 2, 3):
        broker = cluster.container(node_id)
        assert [r["op"] for r in broker.requests] == ["powerloss"]
        assert broker.status == "exited"
    assert fault.dropped[2] == Dropped(3, 20_004_096, 4096, {"t-0/00000000000000000000.log": 4096})
    assert fault.dropped_from("t", 0) == 3 * 4096
    assert fault.dropped_from("t") == 3 * 4096
    assert fault.dropped_from("t", 1) == 0
    assert fault.dropped_from("u") == 0
    fault.heal()
    fault.heal()
    assert cluster.restarts == [((1, 2, 3), False)]  # one start of all three: a quorum of them
    assert all(cluster.container(b).status == "running" for b in (1, 2, 3))
    (record,) = log.records()
    assert record.effect is not None
    assert record.effect.observed, record.effect.evidence
    assert "12288 bytes written and never fsynced" in record.effect.evidence
    assert record.params == (("every_replica", True),)


def test_a_power_loss_that_failed_half_way_kills_the_frozen_broker_and_starts_it(
    cluster: FakeCluster,
) -> None:
    cluster.container(3).refuse_powerloss = True
    fault = PowerLoss(_k(cluster), LeaderOf("t", 0), every_replica=True, log=FaultLog())
    with pytest.raises(FaultError, match="refused"):
        fault.inject()
    # brokers 1 and 2 lost power but were not killed: their layers fail every call; heal kills them
    assert cluster.container(1).kills == 1
    assert cluster.container(2).kills == 1
    assert cluster.container(3).kills == 0
    assert cluster.restarts == [((1, 2), False)]
    assert fault.record is not None
    assert fault.record.healed_at is not None
    assert fault.record.error is not None


def test_a_power_loss_heals_after_its_brokers_were_started_again(cluster: FakeCluster) -> None:
    fault = PowerLoss(_k(cluster), 2, log=FaultLog())
    fault.inject()
    assert fault.brokers == (2,)
    cluster.container(2).start()  # an operator started it first
    fault.heal()
    assert cluster.restarts == []
    assert fault.record is not None
    assert fault.record.effect is not None
    assert fault.record.effect.observed


def test_every_replica_needs_a_partition_target(cluster: FakeCluster) -> None:
    with pytest.raises(FaultError, match="LeaderOf or FollowerOf"):
        PowerLoss(_k(cluster), 1, every_replica=True)


def test_layer_stats_read_the_layers_counts(cluster: FakeCluster) -> None:
    cluster.container(1).did(writes=3, write_bytes=100, fsyncs=1)
    assert layer_stats(_k(cluster), 1) == LayerStats(writes=3, write_bytes=100, fsyncs=1)
    cluster.container(1).kill()
    with pytest.raises(FaultError, match="is exited"):
        layer_stats(_k(cluster), 1)


# ---- the cluster it needs, the plans that draw it ---------------------------------------------------


def test_the_layer_needs_a_log_directory_of_its_own_and_the_kinds_ask_for_both() -> None:
    with pytest.raises(ConfigError, match="disk_layer=True needs a log directory"):
        ClusterConfig(disk_layer=True)
    with pytest.raises(ConfigError, match="disk_layer=True needs a log directory"):
        ClusterNeeds(disk_layer=True)
    needs = ClusterNeeds(log_dir_mb=1024, disk_layer=True)
    assert needs.met_by(ClusterConfig(log_dir_mb=1024, disk_layer=True))
    assert not needs.met_by(ClusterConfig(log_dir_mb=1024))
    assert needs.applied_to(ClusterConfig()).disk_layer
    assert "the fault layer under them" in needs.describe()
    for kind in LAYER_KINDS:
        assert needs_of([kind]) == ClusterNeeds(log_dir_mb=DISK_LOG_DIR_MB, disk_layer=True)


@pytest.mark.parametrize(
    ("step", "kind"),
    [
        (FaultStep(1.0, 5.0, "slow_disk", 2, (("fsync_ms", 300.0), ("write_ms", 40.0))), SlowDisk),
        (FaultStep(1.0, 5.0, "disk_error", 2, (("error", "unreadable"),)), DiskError),
        (FaultStep(1.0, 5.0, "power_loss", 2), PowerLoss),
    ],
)  # fmt: skip
def test_plan_steps_build_the_layer_faults(cluster: FakeCluster, step: FaultStep, kind: type) -> None:
    fault = build_fault(_k(cluster), step, FaultLog())
    assert isinstance(fault, kind)
    assert fault.kind == step.kind


def test_random_plans_draw_the_layer_kinds_with_parameters_they_take(cluster: FakeCluster) -> None:
    plan = generate_plan(11, duration_s=900, kinds=ALL_KINDS, topic="t", concurrency=2)
    steps = [s for s in plan.steps if s.kind in LAYER_KINDS]
    assert {s.kind for s in steps} == set(LAYER_KINDS)
    for step in steps:
        build_fault(_k(cluster), step, FaultLog())  # each step's parameters are the fault's own
        if step.kind == "disk_error":
            assert dict(step.params)["error"] in ("unwritable", "unreadable")
        if step.kind == "power_loss":
            assert not isinstance(step.target, LeaderOf) or dict(step.params) == {}
