"""Reliability 1: ``kill -9`` of the runner mid-fault leaves nothing behind.

Each repetition starts an inner ``pytest -m chaos`` session (a project of its own) whose one scenario opens
a run, starts a member in a child process and a producer, then injects a latency toxic (broker 1), a
network cut (broker 2) and a pause (broker 3), writes a marker file and sleeps. Every other repetition also
starts a Spark session (a JVM, as the Spark audit does). Once the marker is there the test waits a seeded
random 0–3 s and SIGKILLs either the whole process group (a CI runner killing the job) or the runner alone
(then only the kernel's parent-death signal and the JVM's closed stdin stop its children), alternating in
pairs of repetitions so that each kind meets a run with and one without Spark. Then, within
the reaper's delay (RYUK_RECONNECTION_TIMEOUT 10 s, polled up to 45 s): 0 containers and 0 networks
labelled with the session's run ids, 0 member child processes, 0 Spark JVMs (processes are found by a tag
in their environment, so other sessions on the machine do not count). ``chaos audit`` of each torn run
directory exits 0, 1 or 3 without a traceback (the reference engine every time, Spark — ``chaos audit``'s
default — on the first repetition).

``CHAOS_RELIABILITY_REPS`` (default 10) sets the repetitions, ``CHAOS_RELIABILITY_SEED`` the seed of the
kill moments (default: random, printed). One cluster start per repetition: about 1 min each.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.reliability.inner import (
    CHAOS,
    REAP_S,
    MakeProject,
    clean_up,
    figures,
    leftovers,
    wait_clean,
    wait_for,
)

pytestmark = pytest.mark.reliability

REPS = int(os.environ.get("CHAOS_RELIABILITY_REPS", "10"))
SEED = int(os.environ.get("CHAOS_RELIABILITY_SEED", "0")) or random.randrange(1, 2**31)
MAX_DELAY_S = 3.0
READY_TIMEOUT_S = 240.0  # cluster start, Spark start, the first acks
AUDIT_TIMEOUT_S = {"reference": 120.0, "spark": 400.0}

INNER = """
import json
import os
import time
from pathlib import Path

from chaos.faults.network import NetworkCut
from chaos.faults.process import Pause
from chaos.faults.toxics import Latency
from chaos.scenario import Scenario, ScenarioRun, Variant, chaos_scenario, views
from chaos.workload import IDEMPOTENT, ProcessMember

SCENARIO = Scenario(
    scenario_id="killed_mid_fault",
    case_id="X7",
    title="The runner is killed -9 while three faults are active",
    source="tests/reliability/test_kill9.py",
    symptom="none: the runner dies",
    client=IDEMPOTENT,
    guarantee="at_least_once",
    expected_verdict="pass",
    variants=(Variant("killed", "latency on broker 1, broker 2 cut, broker 3 paused, then kill -9"),),
)


@chaos_scenario(SCENARIO)
def test_killed_mid_fault(run: ScenarioRun, request) -> None:
    if os.environ["RELIABILITY_SPARK"] == "1":
        request.getfixturevalue("spark_session")  # a JVM child, as the Spark audit starts one
    run.create_topic(partitions=3, replication_factor=3)
    # started from the main thread, which outlives it (see member_child.die_with_parent)
    ProcessMember(run.context, run.member_spec("consumer-0")).start()
    run.producer(rate=50, duration_s=600)
    run.wait_for("first acks", lambda ev: len(views.acked_ids(ev)) >= 20, 60)
    run.fault(Latency, 1, ms=300).inject()
    run.fault(NetworkCut, 2).inject()
    run.fault(Pause, 3).inject()
    marker = Path(os.environ["RELIABILITY_MARKER"])
    marker.with_suffix(".tmp").write_text(json.dumps({"run_dir": str(run.dir)}))
    marker.with_suffix(".tmp").replace(marker)
    time.sleep(600)
"""


def audit(run_dir: Path, engine: str) -> str | None:
    """``chaos audit`` of a torn run: what is wrong with its answer (``None``: exit 0/1/3, no traceback)."""
    done = subprocess.run(
        [CHAOS, "audit", "--engine", engine, str(run_dir)],
        capture_output=True,
        text=True,
        timeout=AUDIT_TIMEOUT_S[engine],
        check=False,
    )
    output = done.stdout + done.stderr
    if done.returncode in (0, 1, 3) and "Traceback" not in output:
        return None
    return f"chaos audit --engine {engine} {run_dir}: exit {done.returncode}\n{output[-3000:]}"


@pytest.mark.timeout(120 + REPS * 300)
def test_kill_9_mid_fault_leaves_nothing(inner: MakeProject) -> None:
    rng = random.Random(SEED)
    print(f"\nkill -9 moments from seed {SEED} (CHAOS_RELIABILITY_SEED={SEED} replays them)")
    project = inner("kill9", {"tests/test_killed.py": INNER})
    started = time.monotonic()
    found: list[str] = []
    audits: list[str] = []
    for rep in range(REPS):
        spark = rep % 2 == 0
        group = (rep // 2) % 2 == 0
        marker = project.scratch / f"rep{rep}.marker"
        session = project.pytest(
            f"rep{rep}",
            "-m",
            "chaos",
            report_dir=project.root / f"reports-{rep}",
            env={"RELIABILITY_MARKER": str(marker), "RELIABILITY_SPARK": "1" if spark else "0"},
        )
        try:
            wait_for(f"rep {rep}: three faults active", marker.exists, READY_TIMEOUT_S, session)
            run_dir = Path(json.loads(marker.read_text())["run_dir"])
            delay = rng.uniform(0, MAX_DELAY_S)
            time.sleep(delay)
            session.send(signal.SIGKILL, group=group)
            assert session.wait(10) == -signal.SIGKILL, session.tail()
            assert session.run_ids(), f"rep {rep}: the probe recorded no cluster run id\n{session.tail()}"
            left, waited = wait_clean(session, REAP_S)
            found += [f"rep {rep}: {item}" for item in left]
            print(
                f"rep {rep}: killed {'the process group' if group else 'the runner alone'} "
                f"{delay:.2f} s into the faults (spark {'on' if spark else 'off'}); "
                f"clean after {waited:.1f} s; left {left}"
            )
            for engine in ("reference", "spark") if rep == 0 else ("reference",):
                problem = audit(run_dir, engine)
                if problem is not None:
                    audits.append(f"rep {rep}: {problem}")
        finally:
            if leftovers(session):
                clean_up(session)  # the next repetition starts from a clean machine
    figures("kill9", REPS, len(found), time.monotonic() - started)
    assert found == [], "left behind after kill -9:\n" + "\n".join(found)
    assert audits == [], "chaos audit of a torn run:\n" + "\n\n".join(audits)
