"""The active controller is the leader of the highest epoch any broker reports: one broker's view can be
stale during an election."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from chaos.cluster import introspect, wire
from chaos.errors import ClusterError


class Cluster:
    def __init__(self) -> None:
        self.brokers = [SimpleNamespace(node_id=n, ext_port=9000 + n) for n in (1, 2, 3)]
        self.answers: list[int] = []

    def probe_order(self) -> Iterator[SimpleNamespace]:
        yield from self.brokers

    def answered(self, broker: SimpleNamespace) -> None:
        self.answers.append(broker.node_id)


def test_the_newest_epochs_leader_wins_and_a_silent_broker_is_skipped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    views = {9001: (1, 4), 9002: (2, 5)}  # broker 1 still believes in the old leader; broker 3 is paused

    def ask(host: str, port: int, timeout_s: float) -> tuple[int, int]:
        if port not in views:
            raise OSError("timed out")
        return views[port]

    monkeypatch.setattr(wire, "quorum_leader_epoch", ask)
    cluster = Cluster()
    assert introspect.controller_id(cluster) == 2  # type: ignore[arg-type]
    assert cluster.answers == [1, 2]
    views.clear()
    with pytest.raises(ClusterError, match="no broker answered DescribeQuorum: broker 1: timed out"):
        introspect.controller_id(cluster)  # type: ignore[arg-type]
