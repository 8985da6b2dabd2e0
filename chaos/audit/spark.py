"""A SparkSession with the Kafka connector on its classpath."""

from __future__ import annotations

from typing import TYPE_CHECKING

from chaos.audit.connector import ensure_connector_jars

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"


def spark_session(master: str = DEFAULT_MASTER, app_name: str = "chaos-audit") -> SparkSession:
    """Start (or reuse) a session on ``master``; ``local[*]`` by default, any Spark master URL otherwise."""
    from pyspark.sql import SparkSession

    jars = ",".join(str(p) for p in ensure_connector_jars())
    return (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.jars", jars)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
