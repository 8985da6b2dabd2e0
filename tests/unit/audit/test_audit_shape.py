"""The shape of a small run's Spark audit: the Spark actions and jobs one ``spark_audit`` call runs on a
small history stay within a budget, in the small job's shape (below
:data:`~chaos.audit.sizing.SMALL_HISTORY_BELOW_ROWS` events) and in the default one (docs/audit.md,
"Per-run cost"), and its facts are the reference's."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import pytest

DEFAULT_ACTIONS_BUDGET: Final = 15
"""Above the threshold: the history's count, 9 eager local checkpoints, 3 counts that choose a branch, the
control facts' collect and the parts' collect."""
ACTIONS_BUDGET: Final = 3
"""The history's count (the audit's sizing), the control facts' collect, the parts' collect."""
JOBS_BUDGET: Final = 28
"""The Spark jobs those actions run on the test session (no adaptive execution): beside one per action, one
per broadcast join's small side and per lazy local checkpoint whose rows a job left incomplete (79 before the
small shape)."""


def _audited(spark: Any, tmp_path: Path, small_below: int) -> Any:
    """The shape of ``spark_audit`` of the training run (200 values: 1,007 events) with
    ``SMALL_HISTORY_BELOW_ROWS`` at ``small_below``; its facts checked against the reference's."""
    import chaos.audit.sizing
    from chaos.audit.archive_build import TRAINING_VALUES, record_training_run
    from chaos.audit.run import audit_facts
    from chaos.audit.shape import counted
    from chaos.audit.source import drain_log
    from chaos.audit.sparkjob import spark_audit
    from chaos.history.reader import to_spark

    run_dir = tmp_path / "small"
    record_training_run(run_dir, "small")
    history = to_spark(spark, run_dir)
    with pytest.MonkeyPatch.context() as patch, counted(spark) as tally:
        patch.setattr(chaos.audit.sizing, "SMALL_HISTORY_BELOW_ROWS", small_below)
        got = spark_audit(history, drain_log(history))
    assert got == {"small": audit_facts(run_dir, engine="reference")}
    assert got["small"].totals.sends == TRAINING_VALUES
    return tally.shape


def test_a_small_audit_runs_three_actions_and_no_eager_checkpoint(audit_spark: Any, tmp_path: Path) -> None:
    shape = _audited(audit_spark, tmp_path, 20_000)
    assert "localCheckpoint" not in shape.actions, shape
    assert shape.action_count <= ACTIONS_BUDGET, shape
    assert shape.jobs <= JOBS_BUDGET, shape


def test_a_small_audit_in_the_default_shape_stays_within_its_actions(
    audit_spark: Any, tmp_path: Path
) -> None:
    from chaos.audit.sizing import SMALL_HISTORY_BELOW_ROWS

    shape = _audited(audit_spark, tmp_path, SMALL_HISTORY_BELOW_ROWS)
    assert shape.action_count <= DEFAULT_ACTIONS_BUDGET, shape


@pytest.mark.parametrize("eager", [True, False])
def test_counted_sees_each_action_and_its_jobs(audit_spark: Any, eager: bool) -> None:
    from chaos.audit.checks.frames import materialised, release
    from chaos.audit.shape import counted

    df = audit_spark.range(10)
    with counted(audit_spark) as tally:
        kept = materialised(df, eager=eager)
        assert kept.count() == 10
        assert len(kept.collect()) == 10
    release(kept)
    assert tally.shape.actions == {"count": 1, "collect": 1} | ({"localCheckpoint": 1} if eager else {})
    assert tally.shape.jobs >= 2 + eager
