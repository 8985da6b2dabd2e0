"""Reliability 6: a full disk under the report dir is one clear error, and the session goes on.

The inner session's report dir is a 2 MB tmpfs (``mount -t tmpfs``: root only; the test is skipped with the
reason when the mount fails). Its first test is a scenario run that cuts broker 3 off the network, then
fills the disk with a ballast file (all but 256 kB), and keeps producing while its history, its broker
logs and its report have nowhere to go. Its second test, in the same session on the same session cluster,
checks that it got a healthy cluster: every broker running, no cut left (no iptables sidecar, every proxy
enabled without a toxic), every ISR full.

Expected: the first test fails with a message — the failure's own message, not only a traceback — that
says ENOSPC ("No space left on device") and names the path under the report dir; the second passes;
nothing of the session is left behind.
"""

from __future__ import annotations

import re
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.reliability.inner import (
    PROCESS_GRACE_S,
    MakeProject,
    docker_leftovers,
    figures,
    processes_left,
    tmpfs,
)

pytestmark = pytest.mark.reliability

SESSION_TIMEOUT_S = 600.0
ENOSPC = re.compile(r"No space left on device|ENOSPC|Errno 28")

INNER = """
import os
import shutil
import time

import pytest

from chaos.cluster.cluster import ROLE_LABEL
from chaos.cluster.engine import LABEL, docker_client, labelled_containers
from chaos.faults.network import SIDECAR_ROLE, NetworkCut
from chaos.scenario import Scenario, ScenarioRun, Variant, chaos_scenario, views
from chaos.workload import IDEMPOTENT

SCENARIO = Scenario(
    scenario_id="report_dir_full",
    case_id="X5",
    title="The report dir fills up in the middle of a run",
    source="tests/reliability/test_full_disk.py",
    symptom="the history, the logs and the report cannot be written",
    client=IDEMPOTENT,
    guarantee="at_least_once",
    expected_verdict="pass",
    variants=(Variant("full", "broker 3 cut, then the disk fills up"),),
)


@chaos_scenario(SCENARIO)
def test_fills_the_disk(run: ScenarioRun, chaos_report_dir) -> None:
    run.create_topic(partitions=1, replication_factor=3)
    run.member("consumer-0")
    producer = run.producer(rate=200, duration_s=60)
    run.wait_for("first acks", lambda ev: len(views.acked_ids(ev)) >= 20, 60)
    run.fault(NetworkCut, 3).inject()
    free = shutil.disk_usage(chaos_report_dir).free
    with open(chaos_report_dir / "ballast.bin", "wb") as ballast:
        ballast.write(bytes(max(free - 256 * 1024, 0)))
    time.sleep(20)  # the history fills the rest
    producer.stop()


@pytest.mark.chaos
def test_next_test_gets_a_healthy_cluster(kafka_cluster):
    assert [b.status() for b in kafka_cluster.brokers] == ["running"] * 3
    sidecars = labelled_containers([f"{LABEL}={kafka_cluster.run_id}", f"{ROLE_LABEL}={SIDECAR_ROLE}"])
    assert sidecars == [], [c.name for c in sidecars]
    proxies = kafka_cluster.toxiproxy.proxies()
    assert all(p["enabled"] and p["toxics"] == [] for p in proxies.values()), proxies
    assert kafka_cluster.under_replicated_partitions() == []
"""


def outcomes(junit: Path) -> dict[str, list[str]]:
    """Each test case's name -> the messages of its failures and errors (empty: it passed)."""
    found: dict[str, list[str]] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        problems = [*case.iter("failure"), *case.iter("error"), *case.iter("skipped")]
        found[case.get("name", "?")] = [f"{p.tag}: {p.get('message', '')}" for p in problems]
    return found


@pytest.mark.timeout(900)
def test_full_report_dir_is_one_clear_error(inner: MakeProject) -> None:
    project = inner("disk", {"tests/test_disk.py": INNER})
    junit = project.scratch / "junit.xml"
    started = time.monotonic()
    with tmpfs(project.root / "full", "2m") as mount:
        session = project.pytest("session", "-m", "chaos", f"--junitxml={junit}", report_dir=mount)
        code = session.wait(SESSION_TIMEOUT_S)
        if code is None:
            session.kill()  # before the unmount, which a live process would hold busy
        left = docker_leftovers(session.run_ids()) + processes_left(session, PROCESS_GRACE_S)
        figures("full_disk", 1, len(left), time.monotonic() - started)
        assert code is not None, f"the session did not end within {SESSION_TIMEOUT_S:.0f} s\n{session.tail()}"
        tests = outcomes(junit)
        print(f"exit {code}; {tests}")
        full = next((msgs for name, msgs in tests.items() if name.startswith("test_fills_the_disk")), None)
        healthy = tests.get("test_next_test_gets_a_healthy_cluster")
        assert full, f"the run on a full disk did not fail: {tests}\n{session.tail()}"
        clear = [m for m in full if ENOSPC.search(m) and str(mount) in m and "ballast" not in m]
        assert clear, (
            f"no failure message says ENOSPC and names the path under {mount}: {full}\n{session.tail()}"
        )
        assert healthy == [], f"the next test did not get a healthy cluster: {healthy}\n{session.tail()}"
        assert code == 1, f"exit {code}: expected 1 (a test failed)\n{session.tail()}"
        assert left == [], f"left behind: {left}"
