"""The thread-safe recorder: events in, JSON Lines on disk within a fraction of a second, Parquet on close.

``record()`` only appends the event to an in-memory list under a lock; a background flusher thread turns
the list into JSON Lines every ``flush_interval`` seconds and hands them to the kernel with ``write(2)``.
Data the kernel holds survives a SIGKILL of this process, so a killed run loses at most the events
recorded in the last ``flush_interval`` plus the time one batch takes to write (well under a second).
``fsync=True`` also makes each batch survive a power loss, at a cost.

If threads record faster than the flusher writes, the backlog (and what a kill would lose) would grow
without bound; past ``backlog_limit`` pending events the recording thread writes the batch itself, which
bounds both and slows the producers of events down to the speed of the disk writer.

A Ctrl-C (or a SIGTERM handler's exit) that arrives while the main thread writes a batch is held back
until the batch is whole, then propagates as it is: the file never ends a batch half-way, no event is lost.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, fields
from json.encoder import encode_basestring
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from chaos.errors import HistoryError
from chaos.history.compact import compact_locked
from chaos.history.reader import RunDirLike
from chaos.history.segments import RunDir, WriterLock, fsync_dir, header_line
from chaos.run.events import Event, PartitionOffset, PartitionState, _check_name

DEFAULT_FLUSH_INTERVAL: Final = 0.2
MAX_FLUSH_INTERVAL: Final = 0.5
DEFAULT_SEGMENT_BYTES: Final = 128 << 20
DEFAULT_BACKLOG_LIMIT: Final = 20_000  # ~0.1 s of encoding on a slow core
FLUSHER_STOP_TIMEOUT_S: Final = 30.0
"""How long :meth:`Recorder.close` waits for the flusher thread to finish its batch and stop."""
_HELD_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)

_encode_json: Final[Callable[[object], str]] = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), allow_nan=False
).encode


def _encode_bool(value: bool) -> str:
    return "true" if value else "false"


def _encode_tuple(value: tuple[object, ...]) -> str:
    return _encode_json(
        [v.to_dict() if isinstance(v, PartitionOffset | PartitionState) else v for v in value]
    )


_FieldEncoder = tuple[str, str, Callable[[Any], str]]
_encoders: dict[type[Event], tuple[_FieldEncoder, ...]] = {}


def _field_encoders(cls: type[Event]) -> tuple[_FieldEncoder, ...]:
    """Per kind: (field, '"field":' prefix, encoder) for each of its own columns.

    Values were validated at construction (exact types, finite floats), so each column can be encoded
    by a direct C-level call instead of a generic JSON encoder walking a dict: ~2x faster per event.
    """
    result: list[_FieldEncoder] = []
    for f in fields(cls):
        if f.name in ("run_id", "process", "ts", "mono"):
            continue
        annotation = str(f.type)
        encoder: Callable[[Any], str]
        if annotation.startswith("tuple["):
            encoder = _encode_tuple
        elif annotation.startswith("bool"):
            encoder = _encode_bool
        elif annotation.startswith("int"):
            encoder = int.__repr__
        elif annotation.startswith("float"):
            encoder = float.__repr__
        else:  # str, str | None and the Literal aliases
            encoder = encode_basestring
        result.append((f.name, f',"{f.name}":', encoder))
    _encoders[cls] = tuple(result)
    return _encoders[cls]


def encode_events(events: Iterable[Event], first_index: int) -> bytes:
    """JSON Lines for ``events``, numbered from ``first_index``; ``null`` fields are omitted."""
    parts: list[str] = []
    append = parts.append
    index = first_index
    for event in events:
        cls = type(event)
        encoders = _encoders.get(cls) or _field_encoders(cls)
        append(
            f'{{"index":{index},"run_id":"{event.run_id}","kind":"{cls.kind}","ts":{event.ts!r},'
            f'"mono":{event.mono!r},"process":"{event.process}"'
        )  # names are validated: no escaping
        for name, prefix, encoder in encoders:
            value = getattr(event, name)
            if value is not None:
                append(prefix)
                append(encoder(value))
        append("}\n")
        index += 1
    # A lone surrogate (undecodable bytes smuggled into a str) would make the line invalid UTF-8.
    return "".join(parts).encode("utf-8", "replace")


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """In the main thread, hold SIGINT and SIGTERM back until the block ends, then deliver them.

    Python runs signal handlers, so raises KeyboardInterrupt, in the main thread only; elsewhere this
    does nothing. A signal whose handler is ignored or not Python's is left alone.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous: dict[int, Any] = {}

    def hold(signum: int, _frame: object) -> None:
        caught.append(signum)

    try:
        for signum in _HELD_SIGNALS:
            handler = signal.getsignal(signum)
            if handler is not None and handler is not signal.SIG_IGN:
                previous[signum] = signal.signal(signum, hold)
        yield
    finally:
        for held, handler in previous.items():
            signal.signal(held, handler)
        for arrived in dict.fromkeys(caught):
            signal.raise_signal(arrived)


@dataclass(frozen=True)
class RecorderStats:
    """Counts so far: events accepted by ``record()``, events written to disk, segments, JSONL bytes."""

    recorded: int
    written: int
    segments: int
    jsonl_bytes: int


