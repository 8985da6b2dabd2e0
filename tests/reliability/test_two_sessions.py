"""Reliability 5: two sessions at once on one machine, and ``chaos clean`` from a third shell.

Two inner ``pytest -m chaos`` sessions run the same test of the same project at once — with the same report
dir, then with a report dir each. The test writes its session's name into its run directory, creates a
topic, says it is ready and waits. When both are ready, ``chaos clean`` (no arguments) runs from a third
process; then both tests go on and check that their cluster still runs (brokers up, their topic there) and
that their run directory is still theirs. Expected: both sessions pass; ``chaos clean`` said it left both
live runs alone (listing their run ids) and removed none of their resources; both run directories are
intact after the sessions — with one report dir, the second session's is ``<test>~2`` — and nothing of
either session is left behind.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.reliability.inner import CHAOS, MakeProject, Session, figures, leftovers, wait_for

pytestmark = pytest.mark.reliability

READY_TIMEOUT_S = 420.0  # two cluster starts at once on a small machine
FINISH_TIMEOUT_S = 240.0

INNER = """
import os
import time
from pathlib import Path

import pytest


@pytest.mark.chaos
def test_shared(kafka_cluster, run_dir):
    name = os.environ["RELIABILITY_SESSION"]
    (run_dir / "owner.txt").write_text(name)
    kafka_cluster.create_topic(f"t-{name}", partitions=1, replication_factor=3)
    Path(os.environ["RELIABILITY_READY"]).write_text(str(run_dir))
    go = Path(os.environ["RELIABILITY_GO"])
    deadline = time.monotonic() + 300
    while not go.exists():
        assert time.monotonic() < deadline, "the outer test never said go"
        time.sleep(0.5)
    assert [b.status() for b in kafka_cluster.brokers] == ["running"] * 3
    assert f"t-{name}" in kafka_cluster.topics()
    assert (run_dir / "owner.txt").read_text() == name, "another session wrote into this run directory"
"""


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("report_dirs", ["same", "different"])
def test_two_sessions_and_chaos_clean(report_dirs: str, inner: MakeProject) -> None:
    project = inner("two", {"tests/test_shared.py": INNER})
    go = project.scratch / "go"
    started = time.monotonic()
    sessions: dict[str, Session] = {}
    ready: dict[str, Path] = {}
    for name in ("a", "b"):
        report_dir = project.report_dir if report_dirs == "same" else project.root / f"reports-{name}"
        ready[name] = project.scratch / f"{name}.ready"
        sessions[name] = project.pytest(
            name,
            "-m",
            "chaos",
            report_dir=report_dir,
            env={
                "RELIABILITY_SESSION": name,
                "RELIABILITY_READY": str(ready[name]),
                "RELIABILITY_GO": str(go),
            },
        )
    for name, session in sessions.items():
        wait_for(f"session {name} ready", ready[name].exists, READY_TIMEOUT_S, session)
    run_dirs = {name: Path(ready[name].read_text()) for name in sessions}

    clean = subprocess.run([CHAOS, "clean"], capture_output=True, text=True, timeout=120, check=False)
    go.write_text("go")
    codes = {name: session.wait(FINISH_TIMEOUT_S) for name, session in sessions.items()}

    clean_output = clean.stdout + clean.stderr
    run_ids = {name: session.run_ids() for name, session in sessions.items()}
    left = [f"{name}: {item}" for name, session in sessions.items() for item in leftovers(session)]
    figures(f"two_sessions {report_dirs} report dir", 2, len(left), time.monotonic() - started)
    tails = "\n".join(session.tail() for session in sessions.values())
    print(f"chaos clean (exit {clean.returncode}):\n{clean_output}")

    assert codes == {"a": 0, "b": 0}, f"both sessions must pass: {codes}\n{tails}\n{clean_output}"
    assert clean.returncode == 0, clean_output
    live = re.search(r"left (\d+) live runs alone", clean_output)
    assert live is not None, f"chaos clean did not say it left live runs alone:\n{clean_output}"
    assert int(live.group(1)) >= 2, clean_output  # other sessions on the machine may be live too
    removed = clean_output.split("left ", 1)[0]  # "removed N containers, M networks" and their names
    for name, ids in run_ids.items():
        assert len(ids) == 1, f"session {name} started clusters {ids}: one expected (none rebuilt)"
        assert ids[0] not in removed, f"chaos clean removed resources of session {name}'s live run {ids[0]}"
        assert ids[0] in clean_output, f"chaos clean did not list session {name}'s live run {ids[0]}"

    assert run_dirs["a"] != run_dirs["b"], run_dirs
    if report_dirs == "same":  # one session got <test>, the other <test>~2 beside it
        first, second = sorted(run_dirs.values())
        assert second == first.with_name(f"{first.name}~2"), run_dirs
    for name, run_dir in run_dirs.items():
        owner = run_dir / "owner.txt"
        assert owner.is_file(), f"session {name}'s run directory {run_dir} was deleted or emptied"
        assert owner.read_text() == name, f"{run_dir} holds session {owner.read_text()}'s run, not {name}'s"
    assert left == [], "left behind:\n" + "\n".join(left)
