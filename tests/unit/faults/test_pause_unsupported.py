"""A pause the engine cannot do (a rootless engine without the cgroup freezer, measured in
docs/platforms.md) is a FaultError naming the fix, and the fault is healed (nothing is left paused)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import docker.errors
import pytest

from chaos.errors import FaultError
from chaos.faults.base import FaultLog
from chaos.faults.process import Pause

FREEZER = (
    "Cannot pause container 28d5: OCI runtime pause failed: cannot toggle freezer: cgroups not configured "
    "for container: unknown"
)


class Container:
    status = "running"

    def __init__(self, error: str) -> None:
        self.error = error

    def pause(self) -> None:
        raise docker.errors.APIError("500 Server Error", explanation=self.error)

    def reload(self) -> None:
        pass


class Cluster:
    """One broker whose engine refuses to pause it (a class: the live-fault registry keeps a weak ref)."""

    def __init__(self, error: str) -> None:
        self._broker = SimpleNamespace(docker=Container(error))

    def broker(self, node_id: int) -> Any:
        return self._broker


def cluster(error: str) -> Any:
    return Cluster(error)


def test_a_pause_without_the_freezer_names_the_fix_and_is_healed() -> None:
    log = FaultLog()
    with pytest.raises(FaultError, match=r"(?s)cannot pause broker 2.*cgroup freezer.*rootless"):
        Pause(cluster(FREEZER), 2, log=log).inject()
    (record,) = log.records()
    assert record.healed_at is not None
    assert record.error is not None
    assert "cannot toggle freezer" in record.error


def test_another_engine_error_is_not_relabelled() -> None:
    with pytest.raises(docker.errors.APIError, match="500"):
        Pause(cluster("No such container: x"), 2, log=FaultLog()).inject()
