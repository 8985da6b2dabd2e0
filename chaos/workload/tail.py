"""The last record a consumer can read in each partition: the target of every "caught up" wait.

On a transactional topic the offsets right below the end often hold no record a consumer gets: each
commit or abort marker (a control record) takes an offset and is never delivered, and a read_committed
consumer never gets an aborted transaction's records, nor anything at or past the last stable offset
(LSO), its end. "The group delivered offset end − 1" never comes true there. :func:`last_data_offsets`
finds, per partition, the greatest offset below the end at an isolation level — the LSO for read_committed,
the high watermark for read_uncommitted — that holds a record visible at that level, with a short bounded
probe: a consumer at that level (never in a group) reads ``[end − 64, end)``, then, while it finds nothing,
the window below, each :data:`GROWTH` times larger, down to the low watermark. A partition with no visible
record gets no entry: there is nothing to wait for in it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient

from chaos.errors import ConfigError, WorkloadError
from chaos.run.context import RunContext
from chaos.run.events import Isolation
from chaos.workload.configs import admin_config
from chaos.workload.readers import offset_bounds, reader_config

FIRST_WINDOW: Final = 64
GROWTH: Final = 8

Bounds = Mapping[int, tuple[int, int]]
"""Per partition: ``(low watermark, end offset)``."""

Window = tuple[int, int]
"""Offsets ``[start, stop)`` of one partition."""

ReadWindows = Callable[[dict[int, Window]], Mapping[int, list[int]]]
"""Reads one window per partition; per partition, the offsets of the records a consumer got in it."""

_log = logging.getLogger(__name__)


def windows(low: int, end: int, first: int = FIRST_WINDOW, growth: int = GROWTH) -> list[Window]:
    """The windows a probe reads in ``[low, end)``, newest first: ``[end − first, end)``, then the one below
    it, each ``growth`` times larger than the last, the last one starting at ``low``; none if ``end <= low``.
    """
    if first < 1 or growth < 2:
        raise ConfigError(f"windows: expected first >= 1 and growth >= 2; got {first}, {growth}")
    found: list[Window] = []
    stop, size = end, first
    while stop > low:
        start = max(low, stop - size)
        found.append((start, stop))
        stop, size = start, size * growth
    return found


def last_visible(bounds: Bounds, read: ReadWindows) -> dict[int, int]:
    """Per partition of ``bounds``, the greatest offset in ``[low, end)`` that ``read`` returns, reading the
    :func:`windows` newest first — one round per window, every partition still searching in the same round
    — and stopping at the first window with a record. Partitions with none are left out."""
    pending = {p: windows(low, end) for p, (low, end) in bounds.items()}
    found: dict[int, int] = {}
    while pending := {p: ws for p, ws in pending.items() if ws}:
        round_ = {p: ws[0] for p, ws in pending.items()}
        offsets = read(round_)
        for p, (start, stop) in round_.items():
            seen = [o for o in offsets.get(p, ()) if start <= o < stop]
            if seen:
                found[p] = max(seen)
                pending[p] = []
            else:
                pending[p] = pending[p][1:]
    return dict(sorted(found.items()))


class _WindowReader:
    """:data:`ReadWindows` on a real topic: each round a fresh consumer at ``isolation`` assigned to every
    partition's window, reading until its position passes the window (a record at or past its stop, or the
    partition's end: librdkafka's EOF, at the LSO under read_committed) or ``deadline``."""

    def __init__(
        self, context: RunContext, topic: str, isolation: Isolation, deadline: float, process: str
    ) -> None:
        self._config: dict[str, Any] = reader_config(context, process, isolation)
        self._config["logger"] = _log  # not the history: the probe is the harness's, not the workload's
        self._topic = topic
        self._deadline = deadline

    def __call__(self, round_: dict[int, Window]) -> dict[int, list[int]]:
        consumer = Consumer(self._config)
        offsets: dict[int, list[int]] = {p: [] for p in round_}
        positions = {p: start for p, (start, _) in round_.items()}
        todo = set(round_)
        try:
            consumer.assign([TopicPartition(self._topic, p, start) for p, (start, _) in round_.items()])
            while todo:
                left = self._deadline - time.monotonic()
                if left <= 0:
                    short = {p: f"{positions[p]} of [{round_[p][0]}, {round_[p][1]})" for p in sorted(todo)}
                    raise WorkloadError(
                        f"the last readable records of {self._topic}: partitions not read in time "
                        f"(position of window): {short}"
                    )
                for msg in consumer.consume(num_messages=1000, timeout=min(0.5, left)):
                    p, offset, err = msg.partition(), msg.offset(), msg.error()
                    if p not in todo or offset is None:
                        continue
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:  # nothing more to read now
                            todo.discard(p)
                        continue
                    offsets[p].append(offset)
                    positions[p] = max(positions[p], offset + 1)
                    if positions[p] >= round_[p][1]:
                        todo.discard(p)
        finally:
            consumer.close()
        return offsets


def last_data_offsets(
    context: RunContext,
    isolation: Isolation,
    *,
    timeout_s: float,
    topic: str | None = None,
    admin: AdminClient | None = None,
    process: str = "tail-probe",
) -> dict[int, int]:
    """Per partition of the run's topic (or ``topic``), the greatest offset below its end offset at
    ``isolation`` (the LSO under read_committed, the high watermark under read_uncommitted) that holds a
    record a consumer at that level gets; partitions without one are left out. Bounded by ``timeout_s``
    (:class:`~chaos.errors.WorkloadError` past it; Kafka errors of the offsets request raise). ``admin``:
    an AdminClient to list the offsets with (default: a new one)."""
    if not timeout_s > 0:
        raise ConfigError(f"last_data_offsets.timeout_s: expected > 0; got {timeout_s!r}")
    topic = topic or context.topic
    deadline = time.monotonic() + timeout_s
    if admin is None:
        admin = AdminClient(admin_config(context.bootstrap_servers, f"{process}-admin", context.time))
    bounds = offset_bounds(admin, topic, isolation, timeout_s)
    return last_visible(bounds, _WindowReader(context, topic, isolation, deadline, process))
