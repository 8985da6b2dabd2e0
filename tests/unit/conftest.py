"""Unit-test glue: the Hypothesis profile and one small local Spark session for the audit tests."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "chaos-ci",
    deadline=None,
    max_examples=200,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile("chaos-dev", parent=settings.get_profile("chaos-ci"), max_examples=50)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "chaos-ci"))


@pytest.fixture(autouse=True)
def _no_warm_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """A warm Spark server up on the machine (``chaos spark start``) would be these sessions' default
    master: they keep to the masters they name."""
    from chaos.audit.warm import OFF_ENV

    monkeypatch.setenv(OFF_ENV, "off")


@pytest.fixture(autouse=True)
def _no_background_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pytester sessions of these tests run in this process: the plugin's background start would
    launch a JVM for each one that selects a scenario run (tests/unit/plugin/test_plugin_options.py checks the
    decision; tests/unit/audit/test_spark_stop.py the start and the stop)."""
    import chaos.audit.spark

    monkeypatch.setattr(chaos.audit.spark, "start_in_background", lambda master: None)


@pytest.fixture(scope="session")
def audit_spark() -> Iterator[Any]:
    """One ``local[2]`` Spark session for the audit tests (2 cores here), few shuffle partitions."""
    from chaos.audit.spark import spark_session

    spark = spark_session("local[2]", app_name="chaos-audit-tests")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    # the test data is tiny: compiling whole-stage code for the job's many stages, and re-planning each
    # stage adaptively, cost more than they save (a warm audit of a 10-event run: 21 s -> 16 s without AQE)
    spark.conf.set("spark.sql.codegen.wholeStage", "false")
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    spark.sparkContext.setLogLevel("ERROR")
    yield spark
    spark.stop()


@pytest.fixture
def clean_value_ids() -> Callable[[Any, Any], set[str]]:
    """``(history, log) -> value ids`` the Spark job takes its fast path for (one clean send, delivered,
    in the log at its ack position); the audit tests use it to show both per-value paths ran."""

    def clean(history: Any, log: Any) -> set[str]:
        from pyspark.sql import functions as F

        from chaos.audit import sparkjob
        from chaos.audit.checks import values

        h, lg = history.select(*sparkjob.HISTORY_COLUMNS), log.select(*sparkjob.LOG_COLUMNS)
        strings = values._strings(F, h, lg)
        summary = values._value_summary(F, values._value_rows(F, h, h, lg), strings)
        return {r.value_id for r in summary.where("clean").collect()}

    return clean
