"""A SparkSession with the Kafka connector on its classpath."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from chaos.audit.class_archive import archive_options
from chaos.audit.connector import ensure_connector_jars
from chaos.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
SCENARIO_MASTER = "local[2]"
"""The master a scenario run's audit uses unless told otherwise (the pytest plugin, ``ScenarioRun``)."""
LOCAL_DRIVER_MEMORY = "2g"
"""The JVM heap of a ``local`` master when none is asked for: its executors share it, and Spark's 1 GB
default ran a deep audit plan out of heap in the unit suite."""
DATAFRAME_DEBUGGING = "spark.python.sql.dataFrameDebugging.enabled"
"""PySpark's capture of each DataFrame call's Python call site; off in the sessions this module builds."""


def session_conf(
    master: str, driver_memory: str | None = None, archive_classes_to: Path | None = None
) -> dict[str, str]:
    """The settings of a session this module builds on ``master`` — and of the warm server
    (:mod:`chaos.audit.warm`), whose JVM is a local master's too. See :func:`spark_session`."""
    conf: dict[str, str] = {}
    if driver_memory is None and master.startswith("local"):
        driver_memory = LOCAL_DRIVER_MEMORY
    if driver_memory is not None:
        conf["spark.driver.memory"] = driver_memory
    if master.startswith("local"):
        # one machine: compressing shuffle files, spills and cached columns costs CPU and saves no
        # network; the throughput collector suits a batch job (measured: docs/audit.md, "Benchmark")
        for key in ("spark.shuffle.compress", "spark.shuffle.spill.compress",
                    "spark.sql.inMemoryColumnarStorage.compressed"):  # fmt: skip
            conf[key] = "false"
        # small input splits: the audit's map-side hash aggregation holds an entry per value of its split,
        # and a well-compressed log file read in two splits made those maps spill (10M records: 3.0 GB)
        conf["spark.sql.files.minPartitionNum"] = "16"
        conf["spark.sql.files.openCostInBytes"] = str(1 << 20)
        java_options = ["-XX:+UseParallelGC", *archive_options(archive_classes_to)]
        conf["spark.driver.extraJavaOptions"] = " ".join(java_options)
    conf |= {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "16",
        # the audit's plan is deep: its full text (built for every query's listener event) ran a 1 GB
        # driver out of heap in the unit suite's biggest job; 1 MB of it is plenty to read
        "spark.sql.maxPlanStringLength": str(1 << 20),
        # PySpark 4 wraps every DataFrame and Column call to send its Python call site to the JVM (for
        # error messages): five py4j round trips each, 55 % of a small audit's ~26,000 and a fifth of its
        # time (docs/audit.md, "Per-run cost"); the audit's errors name their part without it
        DATAFRAME_DEBUGGING: "false",
        # one session audits run after run (a pytest session, a gate): the status store keeps every
        # query's plan text and metrics, 1000 queries by default — hundreds of MB of a deep plan's text
        "spark.sql.ui.retainedExecutions": "20",
        "spark.ui.retainedJobs": "100",
        # one audit compiles a few hundred classes (whole-stage code, projections, predicates); with Spark's
        # 100-entry cache every audit of a session compiled ~1,000 classes again (and the JIT recompiled
        # them): 2,000 keeps a session's audits warm (docs/audit.md, "Per-run cost")
        "spark.sql.codegen.cache.maxEntries": "2000",
        "spark.ui.retainedStages": "200",
    }
    return conf | driver_address(master)