class Recorder:
    """Append-only, crash-tolerant history writer for one run directory (one live writer per dir).

    Use as a context manager, or call :meth:`close`. Any thread may call :meth:`record`.

    :param run_dir: the run directory; files go under ``<run_dir>/history/`` (created).
    :param run_id: every recorded event must carry this run id.
    :param flush_interval: seconds between background flushes, in (0, 0.5].
    :param segment_max_bytes: start a new JSONL segment after this many bytes.
    :param fsync: fsync after every flush (power-loss durability); default only survives process kill.
    :param keep_jsonl: keep the JSONL segments after the Parquet file is written.
    :param backlog_limit: pending events above which ``record()`` writes the batch in the caller's thread.
    :raises HistoryError: the run dir already holds a history, or another writer holds it.
    """

    def __init__(
        self,
        run_dir: RunDirLike,
        run_id: str,
        *,
        flush_interval: float = DEFAULT_FLUSH_INTERVAL,
        segment_max_bytes: int = DEFAULT_SEGMENT_BYTES,
        fsync: bool = False,
        keep_jsonl: bool = False,
        backlog_limit: int = DEFAULT_BACKLOG_LIMIT,
    ) -> None:
        _check_name(self, "run_id", run_id)
        if not 0 < flush_interval <= MAX_FLUSH_INTERVAL:
            raise HistoryError(
                f"Recorder.flush_interval: expected seconds in (0, {MAX_FLUSH_INTERVAL}] so "
                f"that a killed run keeps all but its last second; got {flush_interval!r}"
            )
        if type(segment_max_bytes) is not int or segment_max_bytes < 4096:
            raise HistoryError(
                f"Recorder.segment_max_bytes: expected an int >= 4096; got {segment_max_bytes!r}"
            )
        if type(backlog_limit) is not int or backlog_limit < 1:
            raise HistoryError(f"Recorder.backlog_limit: expected an int >= 1; got {backlog_limit!r}")
        self._rd = RunDir.of(run_dir)
        self._run_id = run_id
        self._backlog_limit = backlog_limit
        self._interval = flush_interval
        self._segment_max = segment_max_bytes
        self._fsync = fsync
        self._keep_jsonl = keep_jsonl

        self._lock = threading.Lock()  # guards _pending, _next_index, _closed
        self._write_lock = threading.Lock()  # serialises batches to the file, in index order
        self._close_lock = threading.Lock()  # a second close() waits for the first, then returns its result
        self._close_started = False
        self._pending: list[Event] = []
        self._next_index = 0  # index of the first event in _pending
        self._written = 0
        self._closed = False
        self._failure: BaseException | None = None
        self._parquet: Path | None = None

        self._writer_lock = WriterLock(self._rd)
        try:
            if self._rd.has_history():
                raise HistoryError(
                    f"{self._rd.history_dir} already holds a history; give each run a fresh run dir "
                    f"(or read this one with read_history / compact_history)"
                )
            self._segment = 0
            self._segment_count = 0
            self._segment_bytes = 0
            self._header_bytes = 0
            self._jsonl_bytes = 0
            self._fd = -1
            self._open_segment()
            fsync_dir(self._rd.history_dir)
        except BaseException:
            self._writer_lock.release()
            raise

        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._flush_loop, name=f"history-flusher-{run_id}", daemon=True
        )
        self._thread.start()
        # A program that exits without close() still gets its pending events onto disk.
        ref = weakref.ref(self)

        def flush_at_exit() -> None:
            recorder = ref()
            if recorder is not None:
                recorder._flush_at_exit()

        self._atexit = flush_at_exit
        atexit.register(flush_at_exit)

    # ---- public API ------------------------------------------------------------------------------

    @property
    def run_id(self) -> str:
        """The run id every event must carry."""
        return self._run_id

    @property
    def run_dir(self) -> RunDir:
        """Paths of this run's history files."""
        return self._rd

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has started."""
        return self._closed

    def record(self, event: Event) -> None:
        """Append one event. Cheap and thread-safe; the flusher writes it to disk within ``flush_interval``.

        :raises HistoryError: after close, if the background writer failed, or for another run's event.
        """
        if not isinstance(event, Event) or event.run_id != self._run_id:
            self._reject(event)
        with self._lock:
            if self._closed or self._failure is not None:
                self._raise_unusable()
            self._pending.append(event)
            backlog = len(self._pending)
        if backlog >= self._backlog_limit:
            self._drain()

    def record_many(self, events: Iterable[Event]) -> None:
        """Append several events, consecutively in record order."""
        batch = list(events)
        for event in batch:
            if not isinstance(event, Event) or event.run_id != self._run_id:
                self._reject(event)
        with self._lock:
            if self._closed or self._failure is not None:
                self._raise_unusable()
            self._pending.extend(batch)
            backlog = len(self._pending)
        if backlog >= self._backlog_limit:
            self._drain()

    def flush(self) -> None:
        """Write every event recorded so far to disk now (and fsync if configured)."""
        self._drain()
        if self._failure is not None:
            raise HistoryError(f"the history writer failed: {self._failure}") from self._failure

    def stats(self) -> RecorderStats:
        """Counts so far."""
        with self._lock:
            recorded = self._next_index + len(self._pending)
        return RecorderStats(recorded, self._written, self._segment_count, self._jsonl_bytes)

    def close(self) -> Path:
        """Flush, stop the flusher, roll the segments into ``history/events.parquet``; returns its path.

        Idempotent. If the Parquet file cannot be written the JSONL segments stay, the error is raised,
        and :func:`compact_history` can retry later. A flusher thread that has not stopped within
        :data:`FLUSHER_STOP_TIMEOUT_S` (a write that hangs) raises :class:`HistoryError`. Interrupted
        (Ctrl-C), it writes what was recorded to the JSONL segments and lets the interrupt propagate.
        """
        with self._close_lock:
            if self._close_started:
                if self._parquet is None:
                    raise HistoryError(
                        f"the recorder for {self._rd.path} failed to close earlier; run compact_history on it"
                    )
                return self._parquet
            self._close_started = True
            with self._lock:
                self._closed = True
            atexit.unregister(self._atexit)
            return self._close()

    def _close(self) -> Path:
        try:
            self._stop.set()
            try:
                self._stop_flusher()
            except (KeyboardInterrupt, SystemExit):
                # The flusher ends within one batch once _stop is set; then the pending events go to disk.
                self._thread.join(FLUSHER_STOP_TIMEOUT_S)
                if not self._thread.is_alive():
                    self._drain()
                    with contextlib.suppress(OSError):
                        self._close_segment()
                raise
            self._drain()  # record() refuses new events now, so this is the last batch
            try:
                self._close_segment()
            except OSError as exc:
                self._failure = self._failure or exc
            if self._failure is not None:
                raise HistoryError(
                    f"the history writer failed; events from index {self._written} on were lost: "
                    f"{self._failure}"
                ) from self._failure
            self._parquet = compact_locked(self._rd, keep_jsonl=self._keep_jsonl)
            return self._parquet
        finally:
            self._writer_lock.release()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # ---- internals -------------------------------------------------------------------------------

    def _reject(self, event: object) -> None:
        if not isinstance(event, Event):
            raise HistoryError(
                f"Recorder.record: expected an Event (SendInvoke, Delivery, ...); got {event!r}"
            )
        raise HistoryError(
            f"Recorder.record: event run_id {event.run_id!r} differs from this recorder's {self._run_id!r}"
        )

    def _raise_unusable(self) -> None:
        if self._failure is not None:
            raise HistoryError(
                f"the history writer failed; nothing more can be recorded: {self._failure}"
            ) from self._failure
        raise HistoryError(f"Recorder.record: the recorder for {self._rd.path} is closed")

    def _stop_flusher(self) -> None:
        self._thread.join(FLUSHER_STOP_TIMEOUT_S)
        if self._thread.is_alive():
            raise HistoryError(
                f"the history flusher of {self._rd.path} did not stop within {FLUSHER_STOP_TIMEOUT_S:.0f} s "
                f"(a write to {self._rd.history_dir} hangs?); the JSONL segments there hold what was "
                f"written: read them as they are, or run compact_history on the run dir once the disk answers"
            )

    def _flush_loop(self) -> None:
        while not self._stop.wait(self._interval):
            self._drain()
            if self._failure is not None:
                return

    def _flush_at_exit(self) -> None:
        if not self._closed:
            self._drain()

    def _drain(self) -> None:
        # a batch written half-way would leave a torn line before the next one: the segment unreadable
        with _signals_held(), self._write_lock:
            if self._failure is not None or self._fd < 0:
                return
            with self._lock:
                batch, self._pending = self._pending, []
                first = self._next_index
                self._next_index += len(batch)
            if not batch:
                return
            try:
                data = encode_events(batch, first)
                segment_has_events = self._segment_bytes > self._header_bytes
                if segment_has_events and self._segment_bytes + len(data) > self._segment_max:
                    self._close_segment()
                    self._segment += 1
                    self._open_segment()
                self._write(data)
                if self._fsync:
                    os.fsync(self._fd)
                self._written = first + len(batch)
            except Exception as exc:  # disk full, I/O error, unencodable value: refuse from now on
                self._failure = exc

    def _open_segment(self) -> None:
        path = self._rd.segment_path(self._segment)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        self._segment_bytes = 0
        self._segment_count += 1
        header = header_line(self._run_id, self._segment, time.time())
        self._header_bytes = len(header)
        self._write(header)

    def _close_segment(self) -> None:
        if self._fd < 0:
            return
        try:
            os.fsync(self._fd)
        finally:
            os.close(self._fd)
            self._fd = -1

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                written = os.write(self._fd, view)
            except OSError as exc:  # os.write names no file: name the segment (ENOSPC, EIO...)
                path = self._rd.segment_path(self._segment)
                raise OSError(
                    exc.errno, f"{exc.strerror}; free space or move the report dir", str(path)
                ) from exc
            view = view[written:]
        self._segment_bytes += len(data)
        self._jsonl_bytes += len(data)
