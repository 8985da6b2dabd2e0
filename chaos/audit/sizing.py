"""The session settings one Spark audit runs with, from the size of its history.

A fixed width fits one size only: the 16 shuffle partitions and 16 input splits a 1M-record history wants
made a scenario run's audit (a few thousand events) run ~475 tasks of a few milliseconds each, most of its
~13 s warm (docs/audit.md, "Per-run cost"). :func:`sized` sets both for one audit from the history's row
count — and, for a history small enough that compiling code for the job's ~80 stages costs more than it
saves, turns code generation off (whole-stage code below :data:`INTERPRETED_BELOW_ROWS` events, every
expression below :data:`INTERPRETED_EXPRESSIONS_BELOW_ROWS`) — and puts the session's own values back
after it.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any, Final

from chaos.audit.spark import is_connect_session

SHUFFLE_PARTITIONS: Final = "spark.sql.shuffle.partitions"
MIN_SPLITS: Final = "spark.sql.files.minPartitionNum"
MAX_WIDTH: Final = 16
"""The widest the audit goes on its own (the 10M-record benchmark's setting: docs/audit.md, "Benchmark")."""
ROWS_PER_SHUFFLE_PARTITION: Final = 750_000
ROWS_PER_SPLIT: Final = 187_500
WHOLE_STAGE_CODEGEN: Final = "spark.sql.codegen.wholeStage"
CODEGEN_FACTORY_MODE: Final = "spark.sql.codegen.factoryMode"
"""How Spark makes projections, predicates and orderings: ``FALLBACK`` (its default: generated code,
interpreted when that fails) or ``NO_CODEGEN`` (interpreted)."""
INTERPRETED_BELOW_ROWS: Final = 150_000
"""Histories of fewer events are audited without whole-stage code generation (a 2,000-record run's warm
audit: ~11 s -> ~8 s; a gain even at 100,000 records)."""
INTERPRETED_EXPRESSIONS_BELOW_ROWS: Final = 20_000
"""Histories of fewer events are audited with interpreted projections, predicates and orderings as well:
the first audit of a JVM compiles ~400 classes less (a 2,000-record run's: 44.8 -> 37.8 s on 2 cores); later
audits reuse compiled classes, and from 30,000 events the interpreted rows cost more (docs/audit.md)."""


SMALL_HISTORY_BELOW_ROWS: Final = 0
"""Histories of fewer events are audited in a small job's shape (:func:`small_history`): 3 Spark actions
without transactions — the local checkpoints lazy, computed by the first job that reads them, and no count
that only chooses a branch (the general branch, right either way, runs). 0: none is, since eager checkpoints
measured shorter at every size tried — on 2 cores (``benchmarks/audit_shape.py``, one process per shape, a
fresh JVM's first audit and the median of warm ones), a 1,007-event run's first audit took 17.6 s in the
small shape against 15.0 s, warm 7.90 s against 7.45 s; a 15,007-event run's 18.0 s against 14.3 s, warm
7.00 s against 6.34 s (docs/measurements.md, 2026-12-07)."""


def small_history(rows: int | None) -> bool:
    """Whether a history of ``rows`` events (``None``: not counted) is audited in the small job's shape."""
    return rows is not None and rows < SMALL_HISTORY_BELOW_ROWS


def audit_settings(rows: int, parallelism: int) -> dict[str, str]:
    """The session settings an audit of ``rows`` history events on ``parallelism`` task slots runs with."""
    shuffles, splits = audit_width(rows, parallelism)
    settings = {SHUFFLE_PARTITIONS: str(shuffles), MIN_SPLITS: str(splits)}
    if rows < INTERPRETED_BELOW_ROWS:
        settings[WHOLE_STAGE_CODEGEN] = "false"
    if rows < INTERPRETED_EXPRESSIONS_BELOW_ROWS:
        settings[CODEGEN_FACTORY_MODE] = "NO_CODEGEN"
    return settings


def audit_width(rows: int, parallelism: int) -> tuple[int, int]:
    """``(shuffle partitions, input splits)`` for a history of ``rows`` events on ``parallelism`` task
    slots: never fewer than the slots, never more than :data:`MAX_WIDTH` unless the slots are more."""
    widest = max(MAX_WIDTH, parallelism)

    def width(per: int) -> int:
        return min(widest, max(parallelism, math.ceil(rows / per)))

    return width(ROWS_PER_SHUFFLE_PARTITION), width(ROWS_PER_SPLIT)


@contextlib.contextmanager
def sized(history: Any) -> Iterator[int | None]:
    """Within the block, the session of ``history`` (a DataFrame) runs with :func:`audit_settings`; the
    block is given the history's event count. A Spark Connect session is sized by the task slots its server
    states (``spark.default.parallelism``, as the warm server does: :mod:`chaos.audit.warm`), else left as
    its server is configured, uncounted (``None``)."""
    spark = history.sparkSession
    slots = _connect_slots(spark) if is_connect_session(spark) else spark.sparkContext.defaultParallelism
    if slots is None:
        yield None
        return
    rows = history.count()
    settings = audit_settings(rows, slots)
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield rows
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def _connect_slots(spark: Any) -> int | None:
    """The task slots a Spark Connect server states, or None when it states none."""
    try:
        stated = spark.conf.get("spark.default.parallelism", None)
    except Exception:  # a server that refuses to say: sized by its own configuration
        return None
    return int(stated) if stated and str(stated).isdigit() and int(stated) > 0 else None
