"""Clock and disk faults without Docker: what they write where, their proof of landing, honest heals.

A fake broker container answers the few commands the faults run in it (its JVM's preload settings, the
clock file written, a probe of the clock) and logs lines whose log4j stamps carry the offset the fake JVM
read; a fake keeper holds each broker's log directory as a size and a ballast.
"""

from __future__ import annotations

import io
import re
import tarfile
import threading
import time
from datetime import UTC, datetime
from typing import Any

import docker.errors
import pytest

from chaos.cluster.config import ClusterNeeds
from chaos.errors import ClusterError, FaultError, FaultUnsupported, PlanError
from chaos.faults.base import Effect, Fault, FaultLog, FaultRecord
from chaos.faults.clock import CLOCK_FILE, ClockDrift, ClockJump, log_skews, offset_spec
from chaos.faults.disk import BALLAST, DiskFull
from chaos.faults.heal import heal_all
from chaos.faults.plan import (
    ALL_KINDS,
    DISK_LOG_DIR_MB,
    KINDS,
    OPT_IN_KINDS,
    FaultStep,
    Plan,
    build_fault,
    generate_plan,
    needs_of,
    parse_kinds,
)
from chaos.run.events import PartitionState
from tests.unit.faults.fake_broker import FakeBroker

PRELOAD = {
    "LD_PRELOAD": "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
    "FAKETIME_TIMESTAMP_FILE": CLOCK_FILE,
    "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    "NO_FAKE_STAT": "1",
}


def _stamp(epoch: float) -> str:
    moment = datetime.fromtimestamp(epoch, UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S,") + f"{int(epoch * 1000) % 1000:03d}"


def _docker_stamp(epoch: float) -> str:
    return (
        datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(epoch * 1e9) % 10**9:09d}Z"
    )


class FakeBrokerContainer:
    """A broker's container: its status, its clock file, its JVM (which follows the file) and its log."""

    def __init__(self, node_id: int, preload: dict[str, str] | None = None) -> None:
        self.name = f"chaos-cfake-kafka-{node_id}"
        self.status = "running"
        self.removed = False
        self.preload = PRELOAD if preload is None else preload
        self.files: dict[str, str] = {}
        self.writes: list[str] = []
        self.jvm_follows = True
        self.lines: list[tuple[float, str]] = []  # (received, text)
        self.started_at = "2026-01-01T00:00:00.000000000Z"

    @property
    def attrs(self) -> dict[str, Any]:
        return {"State": {"StartedAt": self.started_at}}

    def reload(self) -> None:
        if self.removed:
            raise docker.errors.NotFound(f"No such container: {self.name}")

    def offset(self) -> float:
        return float(self.files.get(CLOCK_FILE, "+0").strip() or 0)

    def log(self, text: str, at: float | None = None) -> None:
        """The JVM logs ``text`` now: its stamp carries the offset it read, Docker's the real time."""
        received = time.time() if at is None else at
        skew = self.offset() if self.jvm_follows else 0.0
        self.lines.append((received, f"[{_stamp(received + skew)}] INFO {text} (kafka.Fake)"))

    def logs(self, timestamps: bool = False, since: float | None = None, until: float | None = None) -> bytes:
        out = []
        for received, text in self.lines:
            if (since is not None and received < since) or (until is not None and received > until):
                continue
            out.append(f"{_docker_stamp(received)} {text}" if timestamps else text)
        return ("\n".join(out) + "\n").encode()

    def exec_run(self, cmd: list[str]) -> tuple[int, bytes]:
        if self.removed or self.status != "running":
            raise docker.errors.APIError(f"container {self.name} is not running")
        script = cmd[2]
        if "/proc/1/environ" in script:
            environ = "".join(f"{k}={v}\n" for k, v in self.preload.items()) + "PATH=/usr/bin\n"
            maps = "7" if "faketime" in self.preload.get("LD_PRELOAD", "") else "0"
            return 0, f"{environ}MAPS\n{maps}\n".encode()
        written = re.match(r"printf '%s\\n' (\S+) > (\S+) && mv -f \S+ (\S+)$", script)
        if written:
            spec, path = written.group(1).strip("'"), written.group(3).strip("'")
            self.files[path] = spec
            self.writes.append(spec)
            return 0, b""
        if "date +%s.%N" in script:
            return 0, f"{time.time() + self.offset():.9f}\n".encode()
        raise AssertionError(f"the fake broker does not know {script!r}")

    def put_archive(self, path: str, data: bytes) -> bool:
        if self.removed:
            raise docker.errors.NotFound(f"No such container: {self.name}")
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for member in tar.getmembers():
                handle = tar.extractfile(member)
                assert handle is not None
                spec = handle.read().decode().strip()
                self.files[f"{path.rstrip('/')}/{member.name}"] = spec
                self.writes.append(spec)
        return True


