"""Child processes die with the runner: kill -9 the process that started a ChildProcess, the child goes.

Three real processes: this test → a middle process (the "runner") that starts :class:`Sleeper` through
:meth:`ChildProcess.start` → the child (this file run as ``python -m``), which arms itself with
:func:`stop_on_sigterm` as every child entry point does.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from chaos.history import ClientLog
from chaos.workload import ChildProcess
from chaos.workload.consumer import PARENT_PID_ENV

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")

REPO = Path(__file__).resolve().parents[3]
GONE_WITHIN_S = 2.0


class Sleeper(ChildProcess):
    """This file run as a child: arms itself, reports the parent pid it was given, idles until SIGTERM."""

    module = "tests.unit.workload.test_pdeathsig"


MIDDLE = textwrap.dedent(
    """
    import sys, threading, time
    from tests.unit.workload.test_pdeathsig import Sleeper

    told = []
    armed = threading.Event()

    def sink(event):
        told.append(event.message)
        armed.set()

    child = Sleeper("sleeper", "", sink).start()
    if not armed.wait(60):
        sys.exit("the child never reported")
    print(child.pid, told[0], flush=True)
    time.sleep(120)
    """
)


def _gone(pid: int) -> bool:
    """No such process, or only its zombie (whoever inherited it may not reap it at once)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def test_child_dies_within_seconds_of_a_kill_9_of_its_parent() -> None:
    middle = subprocess.Popen(
        [sys.executable, "-c", MIDDLE], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    child_pid = 0
    try:
        assert middle.stdout is not None
        line = middle.stdout.readline()
        assert line, f"the middle process ended early: {middle.communicate(timeout=10)[1]}"
        pid_text, told_parent = line.split()
        child_pid = int(pid_text)
        assert told_parent == str(middle.pid)  # ChildProcess.start names itself as the expected parent
        assert not _gone(child_pid)

        middle.kill()
        middle.wait(10)
        deadline = time.monotonic() + GONE_WITHIN_S
        while not _gone(child_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(child_pid), f"child {child_pid} outlived its killed parent by {GONE_WITHIN_S} s"
    finally:
        if middle.poll() is None:
            middle.kill()
            middle.wait(10)
        if child_pid and not _gone(child_pid):
            os.kill(child_pid, signal.SIGKILL)


def test_a_child_whose_parent_died_before_it_armed_dies_at_once() -> None:
    """The race prctl alone leaves open: the expected parent is already gone (here: never the parent)."""
    code = "from chaos.workload.member_child import die_with_parent; die_with_parent(); print('survived')"
    env = {**os.environ, PARENT_PID_ENV: str(os.getpid() + 999_999)}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, timeout=60)
    assert done.returncode == -signal.SIGKILL
    assert b"survived" not in done.stdout


def test_a_child_of_its_expected_parent_lives_on() -> None:
    code = "from chaos.workload.member_child import die_with_parent; die_with_parent(); print('survived')"
    env = {**os.environ, PARENT_PID_ENV: str(os.getpid())}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"survived\n"


def _child_main() -> int:
    from chaos.workload.member_child import pipe_sink, stop_on_sigterm

    sys.stdin.readline()
    stop = stop_on_sigterm()
    told = os.environ.get(PARENT_PID_ENV, "-")
    pipe_sink()(ClientLog(run_id="run1", process="sleeper", level="info", message=told))
    stop.wait(120.0)
    return 0


if __name__ == "__main__":
    sys.exit(_child_main())
