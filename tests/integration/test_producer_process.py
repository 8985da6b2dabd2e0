"""A producer process killed mid-flight and restarted from its own checkpoint.

``run.process_producer(checkpoint="ack")`` sends 1500 values at 300/s; once 300 are acknowledged it is
SIGKILLed, then started again under the same name: the new session resumes at its checkpoint (one past the
highest acknowledged value), so every sequence number is sent, the values sent after the checkpoint and
before the kill are sent twice (a new producer session: idempotence does not span it), and the restart is
in the history (a ``RESUME`` client log line per session). The audit counts the copies that reached the
log twice as ``duplicate_in_log``, which at_least_once allows: nothing acknowledged is lost.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable

import pytest

from chaos.history import SendInvoke
from chaos.scenario import Scenario, ScenarioRun, Variant, views
from chaos.workload import IDEMPOTENT

pytestmark = pytest.mark.integration

COUNT, NAME = 1500, "app"

RESTART = Scenario(
    scenario_id="producer_restarted_from_its_checkpoint",
    case_id="X17",
    title="An application producer SIGKILLed mid-flight and restarted from its own checkpoint",
    source="tests/integration/test_producer_process.py",
    symptom="a producer could not be killed or restarted: resending after a crash took a hand-written app",
    client=IDEMPOTENT,
    guarantee="at_least_once",
    expected_verdict="pass",
    variants=(Variant("restart", "checkpoint: the last ack; SIGKILL after 300 acks, then start again"),),
)


def test_a_producer_killed_and_restarted_resumes_at_its_checkpoint(
    scenario_run: Callable[..., ScenarioRun],
) -> None:
    with scenario_run(RESTART, "restart") as run:
        run.create_topic(partitions=2, replication_factor=3)
        run.member("consumer-0")
        app = run.process_producer(NAME, count=COUNT, rate=300.0, checkpoint="ack")
        run.wait_for(
            "300 values acknowledged", lambda ev: len(views.acked_ids(ev)) >= 300, 30, interval_s=0.02
        )
        app.crash()
        assert app.returncode == -signal.SIGKILL
        resume_at = app.checkpoint()
        sent_before = max(e.seq for e in run.events() if isinstance(e, SendInvoke) and e.process == NAME)
        app.start()
        assert app.wait(30.0) == 0, app.stderr_tail()
        run.wait_caught_up(30)
        result = run.finish()

    events = list(result.events)
    seqs = [e.seq for e in events if isinstance(e, SendInvoke) and e.process == NAME]
    twice = sorted(s for s in set(seqs) if seqs.count(s) == 2)
    starts = [
        int(m.group(1))
        for e in views.client_logs(events, facility="RESUME")
        if (m := re.search(r"starting at sequence (\d+)", e.message))
    ]
    print(
        f"\nkilled after sending up to {sent_before}, checkpoint {resume_at}; sessions started at {starts}; "
        f"{len(twice)} values sent twice; {result.summary()}"
    )
    assert starts == [0, resume_at]
    assert 0 < resume_at <= sent_before + 1
    assert sorted(set(seqs)) == list(range(COUNT)), "every sequence number sent: the history is continuous"
    assert twice == list(range(resume_at, sent_before + 1))
    assert max(seqs.count(s) for s in set(seqs)) <= 2
    assert result.count("lost_acked") == 0
    assert result.count("duplicate_in_log") <= len(twice)
    assert result.audit.verdict == "pass", result.audit.failed_by
