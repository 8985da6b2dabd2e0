"""The audit runs unchanged against a Spark standalone cluster, directly and through a
Spark Connect server in front of it.

A master and a worker are started from the installed PySpark distribution (``bin/spark-class``), bound to
127.0.0.1 (their web UIs too: ``SPARK_LOCAL_IP``), and stopped in ``finally`` — and killed by the kernel if
this process dies first (``PR_SET_PDEATHSIG``). A real run's directory, audited by the reference engine when
the run finished, is audited again by ``chaos audit --spark-master spark://127.0.0.1:PORT``, by
docs/spark-cluster.md's ``spark-submit`` recipe and by a plain ``chaos audit`` while the warm server runs in
front of that cluster (``chaos spark start --master spark://…``: the command takes it as its default, and
``chaos spark stop`` leaves neither its supervisor nor its JVM behind): the facts must be equal (the
property tests prove the local Spark job equal to the reference), and the cluster must have run the three
jobs (the worker launched an executor for each).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from chaos.audit.spark import DRIVER_HOST_ENV, command_line
from chaos.audit.warm import OFF_ENV, STATE_DIR_ENV, running
from chaos.cluster.ports import free_loopback_ports
from chaos.scenario import Scenario, ScenarioRun, Variant
from chaos.workload import IDEMPOTENT
from chaos.workload.member_child import die_with_parent

pytestmark = pytest.mark.integration

START_TIMEOUT_S = 90.0
AUDIT_TIMEOUT_S = 300.0

RUN = Scenario(
    scenario_id="audit_on_a_standalone_spark_cluster",
    case_id="X15",
    title="A run audited by a Spark standalone cluster and by a local master",
    source="tests/integration/test_spark_standalone.py",
    symptom="the Spark path pinned the driver to 127.0.0.1 for every master: no cluster could run it",
    client=IDEMPOTENT,
    guarantee="at_least_once",
    expected_verdict="pass",
    variants=(Variant("run", "produce 300 values, one member consumes them"),),
)


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _spawn(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(spark_home() / "bin" / "spark-class"), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=die_with_parent,  # the kernel kills it if this process dies
        )


def _await(log: Path, pattern: str, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not re.search(pattern, log.read_text(errors="replace")):
        if proc.poll() is not None:
            raise AssertionError(
                f"{what} exited {proc.returncode}:\n{log.read_text(errors='replace')[-3000:]}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not ready in {START_TIMEOUT_S:.0f} s:\n{log.read_text()[-3000:]}")
        time.sleep(0.5)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(15)


@contextmanager
def standalone(work: Path) -> Iterator[tuple[str, Path]]:
    """A master and a 2-core worker on 127.0.0.1: yields the master URL and the worker's log."""
    port, master_ui, worker_ui = free_loopback_ports(3)
    env = {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(work / "logs"),
        "SPARK_WORKER_DIR": str(work / "worker"),
    }
    work.mkdir(parents=True, exist_ok=True)
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        master_log = work / "master.log"
        procs.append(
            _spawn(
                ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                 "--webui-port", str(master_ui)],
                master_log,
                env,
            )
        )  # fmt: skip
        _await(master_log, r"I have been elected leader", procs[0], "the Spark master")
        worker_log = work / "worker.log"
        procs.append(
            _spawn(
                ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "2",
                 "--memory", "2g", "--webui-port", str(worker_ui), url],
                worker_log,
                env,
            )
        )  # fmt: skip
        _await(worker_log, r"Successfully registered with master", procs[1], "the Spark worker")
        yield url, worker_log
    finally:
        for proc in reversed(procs):
            _stop(proc)


def chaos(*args: str) -> str:
    """``chaos ARGS`` (exit 0 asserted): what it printed."""
    done = subprocess.run(
        [str(Path(sys.executable).parent / "chaos"), *args],
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_S + 30,
        env={**os.environ, DRIVER_HOST_ENV: "127.0.0.1"},
    )
    assert done.returncode == 0, (
        f"chaos {' '.join(args)}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    )
    return done.stdout


@contextmanager
def warm_server(work: Path, master: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """``chaos spark start --master MASTER``: the warm Spark Connect server (its state under ``work``, so a
    developer's own is left alone) whose jobs run on ``master``; yields its ``sc://`` URL, then ``chaos spark
    stop`` — after which neither its supervisor nor its JVM runs."""
    monkeypatch.setenv(STATE_DIR_ENV, str(work))
    monkeypatch.delenv(OFF_ENV, raising=False)
    chaos("spark", "start", "--master", master, "--idle", "10m")
    server = running()
    assert server is not None
    jvm = [pid for pid in _pids() if f"spark.connect.grpc.binding.port={server.port}" in _cmdline(pid)]
    assert jvm, "no Spark Connect JVM on the server's port"
    try:
        yield server.url
    finally:
        assert "warm Spark server stopped" in chaos("spark", "stop")
    assert running() is None
    assert not _alive(server.pid), "the supervisor outlived chaos spark stop"
    deadline = time.monotonic() + 20
    while any(_alive(pid) for pid in jvm) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(pid) for pid in jvm), "the server's JVM outlived its supervisor"


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (an exited process its new parent has not reaped yet is a zombie: not running)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _pids() -> list[int]:
    return [int(entry.name) for entry in os.scandir("/proc") if entry.name.isdigit()]


def _cmdline(pid: int) -> str:
    return command_line(pid).replace(b"\0", b" ").decode(errors="replace")


def chaos_audit(run_dir: Path, master: str | None) -> tuple[dict[str, object], float]:
    """``chaos audit RUN_DIR --spark-master MASTER`` (no master: the command's default): the audit.json it
    wrote, and how long it took."""
    started = time.monotonic()
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "chaos"),
            "audit",
            str(run_dir),
            *(("--spark-master", master) if master else ()),
        ],
        capture_output=True,
        text=True,
        timeout=AUDIT_TIMEOUT_S,
        env={**os.environ, DRIVER_HOST_ENV: "127.0.0.1"},
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 0, (
        f"chaos audit --spark-master {master}: exit {done.returncode}\n{done.stdout}\n{done.stderr[-3000:]}"
    )
    return json.loads((run_dir / "audit.json").read_text(encoding="utf-8")), elapsed


