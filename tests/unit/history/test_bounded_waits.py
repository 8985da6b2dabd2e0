"""Every wait has a bound, and an interrupt is not turned into another error.

- ``progress.run_logged``: a command past its bound is killed with every process it started, and the error
  names it; so is one interrupted (Ctrl-C);
- ``Recorder``: a Ctrl-C during a flush propagates as KeyboardInterrupt with no event lost; ``close()``
  gives up on a stuck flusher thread; a Ctrl-C during ``close()`` still puts the events on disk;
- the Spark audit cancels its jobs past its bound and says so.
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import chaos.history.recorder as recorder_module
import chaos.progress as progress
from chaos.audit.sparkjob import _cancelled_after
from chaos.errors import AuditError, HistoryError, ImageBuildFailed
from chaos.history import Event, Recorder, read_events
from tests.unit.history.test_history_events import RUN, sample_events

# ---- progress.run_logged ------------------------------------------------------------------------------


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _wait_gone(pid: int, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


def _grandchild_pid(log: Path) -> int:
    return int(log.read_text().split()[0])


def test_run_logged_kills_a_command_past_its_bound_with_what_it_started(tmp_path: Path) -> None:
    log = tmp_path / "step.log"
    started = time.monotonic()
    with pytest.raises(ImageBuildFailed) as caught:
        # the background sleep keeps the output pipe open: killing the shell alone would not end the wait
        progress.run_logged(["sh", "-c", "sleep 60 & echo $!; sleep 60"], log, "slow step", timeout_s=1.0)
    assert time.monotonic() - started < 15
    message = str(caught.value)
    assert message.startswith("slow step did not finish within 1 s; killed it: sh -c")
    assert f"full log: {log}" in message
    assert _wait_gone(_grandchild_pid(log))


def test_run_logged_bounds_the_exit_after_the_output_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress, "EXIT_GRACE_S", 0.5)
    started = time.monotonic()
    with pytest.raises(ImageBuildFailed, match=r"its output ended but it did not exit within 0 s; killed"):
        progress.run_logged(["sh", "-c", "exec >&- 2>&-; sleep 60"], tmp_path / "s.log", "mute step")
    assert time.monotonic() - started < 15


def test_run_logged_reports_a_failure_and_passes_a_success(tmp_path: Path) -> None:
    progress.run_logged(["sh", "-c", "echo fine"], tmp_path / "ok.log", "good step")
    assert (tmp_path / "ok.log").read_text() == "fine\n"
    with pytest.raises(ImageBuildFailed, match=r"bad step failed \(exit 3\)") as caught:
        progress.run_logged(["sh", "-c", "echo broken; exit 3"], tmp_path / "bad.log", "bad step")
    assert "broken" in str(caught.value)


def test_run_logged_interrupted_leaves_no_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []

    def interrupted_follow(lines: Any, log_path: Path, title: str) -> Any:
        seen.append(int(next(iter(lines))))
        raise KeyboardInterrupt

    monkeypatch.setattr(progress, "follow", interrupted_follow)
    with pytest.raises(KeyboardInterrupt):
        progress.run_logged(["sh", "-c", "sleep 60 & echo $!; sleep 60"], tmp_path / "i.log", "step")
    assert _wait_gone(seen[0])


# ---- Recorder -----------------------------------------------------------------------------------------


def test_ctrl_c_during_a_flush_propagates_and_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_encode = recorder_module.encode_events

    def encode_interrupted(events: list[Event], first_index: int) -> bytes:
        if threading.current_thread() is threading.main_thread():
            signal.raise_signal(signal.SIGINT)  # Ctrl-C in the middle of the batch
        return real_encode(events, first_index)

    events = sample_events()
    recorder = Recorder(tmp_path, RUN, flush_interval=0.5)
    recorder.record_many(events)
    monkeypatch.setattr(recorder_module, "encode_events", encode_interrupted)
    with pytest.raises(KeyboardInterrupt):
        recorder.flush()
    monkeypatch.undo()
    assert recorder.stats().written == len(events)  # the batch was written whole before the interrupt
    recorder.close()
    assert read_events(tmp_path) == events


def test_close_gives_up_on_a_stuck_flusher(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recorder_module, "FLUSHER_STOP_TIMEOUT_S", 0.3)
    recorder = Recorder(tmp_path, RUN, flush_interval=0.05)
    unstick = threading.Event()
    threading.Timer(10.0, unstick.set).start()  # a regression hangs for 10 s, not forever
    recorder._drain = lambda: unstick.wait(10.0)  # type: ignore[assignment,method-assign]
    time.sleep(0.2)  # the flusher thread is now inside a write that does not return
    started = time.monotonic()
    try:
        with pytest.raises(HistoryError, match=r"history flusher of .* did not stop within 0 s"):
            recorder.close()
        assert time.monotonic() - started < 5
    finally:
        unstick.set()


def test_ctrl_c_during_close_still_writes_the_events(tmp_path: Path) -> None:
    events = sample_events()
    recorder = Recorder(tmp_path, RUN, flush_interval=0.5)
    recorder.record_many(events)  # pending: the flusher's next write is up to 0.5 s away
    thread = recorder._thread
    real_join = thread.join
    joins: list[float | None] = []

    def join_interrupted(timeout: float | None = None) -> None:
        joins.append(timeout)
        if len(joins) == 1:
            raise KeyboardInterrupt
        real_join(timeout)

    thread.join = join_interrupted  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        recorder.close()
    assert joins == [recorder_module.FLUSHER_STOP_TIMEOUT_S] * 2  # every join is bounded
    assert read_events(tmp_path) == events


# ---- the Spark audit's bound --------------------------------------------------------------------------


class FakeSparkContext:
    """The job-tag calls of a SparkContext; a "job" runs until its tag is cancelled."""

    def __init__(self) -> None:
        self.tags: set[str] = set()
        self.cancelled: list[str] = []
        self.cancel_seen = threading.Event()

    @property
    def sparkContext(self) -> FakeSparkContext:  # the session's, as the audit reaches it
        return self

    def addJobTag(self, tag: str) -> None:
        self.tags.add(tag)

    def removeJobTag(self, tag: str) -> None:
        self.tags.discard(tag)

    def cancelJobsWithTag(self, tag: str) -> None:
        self.cancelled.append(tag)
        self.cancel_seen.set()

    def run_job(self, within_s: float) -> None:
        if self.cancel_seen.wait(within_s):
            raise RuntimeError("Job 3 cancelled as part of cancellation of all jobs with tag")


def _audit(sc: FakeSparkContext, timeout_s: float, job_s: float, tags: list[str]) -> None:
    with _cancelled_after(sc, timeout_s):
        tags.extend(sc.tags)
        sc.run_job(within_s=job_s)


def test_spark_jobs_past_the_bound_are_cancelled_and_named() -> None:
    sc = FakeSparkContext()
    tags: list[str] = []
    started = time.monotonic()
    with pytest.raises(AuditError, match=r"Spark audit did not finish within 0 s; its jobs were cancelled"):
        _audit(sc, 0.2, 10.0, tags)
    assert time.monotonic() - started < 5
    assert len(tags) == 1
    assert sc.cancelled[0] == tags[0]
    assert sc.tags == set()


def test_spark_jobs_within_the_bound_run_untouched() -> None:
    sc = FakeSparkContext()
    tags: list[str] = []
    _audit(sc, 10.0, 0.1, tags)
    assert len(tags) == 1
    with pytest.raises(ValueError, match="not a timeout"), _cancelled_after(sc, 10.0):
        raise ValueError("not a timeout")  # other failures pass through as they are
    assert sc.cancelled == []
    assert sc.tags == set()


def test_a_real_spark_job_past_the_bound_is_interrupted(audit_spark: Any) -> None:
    """The tags work on a real session: a job the audit's thread started is interrupted from the timer's."""
    # no overflow (ANSI arithmetic would end it early): minutes of work on 2 cores, never done in 2 s
    endless = audit_spark.range(1 << 40).selectExpr("sum(id % 7) AS s")
    started = time.monotonic()
    with pytest.raises(AuditError, match=r"did not finish within 2 s"), _cancelled_after(audit_spark, 2.0):
        endless.collect()
    assert time.monotonic() - started < 30
    assert audit_spark.range(5).count() == 5  # the session still serves the next audit