class FakeKeeper:
    """The keeper: each broker's log directory as (size, used) in kB, a ballast file or none."""

    name = "chaos-cfake-logdirs"

    def __init__(self, brokers: int, size_kb: int = 1024 * 1024, used_kb: int = 3000) -> None:
        self.size_kb = size_kb
        self.used = dict.fromkeys(range(1, brokers + 1), used_kb)
        self.ballast: dict[int, int] = {}
        self.fills_short = False  # the filesystem leaves room (a fill that failed)
        self.rm_fails = 0

    def exec_run(self, cmd: list[str]) -> tuple[int, bytes]:
        script = cmd[2]
        broker = int(re.search(r"/logdirs/(\d+)", script).group(1))  # type: ignore[union-attr]
        if "fallocate" in script:
            free = self.size_kb - self.used[broker] - self.ballast.get(broker, 0)
            self.ballast[broker] = self.ballast.get(broker, 0) + (free - 500 if self.fills_short else free)
            left = self.size_kb - self.used[broker] - self.ballast[broker]
            return 0, f"{left}\n".encode()
        if script.startswith("du -k"):
            return 0, f"{self.ballast.get(broker, 0)}\n".encode()
        if script.startswith("rm -f"):
            if self.rm_fails:
                self.rm_fails -= 1
                return 1, b"rm: cannot remove: Device or resource busy\n"
            self.ballast.pop(broker, None)
            return 0, b""
        raise AssertionError(f"the fake keeper does not know {script!r}")


class FakeCluster:
    def __init__(
        self, brokers: int = 3, *, keeper: bool = True, preload: dict[str, str] | None = None
    ) -> None:
        self.run_id = "cfake"
        self.brokers = tuple(FakeBroker(i, FakeBrokerContainer(i, preload)) for i in range(1, brokers + 1))
        self.keeper = FakeKeeper(brokers) if keeper else None
        self.leaders = {("t", 0): 1, ("t", 1): 2, ("t", 2): 1}
        self.restarts: list[tuple[int, bool]] = []

    def broker(self, node_id: int) -> FakeBroker[FakeBrokerContainer]:
        return self.brokers[node_id - 1]

    def container(self, node_id: int) -> FakeBrokerContainer:
        return self.brokers[node_id - 1].docker

    def log_dir_keeper(self) -> tuple[FakeKeeper, str]:
        if self.keeper is None:
            raise ClusterError("cluster cfake has no log directories of its own (ClusterConfig.log_dir_mb=0)")
        return self.keeper, "/logdirs"

    def describe_partitions(self, topics: list[str] | None = None, via: int | None = None) -> list[Any]:
        return [
            PartitionState(topic=t, partition=p, leader=leader, isr=(1, 2, 3), replicas=(1, 2, 3))
            for (t, p), leader in self.leaders.items()
        ]

    def restart_broker(
        self, node_id: int, timeout_s: float = 90.0, *, wait: bool = True, fresh: bool = False
    ) -> float:
        container = self.container(node_id)
        if self.keeper is not None and self.keeper.ballast.get(node_id):
            container.status = "exited"  # a full directory: it dies again at start
            raise FaultError(f"broker {node_id} did not start: its log directory is full")
        container.status = "running"
        self.restarts.append((node_id, fresh))
        return 0.0

    # heal_all's other duties, none of them at stake here
    class _Toxiproxy:
        def reset(self) -> None:
            pass

    toxiproxy = _Toxiproxy()


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    monkeypatch.setattr("chaos.faults.heal.remove_all_sidecars", lambda cluster: [])
    monkeypatch.setattr("chaos.faults.heal.forget_proxy_faults", lambda cluster, note: [])
    return FakeCluster()


def _k(cluster: FakeCluster) -> Any:
    return cluster


def _events(log: FaultLog) -> list[tuple[str, FaultRecord]]:
    events: list[tuple[str, FaultRecord]] = []
    log.subscribe(lambda action, record: events.append((action, record)))
    return events


def _effect(fault: Fault) -> Effect:
    """The fault's proof of landing, as its record carries it."""
    assert fault.record is not None
    assert fault.record.effect is not None, fault.record.notes
    return fault.record.effect