def spark_session(
    master: str = DEFAULT_MASTER,
    app_name: str = "chaos-audit",
    *,
    driver_memory: str | None = None,
    archive_classes_to: Path | None = None,
) -> SparkSession:
    """Start (or reuse) a session on ``master``; ``local[*]`` by default, any Spark master URL otherwise.

    ``driver_memory`` (e.g. ``"4g"``) only takes effect when this starts the JVM; in local mode the
    executors run in the driver's JVM, so it bounds the whole job's heap (Spark spills beyond it): default
    :data:`LOCAL_DRIVER_MEMORY` for a local master, Spark's own (or ``spark-submit``'s) otherwise. A local
    master's JVM maps the class archive when one is built (:mod:`chaos.audit.class_archive`);
    ``archive_classes_to`` makes it write one there as it exits instead (that module's training run).
    """
    from pyspark.sql import SparkSession

    if is_connect(master):
        return _connect_session(master)
    jars = ",".join(str(p) for p in ensure_connector_jars())
    builder = SparkSession.builder.master(master).appName(app_name).config("spark.jars", jars)
    for key, value in session_conf(master, driver_memory, archive_classes_to).items():
        builder = builder.config(key, value)
    before = _children()
    try:
        return builder.getOrCreate()
    except BaseException:
        # Interrupted (Ctrl-C, SIGTERM) while the JVM starts: pyspark's gateway JVM ignores SIGINT and only
        # watches its stdin for our exit once it has written its connection file, which pyspark deletes
        # as it gives up — so that JVM would live on. Stop the children this call started.
        for pid in _children() - before:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        raise


CONNECT_SCHEME = "sc://"
"""A master URL with this scheme names a Spark Connect server (PySpark's thin client: no JVM here)."""


SPARK_MASTER_ENV = "CHAOS_SPARK_MASTER"
_MASTER = re.compile(r"local(\[(\*|\d+)(,\d+)?\])?|(spark|sc|k8s|mesos)://\S+|yarn")


def check_master(master: str) -> str:
    """``master`` stripped, when it is a master URL Spark takes (``local[N]``, ``spark://…``, ``sc://…``,
    ``k8s://…``, ``yarn``) and, for ``sc://``, PySpark's Connect client is installed.

    :raises ConfigError: it is not, with what to give instead.
    """
    master = master.strip()
    if not _MASTER.fullmatch(master):
        raise ConfigError(
            f"not a Spark master URL: {master!r}; give local[N], spark://HOST:PORT, sc://HOST:PORT (a Spark "
            "Connect server), k8s://… or yarn"
        )
    if is_connect(master):
        try:
            from pyspark.sql.connect.utils import check_dependencies

            check_dependencies("pyspark.sql.connect")
        except ImportError as exc:
            raise ConfigError(
                f"{master} is a Spark Connect server, and PySpark's Connect client is not installed ({exc}): "
                "pip install 'chaos-harness[connect]'"
            ) from None
    return master


def is_connect_session(spark: object) -> bool:
    """Whether ``spark`` is a Spark Connect client's session (no JVM here: no SparkContext)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def is_connect(master: str) -> bool:
    """Whether ``master`` is a Spark Connect URL (``sc://host:port``), not a master for a JVM driver."""
    return master.startswith(CONNECT_SCHEME)


def _connect_session(url: str) -> SparkSession:
    """A session on the Spark Connect server at ``url`` (its client's packages are checked with the URL:
    :func:`check_master`). The server owns the JVM and its settings (its classpath must hold the Kafka
    connector to read a topic: docs/spark-cluster.md); only the job's shuffle width is set per session. A
    session the URL names (``sc://host:port/;session_id=ID``) is left open when this process stops Spark:
    other processes use it too."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.remote(url)
    session: SparkSession = builder.config("spark.sql.shuffle.partitions", "16").getOrCreate()
    if SESSION_ID_PARAM in url:  # a session the URL names is shared (the warm server's): never released here
        session.release_session_on_close = False  # type: ignore[attr-defined]
    return session


SESSION_ID_PARAM = ";session_id="


DRIVER_HOST_ENV = "CHAOS_SPARK_DRIVER_HOST"
DRIVER_BIND_ENV = "CHAOS_SPARK_DRIVER_BIND_ADDRESS"


def driver_address(master: str) -> dict[str, str]:
    """Where the driver listens and what it tells executors to dial: ``$CHAOS_SPARK_DRIVER_HOST`` /
    ``$CHAOS_SPARK_DRIVER_BIND_ADDRESS`` when set (the bind address defaults to the host); else loopback for
    a ``local`` master (nothing else needs to reach it) and Spark's own default (this machine's name) for a
    cluster's master, whose executors on other hosts must reach the driver."""
    host = os.environ.get(DRIVER_HOST_ENV) or ("127.0.0.1" if master.startswith("local") else None)
    bind = os.environ.get(DRIVER_BIND_ENV) or host
    found = {"spark.driver.host": host, "spark.driver.bindAddress": bind}
    return {key: value for key, value in found.items() if value}


