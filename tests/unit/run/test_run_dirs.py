"""Sessions sharing a report dir never delete or write into each other's run directories; the file lock
that guards them (and the shared caches) excludes other processes and dies with its holder; ``chaos run``
writes where ``$CHAOS_REPORT_DIR`` says."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from chaos.cli import cli
from chaos.run.locks import FileLock, LockTimeout, RunDirs, locked

FORK = multiprocessing.get_context("fork")


def _hold(path: str, ready: Any, release: Any) -> None:
    """In a child process: take the lock, say so, hold it until told."""
    with locked(Path(path), timeout_s=10):
        ready.set()
        release.wait(30)


def _claim_and_hold(root: str, name: str, ready: Any, release: Any, out: Any) -> None:
    """In a child process: a session claiming a run dir, writing into it, holding it until told."""
    path = RunDirs(Path(root)).claim(name)
    (path / "mine.txt").write_text(str(os.getpid()))
    out.put(str(path))
    ready.set()
    release.wait(30)


def test_the_lock_excludes_another_process_and_names_it(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "x.lock"
    ready, release = FORK.Event(), FORK.Event()
    child = FORK.Process(target=_hold, args=(str(path), ready, release))
    child.start()
    try:
        assert ready.wait(10)
        lock = FileLock(path)
        assert not lock.try_acquire()
        waited: list[str] = []
        with pytest.raises(LockTimeout, match=rf"x\.lock is still held by process {child.pid} after 0 s"):
            lock.acquire(0.3, waited.append)
        assert waited == [f"process {child.pid}"]
        release.set()
        lock.acquire(10)  # free once the child lets go
        assert lock.held
        lock.release()
    finally:
        release.set()
        child.join(10)


def test_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    ready, release = FORK.Event(), FORK.Event()
    child = FORK.Process(target=_hold, args=(str(path), ready, release))
    child.start()
    assert ready.wait(10)
    assert child.pid is not None
    os.kill(child.pid, signal.SIGKILL)
    child.join(10)
    started = time.monotonic()
    with locked(path, timeout_s=10):
        assert time.monotonic() - started < 5  # at once, not after the timeout
    assert path.exists()  # lock files stay: deleting one could let two holders in


def test_two_locks_in_one_process_exclude_each_other(tmp_path: Path) -> None:
    first, second = FileLock(tmp_path / "x.lock"), FileLock(tmp_path / "x.lock")
    assert first.try_acquire()
    assert not second.try_acquire()
    first.release()
    assert second.try_acquire()
    second.release()


def test_concurrent_sessions_get_their_own_directories(tmp_path: Path) -> None:
    root = tmp_path / "tests"
    a, b = RunDirs(root), RunDirs(root)
    paths: dict[str, Path] = {}

    def session(name: str, dirs: RunDirs) -> None:
        paths[name] = dirs.claim("test_x.py_test_case")
        (paths[name] / "mine.txt").write_text(name)

    threads = [threading.Thread(target=session, args=(n, d)) for n, d in (("a", a), ("b", b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(p.name for p in paths.values()) == ["test_x.py_test_case", "test_x.py_test_case~2"]
    # a third session while both live: neither is touched
    c = RunDirs(root)
    assert c.claim("test_x.py_test_case") == root / "test_x.py_test_case~3"
    for name, path in paths.items():
        assert (path / "mine.txt").read_text() == name

    # a ended: the next session replaces a's run and prunes c's old ~3, never b's live one
    a.release()
    c.release()
    d = RunDirs(root)
    assert d.claim("test_x.py_test_case") == paths["a"]
    assert list(paths["a"].iterdir()) == []
    assert (paths["b"] / "mine.txt").read_text() == "b"
    assert not (root / "test_x.py_test_case~3").exists()
    b.release()
    d.release()


def test_a_session_running_a_test_again_replaces_only_its_own_run(tmp_path: Path) -> None:
    dirs = RunDirs(tmp_path)
    first = dirs.claim("t")
    (first / "old.txt").write_text("x")
    assert dirs.claim("t") == first
    assert list(first.iterdir()) == []
    assert dirs.claim("u") == tmp_path / "u"
    dirs.release()


def test_a_session_in_another_process_is_never_deleted(tmp_path: Path) -> None:
    root = tmp_path / "tests"
    ready, release, out = FORK.Event(), FORK.Event(), FORK.Queue()
    child = FORK.Process(target=_claim_and_hold, args=(str(root), "t", ready, release, out))
    child.start()
    try:
        assert ready.wait(10)
        theirs = Path(out.get(timeout=10))
        ours = RunDirs(root)
        assert ours.claim("t") == root / "t~2"
        assert (theirs / "mine.txt").read_text() == str(child.pid)
        ours.release()
    finally:
        release.set()
        child.join(10)
    # the child has exited: its directory is now a finished run, replaced by the next session
    later = RunDirs(root)
    assert later.claim("t") == theirs
    assert not (theirs / "mine.txt").exists()
    assert not (root / "t~2").exists()  # pruned: its session ended too
    later.release()


_SLOW_TEST = """
import os, time
from pathlib import Path

def test_case(run_dir):
    (run_dir / "mine.txt").write_text(str(os.getpid()))
    Path(os.environ["STARTED"]).joinpath(str(os.getpid())).touch()
    deadline = time.monotonic() + 60
    while len(os.listdir(os.environ["STARTED"])) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    assert (run_dir / "mine.txt").read_text() == str(os.getpid())
    print(f"RUN_DIR={run_dir}")
"""


def test_two_pytest_sessions_with_one_report_dir_keep_both_runs(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """The plugin's ``run_dir``: two sessions of the same test at once, each finds its own run intact."""
    pytester.makepyfile(test_slow=_SLOW_TEST)
    started = tmp_path / "started"
    started.mkdir()
    reports = tmp_path / "reports"
    env = {**os.environ, "STARTED": str(started), "CHAOS_REPORT_DIR": str(reports)}
    command = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "test_slow.py"]
    sessions = [
        subprocess.Popen(command, cwd=pytester.path, env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [s.communicate(timeout=120)[0] for s in sessions]
    assert [s.returncode for s in sessions] == [0, 0], outputs
    run_dirs = sorted(
        line.split("=", 1)[1] for out in outputs for line in out.splitlines() if "RUN_DIR=" in line
    )
    assert run_dirs == [
        str(reports / "tests" / "test_slow.py_test_case"),
        str(reports / "tests" / "test_slow.py_test_case~2"),
    ]
    pids = {Path(d).joinpath("mine.txt").read_text() for d in run_dirs}
    assert len(pids) == 2  # each directory still holds its own session's file


def test_chaos_run_writes_under_chaos_report_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    def main(args: list[str]) -> int:
        seen.append(args)
        return 0

    monkeypatch.setattr(pytest, "main", main)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CHAOS_REPORT_DIR", str(tmp_path / "elsewhere"))
    result = CliRunner().invoke(cli, ["run", "PB1", "--variant", "vulnerable"])
    assert result.exit_code == 0, result.output
    (args,) = seen
    assert args[args.index("--chaos-report-dir") + 1] == str(tmp_path / "elsewhere")
