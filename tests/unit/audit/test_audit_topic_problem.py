"""What the audit says when Spark cannot read the topic: the problem names the exception, and how to fix a
Spark (a Connect server, a cluster) started without the Kafka connector."""

from __future__ import annotations

from chaos.audit.run import _unreadable


class AnalysisException(Exception):
    """Stands in for PySpark's, whose name the problem carries."""


def test_a_spark_without_the_kafka_connector_is_told_how_to_get_it() -> None:
    exc = AnalysisException("Failed to find data source: kafka. Please deploy the application as per …")
    assert _unreadable(exc, "sc://127.0.0.1:15002") == (
        "topic unreadable: AnalysisException (the Spark behind sc://127.0.0.1:15002 has no Kafka connector: "
        'start it with --jars "$(chaos jars list | paste -sd, -)")'
    )


def test_any_other_failure_is_named_only() -> None:
    assert _unreadable(TimeoutError("no broker answered"), "local[2]") == "topic unreadable: TimeoutError"
    parquet = AnalysisException("Failed to find data source: parquet2")
    assert _unreadable(parquet, "local[2]") == "topic unreadable: AnalysisException"
