"""Entry point of a :class:`~chaos.workload.consumer.ProcessMember` child process.

Reads one :func:`~chaos.workload.common.child_payload` line from stdin (the run's context and the
:class:`MemberSpec`), runs the member, and writes every event as one JSON line to stdout (written and
flushed per event, so a SIGKILL keeps everything written before it). SIGTERM closes the consumer gracefully.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from types import FrameType

from chaos.run.events import Event
from chaos.workload.common import Sink, read_child_payload
from chaos.workload.consumer import MemberSpec, run_member


def stop_on_sigterm() -> threading.Event:
    """An event set by SIGTERM (the parent's graceful stop)."""
    stop = threading.Event()

    def on_term(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_term)
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


def main() -> int:
    context, spec = read_child_payload(sys.stdin.readline(), pipe_sink())
    stop = stop_on_sigterm()
    run_member(context, MemberSpec.from_data(spec), stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
