"""Build the Spark driver's class archive (:mod:`chaos.audit.class_archive`): a training process starts a
local session with ``-XX:ArchiveClassesAtExit`` and audits a small recorded run; its JVM writes the classes
it loaded as it exits. The archive is moved into place only whole and only once a JVM with the training's
class path maps it under ``-Xshare:on`` — a truncated archive crashes a JDK 17 JVM that maps it rather
than being skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from chaos.audit.class_archive import ARCHIVE_ENV, archive_path, archive_problem, enabled
from chaos.errors import AuditError

BUILD_TIMEOUT_S: Final = 300.0
"""How long the training process may take (80–86 s here: a JVM's start, one audit, writing ~170 MB)."""
KEEP_ARCHIVES: Final = 3
"""Archives kept in the cache, the newest first: one per JDK, PySpark and set of jar files in use."""
TRAINING_VALUES: Final = 200
_CLASSPATH: Final = "classpath="  # the training process's last line: its JVM's class path


def ensure_class_archive(
    timeout_s: float = BUILD_TIMEOUT_S, on_build: Callable[[], object] | None = None
) -> Path | None:
    """The archive's path, built first if missing (a training process; ``on_build`` is called before it
    starts); ``None`` when turned off.

    :raises AuditError: the training process failed or wrote no archive (Spark works without one).
    """
    if not enabled():
        return None
    path = archive_path()
    if path.is_file():
        return path
    if on_build is not None:
        on_build()
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
    _prune(path)
    return path


def _prune(kept: Path) -> None:
    """Keep ``kept`` and the :data:`KEEP_ARCHIVES` - 1 newest other archives (~170 MB each: another JDK,
    another PySpark, a venv whose jars pip unpacked anew); delete the rest."""
    others = [archive for archive in kept.parent.glob("spark-*.jsa") if archive != kept]
    others.sort(key=lambda a: a.stat().st_mtime, reverse=True)
    for archive in others[KEEP_ARCHIVES - 1 :]:
        archive.unlink(missing_ok=True)


def record_training_run(run_dir: Path, run_id: str, values: int = TRAINING_VALUES) -> None:
    """A small clean run through the code paths an audit takes: ``values`` sends acked on two partitions, a
    fault injected and healed, a consumer's assignment and deliveries, the final drain of the topic (about
    five history events a value)."""
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

    topic, n, levels = "t", values, ("read_uncommitted", "read_committed")
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
        record_training_run(run_dir, "training")
        spark = spark_session(SCENARIO_MASTER, archive_classes_to=out)
        facts = audit_facts(run_dir, engine="spark", master=SCENARIO_MASTER)
        if facts.problems or facts.totals.sends != TRAINING_VALUES:
            raise AuditError(f"the training audit did not see a clean run: {facts.problems}, {facts.totals}")
        jvm = spark._jvm
        if jvm is None:
            raise AuditError("the training session has no JVM of its own (a Spark Connect session?)")
        classpath = jvm.java.lang.System.getProperty("java.class.path")
        stop_spark(timeout_s=BUILD_TIMEOUT_S)  # the JVM writes the archive as it exits
    print(f"{_CLASSPATH}{classpath}")


if __name__ == "__main__":
    _train(Path(sys.argv[1]))
