"""Entry point of a :class:`~chaos.workload.consumer.ProcessMember` child process, and what every child
entry point shares (:func:`serve`).

Reads one :func:`~chaos.workload.common.child_payload` line from stdin (the run's context and the
:class:`MemberSpec`), runs the member, and writes every event as one JSON line to stdout (written and
flushed per event, so a SIGKILL keeps everything written before it). SIGTERM closes the consumer gracefully;
the parent's death (even a SIGKILL of the runner) kills it (:func:`die_with_parent`).
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, Final

from chaos.run.context import RunContext
from chaos.run.events import Event
from chaos.workload.common import Sink, read_child_payload
from chaos.workload.consumer import PARENT_PID_ENV, MemberSpec, run_member

_PR_SET_PDEATHSIG: Final = 1  # <linux/prctl.h>


def die_with_parent() -> None:
    """Have the kernel SIGKILL this process when its parent dies (Linux; elsewhere this does nothing).

    Without it a child whose runner was killed -9 runs on until its own duration ends. If the parent named
    by :data:`PARENT_PID_ENV` died before this call (this process was already handed to another parent),
    it dies now. Linux sends the signal when the parent *thread* that started the child ends: start
    children from a thread that outlives them (the harness starts them from the main thread).
    """
    if not sys.platform.startswith("linux"):
        return
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    if prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl(PR_SET_PDEATHSIG): {os.strerror(errno)}")
    expected = os.environ.get(PARENT_PID_ENV)
    if expected is not None and expected != str(os.getppid()):
        os.kill(os.getpid(), signal.SIGKILL)


def stop_on_sigterm() -> threading.Event:
    """A child's signal wiring: the returned event is set by SIGTERM (the parent's graceful stop), and the
    parent's death kills this process (:func:`die_with_parent`). Every child entry point calls it; call it
    from the main thread.

    The kernel hands a process's signal to any of its threads that does not block it — an OpenBLAS worker
    numpy started, say, and most often so when the process was frozen (SIGSTOP) as the signal came.
    Python then runs the handler in the main thread only when that thread next runs Python code, which a
    main thread blocked in a long ``stop.wait`` does not: the graceful stop waited for the wait's end
    (measured: 11 of 40 frozen children sent SIGTERM then SIGCONT had not exited 3 s later). So the
    C-level handler's wake-up byte, written in whichever thread took the signal, also sets the event
    from a watcher thread.
    """
    die_with_parent()
    stop = threading.Event()

    def on_term(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_term)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)

    def watch() -> None:
        while chunk := os.read(wake_read, 64):
            if signal.SIGTERM in chunk:
                stop.set()

    threading.Thread(target=watch, daemon=True, name="sigterm-watch").start()
    return stop


def pipe_sink() -> Sink:
    """A sink writing each event as one JSON line to stdout, flushed per event (survives a SIGKILL)."""
    out = sys.stdout.buffer
    lock = threading.Lock()

    def sink(event: Event) -> None:
        line = json.dumps(event.to_row(), separators=(",", ":")).encode() + b"\n"
        with lock:
            out.write(line)
            out.flush()

    return sink


ChildRun = Callable[[RunContext, dict[str, Any], threading.Event], object]
"""A child worker's body: the run's context (events go to the pipe), its spec data, the stop event."""


def serve(run: ChildRun) -> int:
    """A child entry point's ``main()``: read the payload from stdin, wire the signals
    (:func:`stop_on_sigterm`), run the worker with its events on stdout (:func:`pipe_sink`); exit status 0."""
    context, spec = read_child_payload(sys.stdin.readline(), pipe_sink())
    stop = stop_on_sigterm()
    run(context, spec, stop)
    return 0


def main() -> int:
    return serve(lambda context, spec, stop: run_member(context, MemberSpec.from_data(spec), stop))


if __name__ == "__main__":
    sys.exit(main())
