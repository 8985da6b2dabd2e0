"""chaos.run.interrupts: a SIGTERM caught by another thread interrupts the main thread's sleep at once."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent(
    """
    import signal, sys, threading, time
    from chaos.run.interrupts import MainThreadKicker

    def to_interrupt(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, to_interrupt)
    kicker = MainThreadKicker()
    installed = kicker.install() if sys.argv[1] == "kick" else False

    def worker():  # the signal lands on this thread, as a process-directed one often does
        time.sleep(0.3)
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)

    threading.Thread(target=worker, daemon=True).start()
    started = time.monotonic()
    try:
        time.sleep(6)
        print("slept", installed, round(time.monotonic() - started, 2))
    except KeyboardInterrupt:
        print("interrupted", installed, round(time.monotonic() - started, 2))
    kicker.uninstall()
    """
)


def _run(mode: str) -> tuple[str, bool, float]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, mode], capture_output=True, text=True, timeout=30, check=True
    )
    what, installed, seconds = done.stdout.split()
    return what, installed == "True", float(seconds)


def test_a_signal_caught_by_another_thread_interrupts_the_main_threads_sleep_at_once() -> None:
    what, installed, seconds = _run("kick")
    assert installed
    assert what == "interrupted"
    assert seconds < 2.0


def test_without_the_kicker_the_main_thread_sleeps_on_until_its_call_returns() -> None:
    """What the kicker is for: CPython runs the handler only when the main thread's sleep returns."""
    what, installed, seconds = _run("none")
    assert not installed
    assert what == "interrupted"
    assert seconds == pytest.approx(6.0, abs=1.0)


def test_install_leaves_a_wakeup_fd_that_is_someone_elses_alone() -> None:
    code = textwrap.dedent(
        """
        import os, signal
        from chaos.run.interrupts import MainThreadKicker
        r, w = os.pipe(); os.set_blocking(w, False)
        signal.set_wakeup_fd(w)
        print(MainThreadKicker().install(), signal.set_wakeup_fd(-1) == w)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True
    )
    assert done.stdout.split() == ["False", "True"]
