"""What a sweep removes: runs whose reaper is gone by default, one run with ``run_id``, every run with
``everything``; ``chaos clean`` on top; the session's leak check only its own runs. A fake Docker client
holds the containers and networks (real containers are the reliability suite's)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import docker.errors
import pytest
from click.testing import CliRunner

import chaos.cluster.engine
import chaos.cluster.sweep
import chaos.plugin.lifecycle
from chaos.cli import cli
from chaos.cluster.engine import LABEL
from chaos.cluster.reaper import reaper_name
from chaos.cluster.sweep import LiveRun, sweep


def _matches(labels: dict[str, str], selector: str) -> bool:
    key, _, value = selector.partition("=")
    return key in labels and (not value or labels[key] == value)


@dataclass(eq=False)
class FakeContainer:
    engine: FakeEngine
    name: str
    labels: dict[str, str]
    status: str = "running"

    def unpause(self) -> None:
        self.engine.calls.append(f"unpause {self.name}")
        self.status = "running"

    def remove(self, *, force: bool, v: bool) -> None:
        self.engine.calls.append(f"remove {self.name} force={force} v={v} ({self.status})")
        if self not in self.engine.containers:
            raise docker.errors.NotFound("gone")
        self.engine.containers.remove(self)


@dataclass(eq=False)
class FakeNetwork:
    engine: FakeEngine
    name: str
    attrs: dict[str, Any]

    def remove(self) -> None:
        self.engine.calls.append(f"remove network {self.name}")
        self.engine.networks.remove(self)


@dataclass(eq=False)
class FakeVolume:
    engine: FakeEngine
    name: str
    attrs: dict[str, Any]

    def remove(self, force: bool = False) -> None:
        self.engine.calls.append(f"remove volume {self.name}")
        self.engine.volumes.remove(self)


@dataclass
class FakeEngine:
    """The engine's containers and networks in memory; ``on_first_list`` runs after the first listing."""

    containers: list[FakeContainer] = field(default_factory=list)
    networks: list[FakeNetwork] = field(default_factory=list)
    volumes: list[FakeVolume] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    on_first_list: Callable[[], None] | None = None

    def run(self, run_id: str, *, reaper: str | None = "running", broker: str = "running") -> None:
        """A run's resources: its reaper in state ``reaper`` (None: gone), a broker, a network."""
        if reaper is not None:
            self.container(reaper_name(run_id), {LABEL: run_id}, reaper)
        self.container(f"chaos-{run_id}-kafka-1", {LABEL: run_id}, broker)
        self.networks.append(FakeNetwork(self, f"chaos-{run_id}", {"Labels": {LABEL: run_id}}))

    def container(self, name: str, labels: dict[str, str], status: str = "running") -> None:
        self.containers.append(FakeContainer(self, name, labels, status))

    def names(self) -> set[str]:
        return {c.name for c in self.containers} | {n.name for n in self.networks}

    def listed(self, listing: list[Any]) -> list[Any]:
        if self.on_first_list is not None:
            hook, self.on_first_list = self.on_first_list, None
            hook()
        return listing


class FakeClient:
    """The two calls of ``docker.DockerClient`` a sweep makes."""

    def __init__(self, engine: FakeEngine) -> None:
        self.engine = engine
        self.containers = self
        self.networks = _Networks(engine)
        self.volumes = _Volumes(engine)

    def list(
        self, *, all: bool = False, filters: dict[str, str], ignore_removed: bool = False
    ) -> list[FakeContainer]:
        assert all, "stopped containers must be listed too"
        assert ignore_removed, "a container removed while it is listed must not fail the sweep"
        return self.engine.listed([c for c in self.engine.containers if _matches(c.labels, filters["label"])])


@dataclass
class _Networks:
    engine: FakeEngine

    def list(self, *, filters: dict[str, str]) -> list[FakeNetwork]:
        return self.engine.listed(
            [n for n in self.engine.networks if _matches(n.attrs["Labels"], filters["label"])]
        )


@dataclass
class _Volumes:
    engine: FakeEngine

    def list(self, *, filters: dict[str, list[str]]) -> list[FakeVolume]:
        return [
            v for v in self.engine.volumes if all(_matches(v.attrs["Labels"], f) for f in filters["label"])
        ]


def _engine() -> FakeEngine:
    engine = FakeEngine()
    engine.run("live")  # a session is using it
    engine.run("dead", reaper=None, broker="paused")  # killed: its reaper did its delay and went
    engine.run("exited", reaper="exited")  # its reaper stopped and was not removed
    engine.run("starting", reaper="created")  # its reaper is being started this instant
    engine.container("chaos-dead-sidecar", {LABEL: "dead", f"{LABEL}.role": "net-sidecar"})
    engine.container("someone-elses", {"app": "db"})  # not the harness's
    return engine


LIVE = {"chaos-live-reaper", "chaos-live-kafka-1", "chaos-live"}
STARTING = {"chaos-starting-reaper", "chaos-starting-kafka-1", "chaos-starting"}


def test_a_plain_sweep_removes_only_runs_whose_reaper_is_gone() -> None:
    engine = _engine()
    result = sweep(client=FakeClient(engine))

    assert sorted(result.containers) == [
        "chaos-dead-kafka-1",
        "chaos-dead-sidecar",
        "chaos-exited-kafka-1",
        "chaos-exited-reaper",
    ]
    assert sorted(result.networks) == ["chaos-dead", "chaos-exited"]
    assert result.live_runs == (LiveRun("live", 2, 1), LiveRun("starting", 2, 1))
    assert engine.names() == LIVE | STARTING | {"someone-elses"}
    # a paused container is unpaused first; containers go with their anonymous volumes
    assert engine.calls.index("unpause chaos-dead-kafka-1") < engine.calls.index(
        "remove chaos-dead-kafka-1 force=True v=True (running)"
    )


