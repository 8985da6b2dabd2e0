"""A thread member stuck in a blocking client call (a synchronous commit to a crashed coordinator) and an
interrupted session: the hasty stop gives up after ``HASTY_CLOSE_S`` and says so; a normal stop waits its
whole timeout."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from chaos.errors import WorkloadError
from chaos.workload import IDEMPOTENT, MemberSpec, RunContext, ThreadMember
from chaos.workload import consumer as consumer_module
from chaos.workload.consumer import HASTY_CLOSE_S
from chaos.workload.effective import take_announced


@pytest.fixture
def stuck(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``run_member`` replaced by one that ignores its stop event until released (a commit that blocks)."""
    release = threading.Event()

    def run_member(context: Any, spec: Any, stop: threading.Event, hook: Any) -> None:
        release.wait(30)

    monkeypatch.setattr(consumer_module, "run_member", run_member)
    yield release
    release.set()


def member(run_id: str) -> ThreadMember:
    context = RunContext(
        run_id=run_id, bootstrap_servers="127.0.0.1:1", topic="t", group="g", client=IDEMPOTENT,
        sink=lambda event: None,
    )  # fmt: skip
    made = ThreadMember(context, MemberSpec("consumer-0"))
    take_announced(run_id)
    return made.start()


def test_a_hasty_stop_leaves_a_stuck_member_after_its_short_grace(stuck: threading.Event) -> None:
    worker = member("r-hasty")
    started = time.monotonic()
    with pytest.raises(WorkloadError, match="interrupted: left to the process's exit"):
        worker.stop(hasty=True)
    assert HASTY_CLOSE_S <= time.monotonic() - started < HASTY_CLOSE_S + 8.0  # not the default 30 s
    assert worker.running  # abandoned, not killed: a daemon thread ends with the process
    stuck.set()


def test_a_normal_stop_waits_its_timeout_and_a_released_member_closes(stuck: threading.Event) -> None:
    worker = member("r-normal")
    started = time.monotonic()
    with pytest.raises(WorkloadError, match=r"did not close within 3.0 s$"):
        worker.stop(timeout_s=3.0)
    assert time.monotonic() - started >= 3.0
    stuck.set()
    worker.stop(timeout_s=5.0)
    assert not worker.running