def spark_submit(run_dir: Path, master: str) -> tuple[dict[str, object], float]:
    """docs/spark-cluster.md's recipe: ``spark-submit --master MASTER --deploy-mode client --jars JARS JOB
    RUN_DIR --master MASTER`` (JOB: ``chaos/gate/job.py``, JARS: the connector's jars, the driver's Python
    this venv's). The audit.json it wrote, and how long it took."""
    import chaos.gate.job
    from chaos.audit.connector import ensure_connector_jars

    jars = ",".join(str(p) for p in ensure_connector_jars())
    started = time.monotonic()
    done = subprocess.run(
        [str(spark_home() / "bin" / "spark-submit"), "--master", master, "--deploy-mode", "client",
         "--jars", jars, chaos.gate.job.__file__, str(run_dir), "--master", master,
         "--guarantee", "at_least_once"],
        capture_output=True,
        text=True,
        timeout=AUDIT_TIMEOUT_S,
        env={**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
             "PYSPARK_DRIVER_PYTHON": sys.executable, DRIVER_HOST_ENV: "127.0.0.1"},
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert done.returncode == 0, (
        f"spark-submit --master {master}: exit {done.returncode}\n{done.stdout}\n{done.stderr[-3000:]}"
    )
    assert "pass (at_least_once): " in done.stdout, done.stdout
    return json.loads((run_dir / "audit.json").read_text(encoding="utf-8")), elapsed


def test_the_audit_runs_unchanged_on_a_standalone_spark_cluster(
    scenario_run: Callable[..., ScenarioRun], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with scenario_run(RUN, "run") as run:
        run.create_topic(partitions=2, replication_factor=3)
        run.member("consumer-0")
        run.producer(count=300, rate=None).join()
        run.wait_caught_up(30)
        run.finish(engine="reference")
    cluster_dir, submitted_dir, connect_dir = (
        tmp_path / name for name in ("cluster", "submitted", "connect")
    )
    for copy in (cluster_dir, submitted_dir, connect_dir):
        shutil.copytree(run.dir, copy)
    # the run's own audit: the reference engine, which the property tests prove Spark's local job equal to
    local = json.loads((run.dir / "audit.json").read_text(encoding="utf-8"))

    with standalone(tmp_path / "spark") as (url, worker_log):
        on_cluster, cluster_s = chaos_audit(cluster_dir, url)
        submitted, submitted_s = spark_submit(submitted_dir, url)
        with warm_server(tmp_path / "warm", url, monkeypatch) as remote:
            status = chaos("spark", "status")
            connected, connect_s = chaos_audit(connect_dir, None)  # no master given: the warm server's
        assert f"warm Spark server at {remote}: " in status
        assert f"jobs on {url}" in status
        launched = re.findall(r"Asked to launch executor (\S+)", worker_log.read_text(errors="replace"))
    print(
        f"\n{url}: chaos audit {cluster_s:.1f} s, spark-submit {submitted_s:.1f} s, through Spark Connect "
        f"{connect_s:.1f} s; executors launched {launched}"
    )
    # one executor per application: the chaos audit's, the spark-submit's and the Connect server's
    assert len(launched) >= 3, f"the standalone worker launched {launched}: an audit did not run on it"
    engines = (local["engine"], on_cluster["engine"], submitted["engine"], connected["engine"])
    assert engines == ("reference", "spark", "spark", "spark")
    assert on_cluster["facts"] == local["facts"]
    assert submitted["facts"] == local["facts"]
    assert connected["facts"] == local["facts"]
    verdicts = (on_cluster["verdict"], submitted["verdict"], connected["verdict"], local["verdict"])
    assert verdicts == ("pass",) * 4
