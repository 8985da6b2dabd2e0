"""ClientPause on a real process (``sleep``): frozen by the inject (state ``T`` in /proc, read again just
before the heal as its proof of landing), running again after the heal, recorded in the fault log with the
client as its target and no broker; a client gone before the heal is healed with a note; one not running is
refused before anything is recorded as active."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chaos.errors import FaultError
from chaos.faults.base import FaultLog
from chaos.faults.client import ClientPause
from chaos.scenario import fault_event


class Sleeper:
    """A child process with the workload's pause / resume / running (as ``ChildProcess`` has them)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.proc = subprocess.Popen(["sleep", "60"])

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def pause(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def state(self) -> str:
        """The process state letter from /proc (``S`` sleeping, ``T`` stopped)."""
        return Path(f"/proc/{self.proc.pid}/stat").read_text().rpartition(")")[2].split()[0]


class NoCluster:
    """A client fault never touches the cluster (it is only a key of the live-fault registry)."""


@pytest.fixture
def sleeper() -> Iterator[Sleeper]:
    client = Sleeper("producer-0")
    yield client
    client.proc.send_signal(signal.SIGCONT)
    client.proc.kill()
    client.proc.wait(5)


def wait_state(client: Sleeper, want: str) -> str:
    deadline = time.monotonic() + 5
    state = client.state()
    while state != want and time.monotonic() < deadline:
        time.sleep(0.01)
        state = client.state()
    return state


def test_a_paused_client_is_frozen_until_the_heal_and_recorded(sleeper: Sleeper) -> None:
    log = FaultLog()
    cluster: Any = NoCluster()
    with ClientPause(cluster, sleeper, log=log) as fault:
        assert wait_state(sleeper, "T") == "T"
        assert log.active() == [fault]
    assert wait_state(sleeper, "S") == "S"
    (record,) = log.records()
    assert (record.kind, record.target, record.brokers) == ("client_pause", "producer-0", ())
    assert record.error is None
    assert record.healed_at is not None
    assert record.effect is not None, record.effect
    assert record.effect.observed, record.effect
    assert record.effect.evidence == f"process {sleeper.pid} was stopped (state T) just before the heal"
    inject, heal = fault_event("r", "inject", record), fault_event("r", "heal", record)
    assert (inject.target, heal.target, heal.error) == ("producer-0", "producer-0", None)


def test_a_client_gone_before_the_heal_is_healed_with_a_note(sleeper: Sleeper) -> None:
    log = FaultLog()
    fault = ClientPause(NoCluster(), sleeper, log=log).inject()  # type: ignore[arg-type]
    sleeper.proc.kill()
    sleeper.proc.wait(5)
    fault.heal()
    (record,) = log.records()
    assert record.healed_at is not None
    assert record.notes == ("client producer-0 had exited: nothing to thaw",)
    assert record.effect is None  # nothing left to read: no claim either way
    # the history's heal event says why (the report's fault table shows it), the inject's does not yet
    heal = json.loads(fault_event("r", "heal", record).params)
    assert heal["notes"] == ["client producer-0 had exited: nothing to thaw"]
    assert "effect" not in heal
    assert "notes" not in json.loads(fault_event("r", "inject", record).params)


def test_a_client_thawed_behind_the_faults_back_did_not_hold(sleeper: Sleeper) -> None:
    log = FaultLog()
    fault = ClientPause(NoCluster(), sleeper, log=log).inject()  # type: ignore[arg-type]
    assert wait_state(sleeper, "T") == "T"
    sleeper.proc.send_signal(signal.SIGCONT)  # something else thawed it before the heal
    assert wait_state(sleeper, "S") == "S"
    fault.heal()
    (record,) = log.records()
    assert record.effect is not None
    assert not record.effect.observed
    assert "not stopped: something thawed it" in record.effect.evidence


def test_a_client_not_running_is_refused(sleeper: Sleeper) -> None:
    sleeper.proc.kill()
    sleeper.proc.wait(5)
    log = FaultLog()
    with pytest.raises(FaultError, match="client producer-0 is not running"):
        ClientPause(NoCluster(), sleeper, log=log).inject()  # type: ignore[arg-type]
    assert log.active() == []
