"""The Spark session a scenario session's audits share is started once, in the background, early."""

from __future__ import annotations

from typing import Any

from chaos.audit import spark


def test_the_background_start_is_one_thread_whose_session_the_audit_gets(audit_spark: Any) -> None:
    thread = spark.start_in_background("local[2]")
    assert spark.start_in_background("local[2]") is thread  # once per process
    thread.join(120)
    assert not thread.is_alive()
    # the audit's own call gets the session that is running, not a second JVM
    assert spark.spark_session("local[2]") is audit_spark
    assert audit_spark.sparkContext.master == "local[2]"
