"""Reliability 2: SIGTERM (a CI cancel) of ``pytest -m chaos`` mid-scenario ends the run cleanly.

The inner session runs the smallest scenario of docs/writing-scenarios.md (a producer and a member, the
leader of partition 0 crashed for 10 s) in a project of its own. Once the run's history shows the crash
injected and not healed, the test waits a seeded random 0–3 s and sends SIGTERM to the runner. Then:
pytest exits within 15 s with status 2 (interrupted); the history shows every injected fault healed;
``scenario.json`` has its ``ended_ts``; the broker logs are in the run's ``logs/``; ``report.html`` was
rendered for the interrupted run; and no container or network of the session's clusters, and no process of
the session, is left — right after the exit, not after the reaper's delay.

``CHAOS_RELIABILITY_SIGTERM_REPS`` (default 3) sets the repetitions, ``CHAOS_RELIABILITY_SEED`` the seed of
the signal moments, ``CHAOS_RELIABILITY_SIGTERM_MAX_DELAY_S`` (default 3) their latest point: a small one
(0.3) aims the signal at the fault's own inject (the ``docker kill`` still running), a window that once left
the fault's heal recorded as failed.
"""

from __future__ import annotations

import functools
import os
import random
import signal
import time

import pytest

from tests.reliability.inner import (
    MakeProject,
    clean_up,
    figures,
    interrupted_run_problems,
    leftovers,
    run_with_active_fault,
    wait_for,
)
from tests.writing_doc import smallest_scenario

pytestmark = pytest.mark.reliability

REPS = int(os.environ.get("CHAOS_RELIABILITY_SIGTERM_REPS", "3"))
SEED = int(os.environ.get("CHAOS_RELIABILITY_SEED", "0")) or random.randrange(1, 2**31)
MAX_DELAY_S = float(os.environ.get("CHAOS_RELIABILITY_SIGTERM_MAX_DELAY_S", "3"))
EXIT_WITHIN_S = 15.0
FAULT_TIMEOUT_S = 240.0  # cluster start, first acks


@pytest.mark.timeout(60 + REPS * 360)
def test_sigterm_mid_scenario_heals_records_and_cleans_up(inner: MakeProject) -> None:
    rng = random.Random(SEED)
    print(f"\nSIGTERM moments from seed {SEED} (CHAOS_RELIABILITY_SEED={SEED} replays them)")
    project = inner("sigterm", {"tests/test_mine.py": smallest_scenario()})
    started = time.monotonic()
    found: list[str] = []
    for rep in range(REPS):
        report_dir = project.root / f"reports-{rep}"
        session = project.pytest(f"rep{rep}", "-m", "chaos", report_dir=report_dir)
        wait_for(
            f"rep {rep}: a fault injected",
            functools.partial(run_with_active_fault, report_dir),
            FAULT_TIMEOUT_S,
            session,
        )
        delay = rng.uniform(0, MAX_DELAY_S)
        time.sleep(delay)
        signalled = time.monotonic()
        session.send(signal.SIGTERM, group=False)
        code = session.wait(EXIT_WITHIN_S)
        exit_s = time.monotonic() - signalled
        left = leftovers(session)  # right away: the session's own teardown must have removed everything
        found += [f"rep {rep}: {item}" for item in left]
        if left:
            clean_up(session)  # the next repetition starts from a clean machine
        print(
            f"rep {rep}: SIGTERM {delay:.2f} s into the fault; exit {code} after {exit_s:.1f} s; left {left}"
        )
        assert code is not None, (
            f"rep {rep}: still running {EXIT_WITHIN_S:.0f} s after SIGTERM\n{session.tail()}"
        )
        assert code == 2, f"rep {rep}: exit {code} after SIGTERM, expected 2 (interrupted)\n{session.tail()}"
        assert "left behind" not in session.output(), session.tail()
        problems = interrupted_run_problems(report_dir, report=True)
        assert problems == [], f"rep {rep}:\n" + "\n".join(problems) + f"\n{session.tail()}"
    figures("sigterm", REPS, len(found), time.monotonic() - started)
    assert found == [], "left behind right after SIGTERM:\n" + "\n".join(found)