def _backdate(fault: Any, seconds: float) -> None:
    """Pretend the fault was set ``seconds`` ago, so its window has lines past the settling time."""
    fault.set_at -= seconds


# ---- clock ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("seconds", "spec"), [(120, "+120"), (-30.5, "-30.5"), (0, "+0"), (0.25, "+0.25")])
def test_an_offset_is_spelled_as_libfaketime_reads_it(seconds: float, spec: str) -> None:
    assert offset_spec(seconds) == spec


def test_a_jump_writes_its_offset_records_inject_and_heal_and_lands(cluster: FakeCluster) -> None:
    log = FaultLog()
    events = _events(log)
    jump = ClockJump(_k(cluster), 2, by=120, log=log)
    jump.inject()
    broker = cluster.container(2)
    assert broker.files[CLOCK_FILE] == "+120"
    _backdate(jump, 5)
    broker.log("Rolled new log segment", at=time.time() - 2)
    broker.log("Deleted log segment")
    jump.heal()

    assert broker.files[CLOCK_FILE] == "+0"
    assert [a for a, _ in events] == ["inject", "heal"]
    record = log.records()[0]
    assert (record.kind, record.brokers, dict(record.params)) == ("clock_jump", (2,), {"by": 120})
    assert record.effect is not None
    assert record.effect.observed, record.effect
    assert "+120.000 s" in record.effect.evidence


def test_log_skews_read_the_jvms_stamp_against_dockers(cluster: FakeCluster) -> None:
    broker = cluster.container(1)
    broker.files[CLOCK_FILE] = "-45"
    broker.log("x", at=1_800_000_000.25)
    (skew,) = log_skews(_k(cluster), 1, since=0)
    assert skew.received == pytest.approx(1_800_000_000.25, abs=1e-6)
    assert skew.ahead_s == pytest.approx(-45.0, abs=0.002)


def test_a_jump_the_jvm_did_not_follow_did_not_land(cluster: FakeCluster) -> None:
    broker = cluster.container(1)
    broker.jvm_follows = False
    jump = ClockJump(_k(cluster), 1, by=-60, log=FaultLog())
    jump.inject()
    _backdate(jump, 5)
    broker.log("still the real time")
    jump.heal()
    assert _effect(jump).observed is False
    assert "did not follow" in _effect(jump).evidence


def test_a_quiet_broker_is_probed_under_its_own_preload(cluster: FakeCluster) -> None:
    jump = ClockJump(_k(cluster), 3, by=300, log=FaultLog())
    jump.inject()
    jump.heal()  # nothing logged in the window
    effect = _effect(jump)
    assert effect is not None
    assert effect.observed, effect
    assert "logged nothing" in effect.evidence


def test_a_broker_without_libfaketime_is_refused_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = FakeCluster(preload={"PATH": "/usr/bin"})
    log = FaultLog()
    with pytest.raises(FaultUnsupported, match="CHAOS_IMAGES=local") as raised:
        ClockJump(_k(cluster), 1, by=60, log=log).inject()
    assert isinstance(raised.value, ClusterError)
    assert isinstance(raised.value, FaultError)
    record = log.records()[0]
    assert record.inject_failed
    assert record.healed_at is not None
    assert CLOCK_FILE not in cluster.container(1).files


def test_a_jump_heals_into_a_stopped_broker_and_twice_is_once(cluster: FakeCluster) -> None:
    log = FaultLog()
    events = _events(log)
    jump = ClockJump(_k(cluster), 1, by=90, log=log)
    jump.inject()
    broker = cluster.container(1)
    broker.status = "exited"  # crashed meanwhile: no exec, the file is written into its layer
    jump.heal()
    jump.heal()
    assert broker.files[CLOCK_FILE] == "+0"
    assert broker.writes == ["+90", "+0"]
    assert [a for a, _ in events] == ["inject", "heal"]
    assert jump.record is not None
    assert jump.record.effect is None  # stopped: neither its log nor a probe can say


def test_a_jump_heals_after_its_broker_was_restarted(cluster: FakeCluster) -> None:
    jump = ClockJump(_k(cluster), 2, by=-20, log=FaultLog())
    jump.inject()
    broker = cluster.container(2)
    broker.status = "exited"
    cluster.restart_broker(2)  # a crash and its heal during the jump: the file survived in the layer
    assert broker.files[CLOCK_FILE] == "-20"
    jump.heal()
    assert broker.files[CLOCK_FILE] == "+0"
    assert not jump.active


