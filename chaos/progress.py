"""Long steps (image builds, downloads): log everything to a file, show a live one-line status."""

from __future__ import annotations

import subprocess
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console

from chaos.errors import ImageBuildFailed

console = Console(stderr=True)
_TAIL_LINES = 30


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
) -> None:
    """Run ``cmd`` with its output logged; raise ImageBuildFailed with the output's tail on failure."""
    with subprocess.Popen(
        cmd,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    ) as proc:
        assert proc.stdout is not None
        tail = follow(proc.stdout, log_path, title)
        code = proc.wait()
    if code != 0:
        shown = "\n    ".join(tail)
        raise ImageBuildFailed(
            f"{title} failed (exit {code}): {' '.join(cmd)}\n    {shown}\n  full log: {log_path}"
        )
