"""The scenario runner without Docker: scenario.json at start and end, fault records bridged into the
history as FaultEvents, a run that fails inside its block still leaves a closed history and the error, the
run's context, and a seeded plan run by the run's nemesis."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

import chaos.faults.nemesis
from chaos import versions
from chaos.cluster.cluster import KafkaCluster
from chaos.cluster.images.catalog import ImageSet
from chaos.errors import ConfigError, FaultError
from chaos.faults.base import Fault, FaultLog, FaultRecord
from chaos.faults.plan import RESOLVED_PLAN_FILE, RUN_GROUP, RUN_TOPIC, FaultStep, Plan, generate_plan
from chaos.history import ClientLog, FaultEvent, read_events
from chaos.run.layout import PLAN_NAME
from chaos.run.manifest import read_scenario
from chaos.scenario import Scenario, ScenarioError, ScenarioRun, Variant, fault_event, views

SCENARIO = Scenario(
    scenario_id="isr_last_replica_down_partition_offline",
    case_id="ISR2",
    title="Lost ISR",
    source="002 › 场景4",
    symptom="Failed to elect leader for partition T-TEST-0",
    module="scenarios/test_isr2_lost_isr.py",
    test="test_isr2",
    variants=(
        Variant("vulnerable", "unclean on", "at_least_once", "fail", topic_config={"min.insync.replicas": 1}),
        Variant("remediated", "unclean off", "at_least_once", "pass"),
    ),
    remediation=("keep unclean.leader.election.enable=false",),
)


class Marker(Fault):
    """A fault that touches nothing: it only records, so the bridge can be tested without a cluster."""

    kind = "marker"

    def resolve_brokers(self) -> tuple[int, ...]:
        return (2,)

    def params(self) -> dict[str, int | str]:  # type: ignore[override]
        return {"latency_ms": 500, "paths": "ext"}

    def _inject(self) -> None:
        pass

    def _heal(self) -> None:
        pass


def cluster(brokers: int = 0) -> KafkaCluster:
    """A cluster object that is never started (no container is created until start()); with ``brokers``,
    stand-ins that only have a node id and a bootstrap address."""
    kafka = KafkaCluster(ImageSet("kafka:x", "toxiproxy:x", "reaper:x", ()))
    stand_ins = (SimpleNamespace(node_id=n, bootstrap=f"127.0.0.1:{9090 + n}") for n in range(1, brokers + 1))
    kafka.brokers = tuple(stand_ins)  # type: ignore[arg-type]
    return kafka


def test_fault_records_become_fault_events() -> None:
    record = FaultRecord(
        3, "network_cut", "leader of t-0", (2,), (("paths", ("ext", "int")),), 1.8e9, 1.8e9 + 5
    )
    inject = fault_event("r1", "inject", record)
    heal = fault_event("r1", "heal", record)
    assert (inject.action, inject.fault, inject.target, inject.ts) == (
        "inject",
        "network_cut",
        "broker-2",
        1.8e9,
    )
    assert json.loads(inject.params) == {"asked": "leader of t-0", "paths": ["ext", "int"], "seq": 3}
    assert (heal.action, heal.ts, heal.error) == ("heal", 1.8e9 + 5, None)
    # a heal after a failed inject (Ctrl-C mid-`docker kill`): the fault was undone, the failure is evidence
    undone = fault_event(
        "r1", "heal", FaultRecord(0, "crash", "broker 1", (1,), (), 1.8e9, 1.8e9, "inject failed: x")
    )
    assert (undone.error, undone.message) == (None, "inject failed: x")
    not_done = fault_event(
        "r1", "heal", FaultRecord(0, "crash", "broker 1", (1,), (), 1.8e9, None, "heal failed: y")
    )
    assert (not_done.error, not_done.message) == ("FaultError", "heal failed: y")


def test_a_run_records_its_faults_and_scenario_json(tmp_path: Path) -> None:
    with ScenarioRun(SCENARIO, "vulnerable", cluster(), tmp_path, seed=11, nodeid="n::t[vulnerable]") as run:
        started = read_scenario(run.dir)
        assert started is not None
        assert (started.scenario_id, started.case_id, started.seed) == (
            "isr_last_replica_down_partition_offline[vulnerable]",
            "ISR2",
            11,
        )
        assert started.ended_ts is None
        assert started.guarantee == "at_least_once"
        assert started.remediation == SCENARIO.remediation
        assert started.kafka_version == versions.KAFKA_VERSION  # the cluster's, for the report and the matrix
        fault = run.fault(Marker, 2)
        fault.inject()
        left_active = run.fault(Marker, 2)
        left_active.inject()  # never healed by the test: the run heals it on exit
        fault.heal()
        assert [e.action for e in views.faults(run.events())] == ["inject", "inject", "heal"]
    events = read_events(run.dir)
    recorded = [e for e in events if isinstance(e, FaultEvent)]
    assert [(e.action, e.fault, e.target) for e in recorded] == [
        ("inject", "marker", "broker-2"),
        ("inject", "marker", "broker-2"),
        ("heal", "marker", "broker-2"),
        ("heal", "marker", "broker-2"),
    ]
    assert [json.loads(e.params)["seq"] for e in recorded] == [0, 1, 0, 1]
    assert views.fault_window(events, fault)[1] is not None
    assert views.fault_window(events, left_active)[1] is not None  # healed by the run on exit
    assert views.fault_event(events, left_active).mono > views.fault_event(events, fault).mono
    ended = read_scenario(run.dir)
    assert ended is not None
    assert ended.ended_ts is not None
    assert (ended.outcome, ended.error) == (None, None)


def test_a_run_that_raises_keeps_its_history_and_the_error(tmp_path: Path) -> None:
    run = ScenarioRun(SCENARIO, SCENARIO.variant("remediated"), cluster(), tmp_path)

    def fail_inside() -> None:
        with run:
            run.note("before the failure")
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        fail_inside()
    info = read_scenario(run.dir)
    assert info is not None
    assert info.outcome == "error"
    assert info.error == "RuntimeError: boom"
    assert (run.dir / "history" / "events.parquet").exists()
    assert [e.message for e in read_events(run.dir)] == ["before the failure"]  # type: ignore[attr-defined]


class Stuck(Marker):
    """A fault whose heal always fails (a cut that cannot be removed)."""

    kind = "stuck"

    def _heal(self) -> None:
        raise RuntimeError("iptables -D failed")


def test_a_fault_still_cut_after_its_retries_makes_the_run_an_error(tmp_path: Path) -> None:
    run = ScenarioRun(SCENARIO, "vulnerable", cluster(), tmp_path)
    with pytest.raises(FaultError, match=r"1 fault\(s\) of run .* still not healed") as raised, run:
        run.fault(Stuck, 2).inject()
    assert "iptables -D failed" in str(raised.value)
    info = read_scenario(run.dir)
    assert info is not None
    assert info.ended_ts is not None
    assert info.outcome == "error"
    assert info.error is not None
    assert "still not healed" in info.error
    (record,) = run.faults.records()
    assert (record.healed_at, record.heal_attempts) == (None, 3)
    assert (run.dir / "history" / "events.parquet").exists()


def test_a_run_must_be_open_and_waits_are_bounded(tmp_path: Path) -> None:
    run = ScenarioRun(SCENARIO, "vulnerable", cluster(), tmp_path)
    with pytest.raises(ScenarioError, match="not open"):
        run.note("x")
    with run:
        with pytest.raises(ScenarioError, match="timeout_s must be in"):
            run.wait_for("forever", lambda ev: False, 10_000)
        with pytest.raises(AssertionError, match="never: not within 0 s"):
            run.wait_for("never", lambda ev: False, 0.3)
        assert run.wait_until("at once", lambda: True, 1) < 1
        run.note("one event")
        waited = run.wait_quiet("notes", lambda e: True, 0.3, 5)
        assert 0.2 <= waited < 2
    with pytest.raises(ScenarioError, match="no variant 'crash'"):
        ScenarioRun(SCENARIO, "crash", cluster(), tmp_path)


def test_leader_timeline_and_fault_window_read_the_history() -> None:
    from chaos.history import ClusterSample, PartitionState

    def sample(mono: float, leader: int | None, error: str | None = None) -> ClusterSample:
        states = (
            ()
            if error
            else (PartitionState(topic="t", partition=0, leader=leader, isr=(1,), replicas=(1, 2)),)
        )
        return ClusterSample(run_id="r", process="sampler", mono=mono, partition_states=states, error=error)

    events = [
        sample(1.0, 1),
        sample(1.5, 1),
        sample(2.0, None, error="_TIMED_OUT"),
        sample(2.5, None),
        sample(3.0, 2),
        FaultEvent(
            run_id="r",
            process="nemesis",
            mono=1.2,
            action="inject",
            fault="crash",
            target="broker-1",
            params='{"seq": 0}',
        ),
        FaultEvent(
            run_id="r",
            process="nemesis",
            mono=2.8,
            action="heal",
            fault="crash",
            target="broker-1",
            params='{"seq": 0}',
        ),
    ]
    spans = views.leader_timeline(events, "t", 0)
    assert [(s.leader, s.first_mono, s.last_mono, s.samples) for s in spans] == [
        (1, 1.0, 1.5, 2),
        (None, 2.5, 2.5, 1),
        (2, 3.0, 3.0, 1),
    ]
    crash = FaultRecord(seq=0, kind="crash", target="leader", brokers=(1,), params=(), injected_at=0.0)
    assert views.fault_window(events, crash) == (1.2, 2.8)
    pause = FaultRecord(seq=0, kind="pause", target="broker-1", brokers=(1,), params=(), injected_at=0.0)
    with pytest.raises(AssertionError, match="no inject event of pause #0 on broker-1"):
        views.fault_window(events, pause)
    assert views.isr_of(events[0], "t", 0) == (1,)  # type: ignore[arg-type]
    assert views.isr_of(events[0], "t", 1) is None  # type: ignore[arg-type]


def test_converged_needs_every_broker_to_name_the_same_leaders(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from chaos.run.events import PartitionState

    views_by_broker: dict[int, list[PartitionState]] = {}

    def describe(topics: list[str] | None = None, via: int | None = None) -> list[PartitionState]:
        if via not in views_by_broker:
            raise OSError(f"broker {via} does not answer")
        return views_by_broker[via]

    def state(leader: int | None, isr: tuple[int, ...] = (1, 2, 3)) -> list[PartitionState]:
        return [PartitionState(topic="t", partition=0, leader=leader, replicas=(1, 2, 3), isr=isr)]

    kafka = cluster()
    kafka.brokers = tuple(SimpleNamespace(node_id=n) for n in (1, 2, 3))  # type: ignore[misc]
    kafka.describe_partitions = describe  # type: ignore[method-assign]
    with ScenarioRun(SCENARIO, "vulnerable", kafka, tmp_path, seed=1, nodeid="n::t[vulnerable]") as run:
        views_by_broker.update({1: state(2), 2: state(2)})
        assert not run.converged()  # broker 3 does not answer
        views_by_broker[3] = state(3, isr=(3,))  # back from a cut, it still calls itself the leader
        assert not run.converged()
        views_by_broker[3] = state(2, isr=(1, 2))
        assert run.converged()
        assert not run.converged(full_isr=True)
        views_by_broker.update({1: state(2), 2: state(2), 3: state(2)})
        assert run.converged(full_isr=True)
        views_by_broker.update({1: state(None), 2: state(None), 3: state(None)})
        assert not run.converged()  # offline: no leader


def test_the_run_hands_its_workers_one_context(tmp_path: Path) -> None:
    with ScenarioRun(SCENARIO, "vulnerable", cluster(3), tmp_path, seed=5, profile="faithful") as run:
        context = run.context
        assert run.context is context
        assert (context.run_id, context.topic, context.group, context.run_dir, context.seed) == (
            run.run_id,
            run.topic,
            run.group,
            run.dir,
            5,
        )
        assert context.bootstrap_servers == "127.0.0.1:9091,127.0.0.1:9092,127.0.0.1:9093"
        assert context.client is run.client
        assert context.client.guarantee == "at_least_once"
        assert context.time is run.time
        assert context.time.name == "faithful"
        context.sink(ClientLog(run_id=run.run_id, process="worker", level="info", message="via the context"))
        assert [e.message for e in run.events()] == ["via the context"]  # type: ignore[attr-defined]
    unstarted = ScenarioRun(SCENARIO, "vulnerable", cluster(), tmp_path)
    with pytest.raises(ConfigError, match="bootstrap_servers"):
        _ = unstarted.context


def test_the_run_runs_a_seeded_plan_into_its_history_and_heals_at_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    healed_all: list[tuple[KafkaCluster, FaultLog | None]] = []

    def heal_all(kafka: KafkaCluster, log: FaultLog | None = None, interrupted: bool = False) -> list[str]:
        healed_all.append((kafka, log))
        return []

    # Every step becomes a Marker (touches nothing); the cluster-wide heal is recorded, not run.
    monkeypatch.setattr(
        chaos.faults.nemesis, "build_fault", lambda kafka, step, log: Marker(kafka, 2, log=log)
    )
    monkeypatch.setattr(chaos.faults.nemesis, "heal_all", heal_all)
    plan = Plan(7, 3, (FaultStep(0.0, 0.2, "crash", 1), FaultStep(0.3, 60.0, "pause", 2)))
    kafka = cluster(3)
    with ScenarioRun(SCENARIO, "vulnerable", kafka, tmp_path, seed=7) as run:
        drawn = generate_plan(7, brokers=3, topic=RUN_TOPIC, group=RUN_GROUP, duration_s=30.0)
        assert run.plan(duration_s=30.0) == drawn  # the run's names bound only when its nemesis starts
        nemesis = run.nemesis(plan)
        run.wait_for(
            "the second step injected",
            lambda ev: [e.action for e in views.faults(ev)] == ["inject", "heal", "inject"],
            10,
        )
        with pytest.raises(ScenarioError, match="already running"):
            run.nemesis(plan)
        assert nemesis.running
    assert not nemesis.running
    assert nemesis.errors == []
    assert healed_all == [(kafka, run.faults)]
    assert run.faults.active() == []
    recorded = [e for e in read_events(run.dir) if isinstance(e, FaultEvent)]
    assert [(e.action, e.process) for e in recorded] == [
        ("inject", "nemesis"),
        ("heal", "nemesis"),
        ("inject", "nemesis"),
        ("heal", "nemesis"),  # the step still running when the run ended
    ]
    info = read_scenario(run.dir)
    assert info is not None
    assert info.plan is not None
    assert Plan.from_json(json.dumps(dict(info.plan))) == plan
    assert (run.dir / PLAN_NAME).read_text() == plan.to_json()
    # what ran, aimed at the brokers it hit (each Marker resolves to broker 2): what `chaos replay` runs
    resolved = Plan.read(run.dir / RESOLVED_PLAN_FILE)
    assert [(s.kind, s.target) for s in resolved.steps] == [("crash", 2), ("pause", 2)]


def test_a_plan_needs_a_seed_and_fits_the_cluster(tmp_path: Path) -> None:
    with ScenarioRun(SCENARIO, "vulnerable", cluster(3), tmp_path) as run:
        with pytest.raises(ScenarioError, match="no seed"):
            run.plan()
        with pytest.raises(ScenarioError, match="for 5 brokers"):
            run.nemesis(Plan(1, 5, ()))


def test_a_run_keeps_only_its_own_window_of_the_broker_logs(tmp_path: Path) -> None:
    """The session's cluster is shared: a run captures the broker logs from its start (less a margin), so
    its evidence never comes from a line an earlier run caused."""
    kafka = cluster()
    asked: list[tuple[Path, float | None]] = []

    def capture(directory: Path, since: float | None = None) -> list[Path]:
        asked.append((directory, since))
        return []

    kafka.capture_logs = capture  # type: ignore[method-assign]
    with ScenarioRun(SCENARIO, "vulnerable", kafka, tmp_path) as run:
        pass
    info = read_scenario(run.dir)
    assert info is not None
    assert info.started_ts is not None
    ((directory, since),) = asked
    assert directory == run.dir / "logs"
    assert since == pytest.approx(info.started_ts - 10.0)