def test_a_failed_heal_is_recorded_and_retried_by_heal_all(cluster: FakeCluster) -> None:
    log = FaultLog()
    jump = ClockJump(_k(cluster), 1, by=60, log=log)
    jump.inject()
    broker = cluster.container(1)
    broker.removed = True  # the engine lost it for a moment
    original = broker.put_archive
    calls = {"n": 0}

    def flaky(path: str, data: bytes) -> bool:
        calls["n"] += 1
        if calls["n"] == 1:
            raise docker.errors.APIError("engine busy")
        return original(path, data)

    broker.removed = False
    broker.status = "exited"
    broker.put_archive = flaky  # type: ignore[method-assign]
    with pytest.raises(FaultError):
        jump.heal()
    assert jump.active
    assert "heal failed" in (log.records()[0].error or "")
    heal_all(_k(cluster), log)
    assert not jump.active
    assert broker.files[CLOCK_FILE] == "+0"
    assert log.records()[0].heal_attempts == 2


def test_a_drift_rewrites_a_growing_offset_and_heals_to_the_real_time(cluster: FakeCluster) -> None:
    drift = ClockDrift(_k(cluster), 1, rate=3.0, step_s=0.02, log=FaultLog())
    drift.inject()
    broker = cluster.container(1)
    time.sleep(0.3)
    offsets = [float(w) for w in broker.writes]
    assert offsets[0] == 0
    assert offsets[-1] > 0.3
    assert offsets == sorted(offsets)
    _backdate(drift, 5)  # the fault's expectation: (3 - 1) * 5 s = 10 s now
    broker.files[CLOCK_FILE] = offset_spec(drift.offset_at(time.time()))
    broker.log("a line while it drifts")
    drift.heal()
    assert broker.files[CLOCK_FILE] == "+0"
    assert not any(t.name.startswith("chaos-clock-drift") for t in threading.enumerate())
    effect = _effect(drift)
    assert effect is not None
    assert effect.observed, effect
    assert drift.record is not None
    assert dict(drift.record.params) == {"rate": 3.0}


@pytest.mark.parametrize("rate", [1.0, 0.0, -2.0])
def test_a_drift_that_changes_nothing_is_refused(cluster: FakeCluster, rate: float) -> None:
    with pytest.raises(FaultError, match="rate"):
        ClockDrift(_k(cluster), 1, rate=rate)


# ---- disk -------------------------------------------------------------------------------------------


def test_disk_full_fills_the_directory_and_lands_on_the_storage_error(cluster: FakeCluster) -> None:
    log = FaultLog()
    events = _events(log)
    full = DiskFull(_k(cluster), 1, log=log)
    full.inject()
    keeper = cluster.keeper
    assert keeper is not None
    assert keeper.ballast[1] == keeper.size_kb - 3000
    assert full.led == [("t", 0), ("t", 2)]
    broker = cluster.container(1)
    broker.log(f"Stopping serving logs in dir /var/lib/kafka/data ({BALLAST} filled it)")
    broker.status = "exited"  # the metadata log's directory failed: it shut itself down
    cluster.leaders = {("t", 0): 2, ("t", 1): 2, ("t", 2): 3}
    full.heal()

    assert 1 not in keeper.ballast
    assert cluster.restarts == [(1, False)]
    assert broker.status == "running"
    assert [a for a, _ in events] == ["inject", "heal"]
    effect = log.records()[0].effect
    assert effect is not None
    assert effect.observed, effect
    assert "leadership of 2 of the 2 partitions it led moved" in effect.evidence


def test_disk_full_that_no_write_met_did_not_land(cluster: FakeCluster) -> None:
    full = DiskFull(_k(cluster), 2, log=FaultLog())
    full.inject()
    full.heal()
    assert _effect(full).observed is False
    assert cluster.restarts == []  # still running, never offline: nothing to restart


def test_a_running_broker_that_took_its_directory_offline_is_restarted_afresh(cluster: FakeCluster) -> None:
    full = DiskFull(_k(cluster), 2, log=FaultLog())
    full.inject()
    cluster.container(2).log("Stopping serving logs in dir /var/lib/kafka/data")
    full.heal()
    assert cluster.restarts == [(2, True)]


