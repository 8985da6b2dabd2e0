"""The session's cluster is started again, once, when a scenario needs what it lacks (a fakeable clock, log
directories of the brokers' own), and kept that way; a scenario that needs nothing reuses whatever runs."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest

import chaos.cluster.cluster
from chaos.cluster.config import ClusterConfig, ClusterNeeds
from chaos.plugin.fixtures import ClusterHolder


class FakeCluster:
    started: ClassVar[list[FakeCluster]] = []

    def __init__(self, images: object, config: ClusterConfig) -> None:
        self.config = config
        self.run_id = f"c{len(FakeCluster.started)}"
        self.run_dir: Path | None = None
        self.start_duration_s = 0.1
        self.closed = False

    def start(self) -> None:
        FakeCluster.started.append(self)

    def close(self) -> None:
        self.closed = True


def test_a_scenarios_needs_restart_the_session_cluster_once_and_stay(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(chaos.cluster.cluster, "KafkaCluster", FakeCluster)
    FakeCluster.started = []
    run_ids: list[str] = []
    holder = ClusterHolder(object(), ClusterConfig(), tmp_path, run_ids)  # type: ignore[arg-type]
    first = holder.get()
    assert holder.get(ClusterNeeds()) is first  # nothing needed: the running cluster
    disk = holder.get(ClusterNeeds(log_dir_mb=256))
    assert disk is not first
    assert first.closed  # type: ignore[attr-defined]
    assert disk.config.log_dir_mb == 256
    assert holder.get() is disk  # kept for the tests after it
    assert holder.get(ClusterNeeds(log_dir_mb=128)) is disk  # a smaller need is met
    both = holder.get(ClusterNeeds(fake_clock=True))
    assert both is not disk
    assert (both.config.fake_clock, both.config.log_dir_mb) == (True, 256)
    assert run_ids == ["c0", "c1", "c2"]
    assert [c.run_id for c in FakeCluster.started] == run_ids
