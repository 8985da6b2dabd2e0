"""The Spark audit's width follows the history's size, and the session gets its own settings back."""

from __future__ import annotations

from typing import Any

import pytest

from chaos.audit.sizing import (
    CODEGEN_FACTORY_MODE,
    INTERPRETED_BELOW_ROWS,
    INTERPRETED_EXPRESSIONS_BELOW_ROWS,
    MAX_WIDTH,
    MIN_SPLITS,
    SHUFFLE_PARTITIONS,
    WHOLE_STAGE_CODEGEN,
    audit_settings,
    audit_width,
    sized,
)


@pytest.mark.parametrize(
    ("rows", "slots", "want"),
    [
        (0, 2, (2, 2)),  # an empty history still gets one task per slot
        (6_000, 2, (2, 2)),  # a scenario run: no more tasks than slots
        (3_000_000, 2, (4, 16)),  # 1M records: 4 shuffle partitions, the 16 splits the benchmark uses
        (30_000_000, 2, (MAX_WIDTH, MAX_WIDTH)),  # 10M records: capped
        (6_000, 32, (32, 32)),  # a cluster's 32 slots are all used
        (300_000_000, 64, (64, 64)),  # more slots than the cap: the slots win
    ],
)
def test_width_grows_with_the_history_between_the_slots_and_the_cap(
    rows: int, slots: int, want: tuple[int, int]
) -> None:
    assert audit_width(rows, slots) == want


def test_small_histories_are_audited_without_whole_stage_code_and_big_ones_as_the_session_says() -> None:
    assert audit_settings(INTERPRETED_BELOW_ROWS - 1, 2)[WHOLE_STAGE_CODEGEN] == "false"
    assert WHOLE_STAGE_CODEGEN not in audit_settings(INTERPRETED_BELOW_ROWS, 2)


def test_only_the_smallest_histories_interpret_their_expressions() -> None:
    assert INTERPRETED_EXPRESSIONS_BELOW_ROWS < INTERPRETED_BELOW_ROWS
    assert audit_settings(INTERPRETED_EXPRESSIONS_BELOW_ROWS - 1, 2)[CODEGEN_FACTORY_MODE] == "NO_CODEGEN"
    between = audit_settings(INTERPRETED_EXPRESSIONS_BELOW_ROWS, 2)
    assert CODEGEN_FACTORY_MODE not in between
    assert between[WHOLE_STAGE_CODEGEN] == "false"


def test_sized_sets_the_width_for_the_block_and_restores_the_session(audit_spark: Any) -> None:
    spark = audit_spark
    own = spark.conf.get(SHUFFLE_PARTITIONS)
    spark.conf.set(SHUFFLE_PARTITIONS, "7")
    spark.conf.unset(MIN_SPLITS)
    codegen = spark.conf.get(WHOLE_STAGE_CODEGEN)
    factory = spark.conf.get(CODEGEN_FACTORY_MODE)
    history = spark.range(10).toDF("index")
    slots = spark.sparkContext.defaultParallelism
    with sized(history):
        assert spark.conf.get(SHUFFLE_PARTITIONS) == str(slots)
        assert spark.conf.get(MIN_SPLITS) == str(slots)
        assert spark.conf.get(WHOLE_STAGE_CODEGEN) == "false"
        assert spark.conf.get(CODEGEN_FACTORY_MODE) == "NO_CODEGEN"
    assert spark.conf.get(SHUFFLE_PARTITIONS) == "7"
    assert spark.conf.get(MIN_SPLITS, None) is None
    assert spark.conf.get(WHOLE_STAGE_CODEGEN) == codegen
    assert spark.conf.get(CODEGEN_FACTORY_MODE) == factory
    with pytest.raises(RuntimeError), sized(history):
        raise RuntimeError("the audit failed")
    assert spark.conf.get(SHUFFLE_PARTITIONS) == "7"  # restored on failure too
    spark.conf.set(SHUFFLE_PARTITIONS, own)


class _Conf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = dict(values)

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)

    def set(self, key: str, value: str) -> None:
        self.values[key] = value

    def unset(self, key: str) -> None:
        self.values.pop(key, None)


class _ConnectSession:
    """What :func:`sized` reads of a Spark Connect client's session (its class's module says Connect)."""

    def __init__(self, conf: dict[str, str]) -> None:
        self.conf = _Conf(conf)


_ConnectSession.__module__ = "pyspark.sql.connect.session"


class _History:
    def __init__(self, spark: _ConnectSession, rows: int) -> None:
        self.sparkSession = spark
        self.rows = rows

    def count(self) -> int:
        return self.rows


def test_a_connect_session_is_sized_by_the_slots_its_server_states_and_left_alone_without() -> None:
    warm = _ConnectSession({"spark.default.parallelism": "3", SHUFFLE_PARTITIONS: "16"})
    with sized(_History(warm, 10)):
        assert warm.conf.get(SHUFFLE_PARTITIONS) == "3"
        assert warm.conf.get(CODEGEN_FACTORY_MODE) == "NO_CODEGEN"
    assert warm.conf.values == {"spark.default.parallelism": "3", SHUFFLE_PARTITIONS: "16"}
    other = _ConnectSession({SHUFFLE_PARTITIONS: "16"})
    with sized(_History(other, 10)):
        assert other.conf.values == {SHUFFLE_PARTITIONS: "16"}
