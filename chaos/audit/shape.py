"""What a block of Spark work costs in shape rather than data: the Spark jobs and stages it ran, and the
DataFrame actions that started them (:func:`counted`).

On a scenario's few thousand events an audit's time is its shape — each action plans, optimises and
schedules its own job — so ``benchmarks/audit_shape.py`` and the budget test read these counts on a local
session (the JVM's own status tracker: a Spark Connect session is not counted).
"""

from __future__ import annotations

import contextlib
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

ACTIONS: Final = ("collect", "count", "first", "take", "toLocalIterator", "localCheckpoint")
"""The DataFrame methods counted as actions (``localCheckpoint`` only when eager)."""


@dataclass(frozen=True, slots=True)
class Shape:
    """The Spark work of one block: ``jobs`` run, their ``stages`` (``skipped``: stages of those jobs
    whose shuffle output was already there), and ``actions`` per DataFrame method."""

    jobs: int
    stages: int
    skipped: int
    actions: dict[str, int] = field(default_factory=dict)

    @property
    def action_count(self) -> int:
        return sum(self.actions.values())


@dataclass
class _Tally:
    """Filled in when the block ends."""

    shape: Shape = Shape(0, 0, 0)


@contextlib.contextmanager
def counted(spark: Any) -> Iterator[_Tally]:
    """Count the jobs ``spark`` (a local session) runs from this thread in the block, and the DataFrame
    actions called in it; ``tally.shape`` holds them once the block ends."""
    from pyspark.sql.classic.dataframe import DataFrame

    sc = spark.sparkContext
    tag = f"chaos-shape-{uuid.uuid4().hex[:12]}"
    calls: Counter[str] = Counter()
    originals = {name: getattr(DataFrame, name) for name in ACTIONS}

    def wrapped(name: str) -> Any:
        original = originals[name]

        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            if name != "localCheckpoint" or kwargs.get("eager", args[0] if args else True):
                calls[name] += 1
            return original(self, *args, **kwargs)

        return call

    tally = _Tally()
    sc.addJobTag(tag)
    for name in ACTIONS:
        setattr(DataFrame, name, wrapped(name))
    try:
        yield tally
    finally:
        for name, original in originals.items():
            setattr(DataFrame, name, original)
        sc.removeJobTag(tag)
        tracker = sc._jsc.sc().statusTracker()
        jobs = list(tracker.getJobIdsForTag(tag))
        stages, ran = 0, 0
        for job in jobs:
            info = tracker.getJobInfo(job)
            if info.isEmpty():
                continue
            ids = list(info.get().stageIds())
            stages += len(ids)
            ran += sum(1 for s in ids if not tracker.getStageInfo(s).isEmpty())
        tally.shape = Shape(len(jobs), stages, stages - ran, dict(calls))
