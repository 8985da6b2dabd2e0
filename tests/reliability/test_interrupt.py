"""Reliability 3: Ctrl-C at the worst moments — during the cluster's start, during a fault,
during the Spark audit — from ``pytest -m chaos`` and from the ``chaos`` CLI.

A terminal's Ctrl-C is SIGINT to the foreground process group: each row starts its inner process in a
group of its own and signals the group. The moments:

- ``start +Ns``: N s (1..``CHAOS_RELIABILITY_START_N``, default 3) after the session's cluster began to
  start (the probe plugin records its run id right before ``KafkaCluster.start``);
- ``fault``: a seeded random 0–3 s after the run's history shows a fault injected and not healed (pytest:
  docs/writing-scenarios.md's smallest scenario; CLI: ``chaos run PB1 --variant crash``, a catalog case);
- ``spark audit``: a seeded random 1–5 s after the session's Spark JVM appeared (pytest: a scenario that
  finishes with ``engine="spark"``; CLI: ``chaos audit --engine spark`` of a synthetic run of 300,000
  records, benchmarks/audit_bench.py's generator).

Expected: exit 2 from pytest (interrupted), 130 from the CLI; right after the exit no container or network
of the session's clusters (the leak check must not report the live cluster as "left behind" either), and
within 20 s no process of the session (a JVM dies once its parent's pipe closes); where a scenario run
existed, every fault healed, ``ended_ts`` written and the broker logs in its ``logs/`` (whole gzip files);
where a cluster was interrupted mid-start, whatever logs it wrote whole; ``audit.json`` absent or whole.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.reliability.inner import (
    PROCESS_GRACE_S,
    REPO,
    SPARK_JVM,
    InnerProject,
    MakeProject,
    Session,
    docker_leftovers,
    figures,
    gzip_logs,
    interrupted_run_problems,
    processes_left,
    run_with_active_fault,
    tagged_processes,
    torn_json,
    wait_for,
)
from tests.writing_doc import smallest_scenario

pytestmark = pytest.mark.reliability

START_N = int(os.environ.get("CHAOS_RELIABILITY_START_N", "3"))
SEED = int(os.environ.get("CHAOS_RELIABILITY_SEED", "0")) or random.randrange(1, 2**31)
MOMENT_TIMEOUT_S = 300.0  # cluster start, the workload, the drain before the audit
EXIT_TIMEOUT_S = 90.0  # teardown: heal, capture logs, remove the cluster
SYNTHETIC_RECORDS = 300_000
PYTEST_INTERRUPTED = 2
CLI_INTERRUPTED = 130

CLUSTER_TEST = """
import time

import pytest


@pytest.mark.chaos
def test_on_the_cluster(kafka_cluster):
    time.sleep(300)
"""

SPARK_AUDIT_SCENARIO = """
from chaos.scenario import Scenario, ScenarioRun, Variant, chaos_scenario, views
from chaos.workload import IDEMPOTENT

SCENARIO = Scenario(
    scenario_id="interrupted_spark_audit",
    case_id="X6",
    title="Ctrl-C while Spark audits the run",
    source="tests/reliability/test_interrupt.py",
    symptom="none: the audit is interrupted",
    client=IDEMPOTENT,
    guarantee="at_least_once",
    expected_verdict="pass",
    variants=(Variant("spark", "a clean run, audited by Spark from the topic"),),
)


@chaos_scenario(SCENARIO)
def test_spark_audit(run: ScenarioRun) -> None:
    run.create_topic(partitions=3, replication_factor=3)
    run.member("consumer-0")
    producer = run.producer(rate=200, duration_s=15)
    run.wait_for("first acks", lambda ev: len(views.acked_ids(ev)) >= 100, 60)
    producer.join()
    run.wait_caught_up(60)
    run.finish(engine="spark")