def test_a_run_starting_during_the_sweep_is_left_alone() -> None:
    """Its reaper and network appear after the first listing: neither may be taken for a dead run's."""
    engine = _engine()
    engine.on_first_list = lambda: engine.run("late")
    result = sweep(client=FakeClient(engine))
    assert {"chaos-late-reaper", "chaos-late-kafka-1", "chaos-late"} <= engine.names()
    assert "late" in {run.run_id for run in result.live_runs}


def test_a_run_id_removes_that_run_even_while_it_is_live() -> None:
    engine = _engine()
    result = sweep("live", client=FakeClient(engine))
    assert sorted(result.containers) == ["chaos-live-kafka-1", "chaos-live-reaper"]
    assert result.networks == ("chaos-live",)
    assert result.live_runs == ()
    assert not LIVE & engine.names()
    assert {"chaos-dead-kafka-1", "chaos-exited-reaper"} <= engine.names()


def test_everything_removes_every_run_and_nothing_else() -> None:
    engine = _engine()
    result = sweep(everything=True, client=FakeClient(engine))
    assert len(result.containers) == 8
    assert len(result.networks) == 4
    assert result.live_runs == ()
    assert engine.names() == {"someone-elses"}


def test_a_container_gone_meanwhile_is_not_reported() -> None:
    engine = _engine()
    client = FakeClient(engine)
    gone = next(c for c in engine.containers if c.name == "chaos-dead-kafka-1")
    engine.on_first_list = lambda: engine.containers.remove(gone)  # removed by its reaper, say
    result = sweep(client=client)
    assert "chaos-dead-kafka-1" not in result.containers
    assert "chaos-dead-sidecar" in result.containers


def test_run_id_and_everything_are_exclusive() -> None:
    with pytest.raises(ValueError, match="not both"):
        sweep("live", everything=True, client=FakeClient(FakeEngine()))


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> FakeEngine:
    """The fake engine behind ``chaos.cluster.engine.docker_client`` wherever it is imported."""
    engine = _engine()
    client = FakeClient(engine)
    monkeypatch.setattr(chaos.cluster.engine, "docker_client", lambda: client)
    monkeypatch.setattr(chaos.cluster.sweep, "docker_client", lambda: client)
    return engine


def test_chaos_clean_leaves_live_runs_and_says_how_to_remove_them(engine: FakeEngine) -> None:
    result = CliRunner().invoke(cli, ["clean"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "removed 4 containers, 2 networks"
    assert "left 2 live runs alone (their reaper runs: a session is using them):" in lines
    assert "  live: 2 containers, 1 networks" in lines
    assert "  starting: 2 containers, 1 networks" in lines
    assert "`chaos clean --run-id ID` or `--all`" in lines[-1]
    assert engine.names() >= LIVE | STARTING


def test_chaos_clean_run_id_and_all(engine: FakeEngine) -> None:
    named = CliRunner().invoke(cli, ["clean", "--run-id", "live", "--run-id", "dead"])
    assert named.exit_code == 0, named.output
    assert named.output.splitlines()[0] == "removed 4 containers, 2 networks"
    assert "live runs" not in named.output
    assert not (LIVE | {"chaos-dead"}) & engine.names()
    assert engine.names() >= STARTING

    everything = CliRunner().invoke(cli, ["clean", "--all"])
    assert everything.exit_code == 0, everything.output
    assert engine.names() == {"someone-elses"}


def test_chaos_clean_refuses_run_id_with_all(engine: FakeEngine) -> None:
    result = CliRunner().invoke(cli, ["clean", "--run-id", "live", "--all"])
    assert result.exit_code == 2
    assert "give --run-id or --all, not both" in result.output
    assert len(engine.names()) == 13  # nothing removed


def test_the_leak_check_sweeps_only_its_own_runs(engine: FakeEngine) -> None:
    leaked = chaos.plugin.lifecycle.sweep_leaks(["dead"])
    assert leaked == ["chaos-dead", "chaos-dead-kafka-1", "chaos-dead-sidecar"]
    assert engine.names() == LIVE | STARTING | {
        "chaos-exited-reaper",
        "chaos-exited-kafka-1",
        "chaos-exited",
        "someone-elses",
    }


def test_log_directory_volumes_go_with_their_run_and_no_other_volume_does() -> None:
    engine = _engine()
    role = {f"{LABEL}.role": "logdirs"}
    for run in ("live", "dead", "reaped"):  # "reaped": its reaper removed its containers, not its volumes
        engine.volumes.append(FakeVolume(engine, f"chaos-{run}-logdir-1", {"Labels": {LABEL: run, **role}}))
    engine.volumes.append(FakeVolume(engine, "chaos-dead-data", {"Labels": {LABEL: "dead"}}))  # not a log dir
    engine.volumes.append(FakeVolume(engine, "someone-elses", {"Labels": {"app": "db"}}))
    result = sweep(client=FakeClient(engine))
    assert sorted(result.volumes) == ["chaos-dead-logdir-1", "chaos-reaped-logdir-1"]
    assert {v.name for v in engine.volumes} == {"chaos-live-logdir-1", "chaos-dead-data", "someone-elses"}
    assert sweep("live", client=FakeClient(engine)).volumes == ("chaos-live-logdir-1",)
