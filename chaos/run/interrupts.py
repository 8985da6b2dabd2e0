"""Ctrl-C and SIGTERM interrupt the main thread at once, whichever thread the kernel hands them to.

A process-directed signal goes to any thread that does not block it — in a run, often one of
librdkafka's or the workers' threads. CPython's C handler then only sets a flag: the main thread runs the
Python handler (KeyboardInterrupt) at its next check, and a main thread in ``time.sleep(10)`` or a
``threading.Event.wait`` checks after that call returns. Measured: a SIGTERM 0.2 s into a scenario's
``time.sleep(10)`` reached the run's teardown 11 s later, and the session missed its 15 s exit bound.

:class:`MainThreadKicker` fixes that with the interpreter's own mechanism: a wakeup fd
(:func:`signal.set_wakeup_fd`) receives a byte for every signal caught, in any thread, and a daemon
thread that reads it sends :data:`KICK` — a real-time signal with a no-op handler — to the main thread.
The main thread's blocking call returns with EINTR, CPython runs the handlers of every signal that
arrived (the SIGINT/SIGTERM one raises), and an uninterrupted call resumes (PEP 475) when there was
nothing to raise.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from types import FrameType
from typing import Final

KICK: Final[int] = signal.SIGRTMIN + 7
"""The signal that wakes the main thread; its handler does nothing."""
INTERRUPTS: Final = frozenset({signal.SIGINT, signal.SIGTERM})


def _nothing(signum: int, frame: FrameType | None) -> None:
    """KICK's handler: the wake-up itself is the point."""


class MainThreadKicker:
    """Forward every SIGINT / SIGTERM caught by another thread to the main thread, as a wake-up.

    :meth:`install` does nothing (and returns ``False``) outside the main thread, or when a wakeup fd
    or a KICK handler is already someone else's (asyncio's loop, for one)."""

    def __init__(self) -> None:
        self._read = self._write = -1
        self._thread: threading.Thread | None = None

    def install(self) -> bool:
        if threading.current_thread() is not threading.main_thread() or self._thread is not None:
            return False
        if signal.getsignal(KICK) is not signal.SIG_DFL:
            return False
        read, write = os.pipe()
        os.set_blocking(write, False)
        try:
            previous = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        except (ValueError, OSError):
            os.close(read)
            os.close(write)
            return False
        if previous != -1:  # someone else's: give it back
            signal.set_wakeup_fd(previous)
            os.close(read)
            os.close(write)
            return False
        self._read, self._write = read, write
        signal.signal(KICK, _nothing)
        main = threading.main_thread().ident
        assert main is not None
        self._thread = threading.Thread(target=self._forward, args=(main,), name="chaos-kicker", daemon=True)
        self._thread.start()
        return True

    def _forward(self, main: int) -> None:
        while True:
            try:
                caught = os.read(self._read, 64)
            except OSError:
                return
            if not caught:  # the write end closed: uninstalled
                return
            if any(signum in INTERRUPTS for signum in caught):
                with contextlib.suppress(ProcessLookupError, OSError):
                    signal.pthread_kill(main, KICK)

    def uninstall(self) -> None:
        """Undo :meth:`install` (main thread only; a no-op when it did nothing)."""
        if self._thread is None or threading.current_thread() is not threading.main_thread():
            return
        with contextlib.suppress(ValueError):
            signal.set_wakeup_fd(-1)
        signal.signal(KICK, signal.SIG_DFL)  # install() found it there
        os.close(self._write)  # the forwarder reads EOF and ends
        self._thread.join(timeout=1.0)
        os.close(self._read)
        self._thread = None
        self._read = self._write = -1