"""

FILES = {
    "tests/test_cluster.py": CLUSTER_TEST,
    "tests/test_mine.py": smallest_scenario(),
    "tests/test_spark_audit.py": SPARK_AUDIT_SCENARIO,
}


@dataclass(frozen=True)
class Row:
    """One interrupt: what runs, when Ctrl-C comes (``moment`` returns once it is time), the exit expected."""

    start: Callable[[InnerProject, Path], Session]
    moment: Callable[[Session, Path, random.Random], str]
    expected: int
    scenario_run: bool
    """A scenario run exists when the signal comes: check its faults, ``ended_ts`` and broker logs."""


def cluster_starting(seconds: float, session: Session, report_dir: Path, rng: random.Random) -> str:
    wait_for("the cluster begins to start", session.run_ids, MOMENT_TIMEOUT_S, session)
    time.sleep(seconds)
    return f"{seconds:.0f} s into the cluster's start"


def fault_active(session: Session, report_dir: Path, rng: random.Random) -> str:
    active = functools.partial(run_with_active_fault, report_dir)
    wait_for("a fault injected and not healed", active, MOMENT_TIMEOUT_S, session)
    delay = rng.uniform(0, 3)
    time.sleep(delay)
    return f"{delay:.2f} s into a fault"


def spark_auditing(session: Session, report_dir: Path, rng: random.Random) -> str:
    def jvm() -> bool:
        return any(SPARK_JVM in command for _, command in tagged_processes(session.tag))

    wait_for("the Spark audit's JVM", jvm, MOMENT_TIMEOUT_S, session)
    delay = rng.uniform(1, 5)
    time.sleep(delay)
    return f"{delay:.2f} s into the Spark audit"


def synthetic_run(run_dir: Path, records: int) -> None:
    """A clean synthetic run (benchmarks/audit_bench.py's generator): work for the Spark audit, no cluster."""
    spec = importlib.util.spec_from_file_location("audit_bench", REPO / "benchmarks" / "audit_bench.py")
    assert spec is not None
    assert spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.generate(run_dir, records)


def pytest_file(name: str) -> Callable[[InnerProject, Path], Session]:
    def start(project: InnerProject, report_dir: Path) -> Session:
        return project.pytest("session", "-m", "chaos", f"tests/{name}", report_dir=report_dir)

    return start


def chaos_run(project: InnerProject, report_dir: Path) -> Session:
    return project.chaos("session", "run", "PB1", "--variant", "crash", report_dir=report_dir)


def chaos_audit(project: InnerProject, report_dir: Path) -> Session:
    run_dir = report_dir / "synthetic"
    synthetic_run(run_dir, SYNTHETIC_RECORDS)
    return project.chaos("session", "audit", "--engine", "spark", str(run_dir), report_dir=report_dir)


ROWS: dict[str, Row] = {
    **{
        f"pytest start +{n}s": Row(
            pytest_file("test_cluster.py"),
            functools.partial(cluster_starting, float(n)),
            PYTEST_INTERRUPTED,
            scenario_run=False,
        )
        for n in range(1, START_N + 1)
    },
    "pytest fault": Row(pytest_file("test_mine.py"), fault_active, PYTEST_INTERRUPTED, scenario_run=True),
    "pytest spark audit": Row(
        pytest_file("test_spark_audit.py"), spark_auditing, PYTEST_INTERRUPTED, scenario_run=True
    ),
    "chaos run start +2s": Row(
        chaos_run, functools.partial(cluster_starting, 2.0), CLI_INTERRUPTED, scenario_run=False
    ),
    "chaos run fault": Row(chaos_run, fault_active, CLI_INTERRUPTED, scenario_run=True),
    "chaos audit spark": Row(chaos_audit, spark_auditing, CLI_INTERRUPTED, scenario_run=False),
}


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", list(ROWS))
def test_ctrl_c(name: str, inner: MakeProject) -> None:
    row = ROWS[name]
    rng = random.Random(f"{SEED}-{name}")
    print(f"\n{name}: moment from seed {SEED} (CHAOS_RELIABILITY_SEED={SEED} replays it)")
    project = inner("interrupt", FILES)
    report_dir = project.root / "reports"
    started = time.monotonic()
    session = row.start(project, report_dir)
    when = row.moment(session, report_dir, rng)
    session.send(signal.SIGINT, group=True)
    code = session.wait(EXIT_TIMEOUT_S)
    exited_s = time.monotonic() - started
    left = docker_leftovers(session.run_ids())  # at once: the session's teardown removes its cluster
    left += processes_left(session, PROCESS_GRACE_S)
    figures(f"interrupt {name}", 1, len(left), time.monotonic() - started)
    print(f"{name}: Ctrl-C {when}; exit {code} at {exited_s:.1f} s; left {left}")
    assert code is not None, f"still running {EXIT_TIMEOUT_S:.0f} s after Ctrl-C\n{session.tail()}"
    assert code == row.expected, f"exit {code} after Ctrl-C, expected {row.expected}\n{session.tail()}"
    assert left == [], f"left behind after Ctrl-C {when}: {left}\n{session.tail()}"
    assert "left behind" not in session.output(), session.tail()

    if row.scenario_run:
        problems = interrupted_run_problems(report_dir, report=False)
        assert problems == [], "\n".join(problems) + f"\n{session.tail()}"
    for cluster_dir in report_dir.glob("cluster-*"):  # logs the cluster saved as it closed: whole files
        gzip_logs(cluster_dir)
    torn = [problem for path in report_dir.rglob("audit.json") if (problem := torn_json(path)) is not None]
    assert torn == [], torn