def _children() -> set[int]:
    """The pids of this process's direct children (Linux ``/proc``; empty where there is none)."""
    me, found = os.getpid(), set()
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    stat = Path(entry.path, "stat").read_text()
                except OSError:  # gone meanwhile
                    continue
                if int(stat.rpartition(")")[2].split()[1]) == me:
                    found.add(int(entry.name))
    return found


_starting: threading.Thread | None = None


def start_in_background(master: str) -> None:
    """Start this process's Spark session on ``master`` in a daemon thread, once: its JVM's start overlaps
    whatever the caller does next (a cluster's start). A failed start is left for the first audit, whose
    own ``spark_session`` call then reports it; an audit that comes while it starts waits for it (PySpark
    builds one session at a time). :func:`stop_spark` ends it, started or not."""
    global _starting
    if _starting is not None:
        return

    def start() -> None:
        with contextlib.suppress(Exception):
            spark_session(master)

    _starting = threading.Thread(target=start, name="chaos-spark-start", daemon=True)
    _starting.start()


def await_background_start(timeout_s: float = 300.0) -> None:
    """Wait (at most ``timeout_s``) until :func:`start_in_background`'s start is over, if one runs: what it
    imports must be in ``sys.modules`` before someone snapshots and restores them (pytester does, around
    each in-process test), or the restore drops half of PySpark under the running session."""
    starting = _starting
    if starting is not None and starting.is_alive():
        starting.join(timeout_s)


def jvm_running() -> bool:
    """Whether this process has launched Spark's JVM (without importing PySpark when it never did)."""
    spark_context = getattr(sys.modules.get("pyspark.core.context"), "SparkContext", None)
    return _starting is not None or getattr(spark_context, "_gateway", None) is not None


def stop_spark(timeout_s: float = 10.0) -> None:
    """Stop this process's Spark session and its JVM, and wait (at most ``timeout_s``, then kill) until that
    JVM has exited — a JVM left to notice our exit on its own outlives us by its shutdown's length, and one
    still starting does not watch for our exit at all. A later :func:`spark_session` starts a new JVM."""
    global _starting
    starting, _starting = _starting, None
    context = sys.modules.get("pyspark.core.context")
    spark_context = getattr(context, "SparkContext", None)
    if starting is not None and starting.is_alive():
        # still in getOrCreate: its JVM does not watch its stdin for our exit yet
        for pid in _children():
            if _is_spark_submit(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        starting.join(timeout_s)
    _stop_connect_session()
    if spark_context is None:
        return
    gateway = spark_context._gateway
    session_module = sys.modules.get("pyspark.sql.session")
    session = getattr(getattr(session_module, "SparkSession", None), "_instantiatedSession", None)
    active = spark_context._active_spark_context
    for stoppable in (session, active):  # the SQL session first: it clears its own singletons too
        if stoppable is not None:
            with contextlib.suppress(Exception):
                stoppable.stop()
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    with contextlib.suppress(Exception):
        gateway.shutdown()
    spark_context._gateway = None
    spark_context._jvm = None
    if proc is None:  # a JVM this process did not launch (PYSPARK_GATEWAY_PORT): not ours to stop
        return
    with contextlib.suppress(OSError):
        proc.stdin.close()  # the gateway JVM exits at its stdin's end
    try:
        proc.wait(timeout_s)
    except Exception:
        proc.kill()
        proc.wait(timeout_s)


def _stop_connect_session() -> None:
    """Release this process's Spark Connect session, if it opened one (the server runs on)."""
    module = sys.modules.get("pyspark.sql.connect.session")
    remote = getattr(module, "SparkSession", None)
    session = getattr(remote, "_default_session", None)
    if session is not None:
        with contextlib.suppress(Exception):  # a server that went away has nothing left to release
            session.stop()


def _is_spark_submit(pid: int) -> bool:
    command = command_line(pid)
    return b"pyspark-shell" in command or b"spark-submit" in command


def command_line(pid: int) -> bytes:
    """Process ``pid``'s command line, its arguments NUL-separated (Linux ``/proc``); empty when it is gone
    (or a zombie)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