def test_disk_full_heals_after_its_broker_was_restarted_and_twice_is_once(cluster: FakeCluster) -> None:
    log = FaultLog()
    events = _events(log)
    full = DiskFull(_k(cluster), 3, log=log)
    full.inject()
    broker = cluster.container(3)
    broker.status = "exited"
    with pytest.raises(FaultError):  # someone restarted it while the ballast held: it died again
        cluster.restart_broker(3)
    full.heal()
    full.heal()
    assert broker.status == "running"
    assert cluster.restarts == [(3, False)]
    assert [a for a, _ in events] == ["inject", "heal"]


def test_a_ballast_that_could_not_be_removed_is_a_failed_heal_retried(cluster: FakeCluster) -> None:
    log = FaultLog()
    full = DiskFull(_k(cluster), 1, log=log)
    full.inject()
    assert cluster.keeper is not None
    cluster.keeper.rm_fails = 1
    with pytest.raises(FaultError, match="could not remove the ballast"):
        full.heal()
    assert full.active
    assert log.records()[0].healed_at is None
    heal_all(_k(cluster), log)
    assert not full.active
    assert 1 not in cluster.keeper.ballast


def test_a_fill_that_leaves_room_fails_the_inject_and_removes_the_ballast(cluster: FakeCluster) -> None:
    assert cluster.keeper is not None
    cluster.keeper.fills_short = True
    log = FaultLog()
    with pytest.raises(FaultError, match="kB free after the fill"):
        DiskFull(_k(cluster), 1, log=log).inject()
    assert 1 not in cluster.keeper.ballast
    assert log.records()[0].inject_failed


def test_a_cluster_without_its_own_log_directories_refuses_disk_faults() -> None:
    cluster = FakeCluster(keeper=False)
    with pytest.raises(FaultUnsupported, match="log_dir_mb"):
        DiskFull(_k(cluster), 1, log=FaultLog()).inject()


# ---- plans ------------------------------------------------------------------------------------------


def test_the_new_kinds_are_opt_in_and_leave_default_plans_as_they_were() -> None:
    assert not set(OPT_IN_KINDS) & set(KINDS)
    assert (
        generate_plan(2086958710, duration_s=60).to_json()
        == generate_plan(2086958710, duration_s=60, kinds=KINDS).to_json()
    )
    plan = generate_plan(7, duration_s=600, kinds=ALL_KINDS, topic="t", concurrency=2)
    drawn = {s.kind for s in plan.steps}
    assert set(OPT_IN_KINDS) <= drawn, drawn
    for step in plan.steps:
        if step.kind in ("clock_jump", "clock_drift"):
            assert step.duration_s >= 4.0
        if step.kind == "clock_jump":
            assert abs(dict(step.params)["by"]) >= 5  # type: ignore[arg-type]
        if step.kind == "clock_drift":
            assert dict(step.params)["rate"] != 1.0
    assert Plan.from_json(plan.to_json()) == plan


@pytest.mark.parametrize(
    ("step", "kind"),
    [
        (FaultStep(1.0, 5.0, "clock_jump", 2, (("by", -30),)), ClockJump),
        (FaultStep(1.0, 5.0, "clock_drift", 2, (("rate", 2.5),)), ClockDrift),
        (FaultStep(1.0, 5.0, "disk_full", 2), DiskFull),
    ],
)
def test_plan_steps_build_the_new_faults(cluster: FakeCluster, step: FaultStep, kind: type) -> None:
    fault = build_fault(_k(cluster), step, FaultLog())
    assert isinstance(fault, kind)
    assert fault.kind == step.kind


def test_kinds_are_named_as_a_user_names_them_and_say_what_the_cluster_needs() -> None:
    assert parse_kinds("default") == parse_kinds("") == KINDS
    assert parse_kinds("ALL") == ALL_KINDS
    assert parse_kinds(" crash, disk_full,crash ") == ("crash", "disk_full")
    with pytest.raises(PlanError, match="meteor not known; name 'default', 'all' or kinds among crash"):
        parse_kinds("crash,meteor")
    with pytest.raises(PlanError, match="none named"):
        parse_kinds(",")
    assert needs_of(KINDS) == ClusterNeeds()
    assert needs_of(ALL_KINDS) == ClusterNeeds(fake_clock=True, log_dir_mb=DISK_LOG_DIR_MB, disk_layer=True)
    assert needs_of(["clock_jump"]) == ClusterNeeds(fake_clock=True)
    assert needs_of(["disk_full", "crash"]) == ClusterNeeds(log_dir_mb=DISK_LOG_DIR_MB)
