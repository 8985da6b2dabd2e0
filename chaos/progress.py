"""Terminal output: long steps (image builds, downloads) logged to a file behind a live one-line status, and
plain lines for the commands (:func:`say`)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from rich.console import Console

from chaos.errors import ImageBuildFailed

console = Console(stderr=True)
_plain = Console(soft_wrap=True)  # paths printed whole, never broken across lines


def say(text: str, style: str | None = None) -> None:
    """Print plain text to stdout, as given (gate output holds ``[producer.settings]``, which is not rich
    markup)."""
    _plain.print(text, style=style, markup=False, highlight=False, soft_wrap=True)


_TAIL_LINES = 30
RUN_TIMEOUT_S: Final = 3600.0
"""How long one logged command (debootstrap, mvn, go) may run before it is killed (cold, on a slow mirror:
minutes; an hour means it hangs)."""
EXIT_GRACE_S: Final = 30.0
"""How long a command may take to exit once its output has ended."""


@contextmanager
def step(title: str) -> Iterator[None]:
    """Announce a step, and its duration when it ends."""
    started = time.monotonic()
    console.print(f"[bold]→ {title}[/bold]")
    yield
    console.print(f"  [green]done[/green] in {time.monotonic() - started:.1f} s")


def follow(lines: Iterable[str], log_path: Path, title: str) -> deque[str]:
    """Write ``lines`` to ``log_path`` while showing the latest one; return the last lines."""
    tail: deque[str] = deque(maxlen=_TAIL_LINES)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("w", encoding="utf-8") as log, console.status(title) as status:
        for line in lines:
            log.write(line if line.endswith("\n") else line + "\n")
            text = line.strip()
            if text:
                tail.append(text)
                status.update(f"{title}: [dim]{text[:100]}[/dim]")
    return tail


def run_logged(
    cmd: list[str],
    log_path: Path,
    title: str,
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float = RUN_TIMEOUT_S,
) -> None:
    """Run ``cmd`` with its output logged; raise ImageBuildFailed with the output's tail on failure, and
    when it has not finished within ``timeout_s``. A command that times out, or is interrupted (Ctrl-C),
    is killed with every process it started (it runs in a session of its own)."""
    expired = threading.Event()
    with subprocess.Popen(
        cmd,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,
    ) as proc:

        def expire() -> None:
            expired.set()
            _kill_session(proc)

        watchdog = threading.Timer(timeout_s, expire)
        watchdog.daemon = True
        watchdog.start()
        try:
            assert proc.stdout is not None
            tail = follow(proc.stdout, log_path, title)
            code = proc.wait(EXIT_GRACE_S)
        except subprocess.TimeoutExpired:
            _kill_session(proc)
            raise ImageBuildFailed(
                f"{title}: its output ended but it did not exit within {EXIT_GRACE_S:.0f} s; killed it: "
                f"{' '.join(cmd)}\n  full log: {log_path}"
            ) from None
        except BaseException:  # Ctrl-C, a log write error: leave no process behind
            _kill_session(proc)
            raise
        finally:
            watchdog.cancel()
    if code == 0:
        return
    shown = "\n    ".join(tail)
    if expired.is_set():
        raise ImageBuildFailed(
            f"{title} did not finish within {timeout_s:.0f} s; killed it: {' '.join(cmd)}\n    {shown}\n"
            f"  full log: {log_path}\n  fix: check the network (mirrors, Maven Central) and retry"
        )
    raise ImageBuildFailed(
        f"{title} failed (exit {code}): {' '.join(cmd)}\n    {shown}\n  full log: {log_path}"
    )


def _kill_session(proc: subprocess.Popen[str]) -> None:
    """SIGKILL ``proc`` and every process of its session (it was started with ``start_new_session``)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
