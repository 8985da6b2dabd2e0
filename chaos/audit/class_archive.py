"""A class-data-sharing archive of a local Spark driver's classes (HotSpot's dynamic AppCDS archive).

A local master's JVM loads thousands of classes from PySpark's jars as it starts and as its first audit
plans; with those classes mapped from an archive (``-XX:SharedArchiveFile``) a process that starts Spark
and audits one run — a gate's ``chaos run``, ``chaos audit``, a pytest session — is done about 8 s
sooner (docs/audit.md, "A fresh JVM's first audit"). :func:`ensure_class_archive` (``chaos jars ensure``,
so ``make provision``) builds it once per JDK, PySpark and connector jars: a training process audits a
small recorded run with ``-XX:ArchiveClassesAtExit``. :func:`archive_options` gives a local master's JVM
the archive when it exists; a JVM that finds it does not match its own classes (another JDK build, another
classpath) runs without it. ``CHAOS_SPARK_CLASS_ARCHIVE=0`` turns both off.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Final

from chaos.audit.connector import connector_jars, pyspark_version
from chaos.audit.java import java_command
from chaos.errors import AuditError
from chaos.paths import cache_dir

ARCHIVE_ENV: Final = "CHAOS_SPARK_CLASS_ARCHIVE"
"""``0`` (or ``off``/``false``/``no``): neither build nor use the archive."""
BUILD_TIMEOUT_S: Final = 300.0
"""How long the training process may take (≈ 60 s here: a JVM's start, one audit, writing ~170 MB)."""
_TRAINING_VALUES: Final = 200
_CLASSPATH: Final = "classpath="  # the training process's last line: its JVM's class path


def enabled() -> bool:
    """Whether the archive is built and used (``$CHAOS_SPARK_CLASS_ARCHIVE`` is not ``0``/``off``)."""
    return os.environ.get(ARCHIVE_ENV, "").strip().lower() not in {"0", "off", "false", "no"}


def archive_path() -> Path:
    """Where the archive for this JDK, PySpark and connector jars lives (existing or not)."""
    return cache_dir() / "jvm" / f"spark-{fingerprint()}.jsa"


def fingerprint() -> str:
    """What the archive's classes depend on: the JDK (its binary's real path and ``release`` file),
    PySpark's version and jars, and the connector jars; 16 hex digits."""
    import pyspark

    java = Path(os.path.realpath(java_command()))
    release = java.parent.parent / "release"
    jdk = release.read_text() if release.is_file() else str(java.stat().st_mtime_ns)
    spark_jars = sorted(p.name for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar"))
    parts = [str(java), jdk, pyspark_version(), *spark_jars, *sorted(str(j) for j in connector_jars())]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def archive_options(dump_to: Path | None = None) -> list[str]:
    """The driver JVM's options for the archive: write one at exit to ``dump_to`` (the training run), else
    map the built one when it exists. Empty when turned off, or when a path has whitespace (Spark splits
    ``extraJavaOptions`` at it)."""
    if not enabled():
        return []
    if dump_to is not None:
        return [] if _has_space(dump_to) else [f"-XX:ArchiveClassesAtExit={dump_to}"]
    try:
        path = archive_path()
    except Exception:  # no java (the audit says so itself), an unreadable cache: start without it
        return []
    if not path.is_file() or _has_space(path):
        return []
    # a mismatch (JDK updated in place, another classpath) only costs the speed-up: no warning for it
    return [f"-XX:SharedArchiveFile={path}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]


def ensure_class_archive(timeout_s: float = BUILD_TIMEOUT_S) -> Path | None:
    """The archive's path, built first if missing (a training process); ``None`` when turned off.

    :raises AuditError: the training process failed or wrote no archive (Spark works without one).
    """
    if not enabled():
        return None
    path = archive_path()
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    try:
        try:
            done = subprocess.run(
                [sys.executable, "-m", __name__, str(partial)],
                capture_output=True,
                text=True,
                timeout=timeout_s,
            )
        except subprocess.TimeoutExpired as exc:
            raise AuditError(
                f"building the Spark class archive took over {timeout_s:.0f} s; Spark runs without it "
                f"(set {ARCHIVE_ENV}=0 to stop trying)"
            ) from exc
        lines = done.stdout.strip().splitlines()
        classpath = lines[-1].removeprefix(_CLASSPATH) if lines and lines[-1].startswith(_CLASSPATH) else ""
        if done.returncode != 0 or not classpath or not partial.is_file():
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
            raise AuditError(
                f"building the Spark class archive failed (exit {done.returncode}); Spark runs without it "
                f"(set {ARCHIVE_ENV}=0 to stop trying):\n{tail}"
            )
        problem = archive_problem(partial, classpath)
        if problem:
            raise AuditError(
                f"the Spark class archive just built does not load, so it is not kept: {problem}"
            )
        os.replace(partial, path)  # whole or not at all: a truncated archive crashes the JVM that maps it
    finally:
        partial.unlink(missing_ok=True)
    for stale in path.parent.glob("spark-*.jsa"):
        if stale != path:  # another JDK's or PySpark's: ~170 MB each
            stale.unlink(missing_ok=True)
    return path


def archive_problem(archive: Path, classpath: str) -> str | None:
    """Why a JVM with this ``classpath`` cannot map ``archive`` (``-Xshare:on`` makes that an error, and
    a damaged file crashes it), or ``None`` when it can."""
    with tempfile.TemporaryDirectory(prefix="chaos-class-archive-") as cwd:  # a crash's hs_err file
        done = subprocess.run(
            [java_command(), "-Xshare:on", f"-XX:SharedArchiveFile={archive}", "-cp", classpath, "-version"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=cwd,
        )
    if done.returncode == 0:
        return None
    lines = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("#")]
    return f"java -Xshare:on exited {done.returncode}: {' '.join(lines[-2:])}"


def _has_space(path: Path) -> bool:
    return any(c.isspace() for c in str(path))


def _record_training_run(run_dir: Path, run_id: str) -> None:
    """A small clean run through the code paths an audit takes: sends acked on two partitions, a fault
    injected and healed, a consumer's assignment and deliveries, the final drain of the topic."""
    from chaos.history import Recorder
    from chaos.run.events import (
        Delivery,
        DrainEnd,
        DrainRead,
        Event,
        FaultEvent,
        PartitionOffset,
        Rebalance,
        SendInvoke,
        SendOutcome,
        value_id_for,
    )

    def at(kind: type[Event], process: str, mono: float, **fields: Any) -> Event:
        return kind(run_id=run_id, process=process, ts=1_700_000_000.0 + mono, mono=mono, **fields)

    topic, n, levels = "t", _TRAINING_VALUES, ("read_uncommitted", "read_committed")
    ends = {0: 0, 1: 0}
    with Recorder(run_dir, run_id) as history:
        assigned = tuple(PartitionOffset(topic=topic, partition=p) for p in ends)
        history.record(at(Rebalance, "c", 0.0, action="assign", group="g", member="m1", partitions=assigned))
        for seq in range(n):
            mono, vid, partition = 0.01 * (seq + 1), value_id_for(run_id, "p", seq), seq % 2
            offset = ends[partition]
            ends[partition] += 1
            if seq in (n // 3, 2 * n // 3):
                action = "inject" if seq == n // 3 else "heal"
                history.record(
                    at(FaultEvent, "nemesis", mono, action=action, fault="network_cut", target="b1")
                )
            history.record(at(SendInvoke, "p", mono, value_id=vid, producer="p", seq=seq, topic=topic))
            history.record(
                at(SendOutcome, "p", mono + 0.005, value_id=vid, outcome="ok", partition=partition,
                   offset=offset, latency_ms=5.0)
            )  # fmt: skip
            history.record(
                at(Delivery, "c", mono + 0.008, group="g", member="m1", topic=topic, partition=partition,
                   offset=offset, value_id=vid)
            )  # fmt: skip
        drained = 0.01 * n + 1.0
        for seq in range(n):
            for isolation in levels:
                history.record(
                    at(DrainRead, "d", drained, isolation=isolation, topic=topic, partition=seq % 2,
                       offset=seq // 2, value_id=value_id_for(run_id, "p", seq))
                )  # fmt: skip
        for partition, end in ends.items():
            for isolation in levels:
                history.record(
                    at(DrainEnd, "d", drained + 0.1, isolation=isolation, topic=topic, partition=partition,
                       outcome="ok", low_offset=0, high_offset=end)
                )  # fmt: skip


def _train(out: Path) -> None:
    """Start a local session that writes its classes to ``out`` at exit, audit a small run, stop."""
    from chaos.audit.run import audit_facts
    from chaos.audit.spark import SCENARIO_MASTER, spark_session, stop_spark

    with tempfile.TemporaryDirectory(prefix="chaos-class-archive-") as tmp:
        run_dir = Path(tmp) / "training"
        _record_training_run(run_dir, "training")
        spark = spark_session(SCENARIO_MASTER, archive_classes_to=out)
        facts = audit_facts(run_dir, engine="spark", master=SCENARIO_MASTER)
        if facts.problems or facts.totals.sends != _TRAINING_VALUES:
            raise AuditError(f"the training audit did not see a clean run: {facts.problems}, {facts.totals}")
        jvm = spark._jvm
        if jvm is None:
            raise AuditError("the training session has no JVM of its own (a Spark Connect session?)")
        classpath = jvm.java.lang.System.getProperty("java.class.path")
        stop_spark(timeout_s=BUILD_TIMEOUT_S)  # the JVM writes the archive as it exits
    print(f"{_CLASSPATH}{classpath}")


if __name__ == "__main__":
    _train(Path(sys.argv[1]))
