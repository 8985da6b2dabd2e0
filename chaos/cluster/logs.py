"""Container logs saved into a run directory, and read back.

:meth:`KafkaCluster.capture_logs` saves each broker's (and Toxiproxy's) whole log as ``<name>.log.gz``:
a session's cluster is shared by every test, so its log is megabytes of text by the last test, and gzip
keeps all of it in about a tenth of the space. Readers (the report, scenarios that check broker log lines)
go through :func:`log_files` and :func:`read_log_lines`, which also read the plain ``<name>.log`` of runs
saved before.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

LOG_SUFFIX: Final = ".log.gz"
PLAIN_SUFFIX: Final = ".log"
COMPRESS_LEVEL: Final = 6
"""gzip's default 9 takes about twice as long for 4 % less; 6 is what the ``gzip`` tool uses."""


def log_stem(path: Path) -> str:
    """``broker-1`` for ``broker-1.log.gz`` and ``broker-1.log``; any other name unchanged."""
    for suffix in (LOG_SUFFIX, PLAIN_SUFFIX):
        if path.name.endswith(suffix):
            return path.name[: -len(suffix)]
    return path.name


def write_log(directory: Path, stem: str, data: bytes) -> Path:
    """Save ``data`` compressed as ``<directory>/<stem>.log.gz`` (a plain ``<stem>.log`` left by an
    earlier capture is removed, so the directory never holds the same log twice)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{stem}{LOG_SUFFIX}"
    # mtime=0: the same log compresses to the same bytes
    path.write_bytes(gzip.compress(data, compresslevel=COMPRESS_LEVEL, mtime=0))
    (directory / f"{stem}{PLAIN_SUFFIX}").unlink(missing_ok=True)
    return path


def log_files(directory: Path) -> list[Path]:
    """The saved logs of ``directory`` (``*.log.gz``, or ``*.log`` of older runs; the compressed one when a
    name has both), brokers first, then by name."""
    if not directory.is_dir():
        return []
    by_stem: dict[str, Path] = {}
    for path in directory.iterdir():
        if not path.is_file() or not path.name.endswith((LOG_SUFFIX, PLAIN_SUFFIX)):
            continue
        stem = log_stem(path)
        if stem not in by_stem or path.name.endswith(LOG_SUFFIX):
            by_stem[stem] = path
    return [by_stem[s] for s in sorted(by_stem, key=lambda s: (not s.startswith("broker"), s))]


def read_log_lines(path: Path) -> Iterator[str]:
    """The lines of a saved log, without their line ends, decoded as UTF-8 (undecodable bytes replaced).
    A compressed file cut short (a capture that was killed) yields the lines up to the cut; one that is not
    gzip at all yields nothing."""
    if not path.name.endswith(LOG_SUFFIX):
        with path.open("r", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                yield line.rstrip("\n")
        return
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as handle:
        try:
            for line in handle:
                yield line.rstrip("\n")
        except (EOFError, zlib.error, gzip.BadGzipFile):
            return


_DOCKER_TIME = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?Z")


def docker_time(stamp: str) -> float | None:
    """Docker's RFC 3339 UTC time with nanoseconds (``2026-01-01T10:00:00.123456789Z``: a log line's
    prefix, a container's ``StartedAt``) in epoch seconds; ``None`` when ``stamp`` is not one."""
    match = _DOCKER_TIME.fullmatch(stamp)
    if match is None:
        return None
    whole = datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC).timestamp()
    return whole + float(f"0.{match.group(2) or 0}")
