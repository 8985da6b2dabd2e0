"""Establish the facts of a saved run directory with either engine (:func:`audit_facts`), and judge them
against the claimed guarantee (:func:`audit_run`: :mod:`chaos.audit.verdict`, written to ``audit.json``
by :mod:`chaos.audit.auditfile`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from chaos.audit.auditfile import write_audit
from chaos.audit.facts import DEFAULT_OPTIONS, ISOLATION_LEVELS, AuditFacts, AuditOptions, Isolation
from chaos.audit.java import java_command
from chaos.audit.verdict import AuditResult, judge
from chaos.errors import AuditError, ChaosError, ConfigError, HistoryError
from chaos.history.segments import RunDir
from chaos.run.layout import HISTORY_DIR, PARQUET_NAME

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

Engine = Literal["spark", "reference"]


@dataclass(frozen=True, slots=True)
class TopicSource:
    """Where the topic's real contents come from: Kafka (bootstrap + topics), or ``None`` to fall back to the
    final drain's ``drain_read`` events."""

    bootstrap_servers: str
    topics: tuple[str, ...]
    isolation_levels: tuple[Isolation, ...] = ("read_uncommitted", "read_committed")

    def __post_init__(self) -> None:
        if not self.bootstrap_servers or not self.topics:
            raise AuditError("TopicSource: need bootstrap_servers and at least one topic")
        if any(level not in ISOLATION_LEVELS for level in self.isolation_levels):
            raise AuditError(f"TopicSource.isolation_levels: each one of {ISOLATION_LEVELS}")


def audit_facts(
    run_dir: str | os.PathLike[str],
    *,
    engine: Engine = "spark",
    master: str = "local[*]",
    topic: TopicSource | None = None,
    options: AuditOptions = DEFAULT_OPTIONS,
) -> AuditFacts:
    """The facts of one run. ``run_dir`` is a local directory or a URI Spark's Hadoop file systems read
    (``file://``, ``hdfs://``, ``s3a://`` … as the Spark in use has connectors for: :func:`is_uri`), which
    only the Spark engine audits. A history that cannot be read gives facts with a problem (so verdict
    ``unknown``), never an exception-free pass.

    :raises ConfigError: a URI with the reference engine.
    """
    if isinstance(run_dir, str) and is_uri(run_dir):
        if engine != "spark":
            raise ConfigError(
                f"{run_dir}: the reference engine reads local run directories only; audit it with "
                "--engine spark, or copy the run here first"
            )
        uri = run_dir.rstrip("/")
        name = uri.rsplit("/", 1)[-1]
        return _or_unreadable(
            name, lambda: _spark(lambda spark: _uri_history(spark, uri), master, topic, options)
        )
    rd = RunDir.of(run_dir)
    return _or_unreadable(rd.path.name, lambda: _facts(rd, engine, master, topic, options))


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def is_uri(run_dir: str) -> bool:
    """Whether ``run_dir`` names a run by URI (``scheme://…``) rather than by a local path."""
    return _SCHEME.match(run_dir) is not None


def _or_unreadable(run_id: str, audit: Callable[[], AuditFacts]) -> AuditFacts:
    """``audit()``, or, when the history cannot be read, facts whose problem says so."""
    from chaos.audit.facts import ANOMALIES, AnomalyReport, Availability, Totals

    try:
        return audit()
    except HistoryError as exc:
        return AuditFacts(
            run_id,
            tuple((name, AnomalyReport(0)) for name in ANOMALIES),
            Availability(None, None, None),
            Totals(0, 0, 0, 0, 0, 0),
            (f"history unreadable: {exc}",),
        )


def _facts(
    rd: RunDir, engine: Engine, master: str, topic: TopicSource | None, options: AuditOptions
) -> AuditFacts:
    if not rd.has_history():
        raise HistoryError(f"no history under {rd.path}")
    if engine == "reference":
        return _reference(rd, topic, options)
    if engine == "spark":
        from chaos.history.reader import to_spark

        return _spark(lambda spark: to_spark(spark, rd), master, topic, options)
    raise AuditError(f"engine: expected spark or reference; got {engine!r}")


def _uri_history(spark: SparkSession, uri: str) -> DataFrame:
    """The compacted history under the run at ``uri``, read through Spark's Hadoop file systems."""
    from chaos.audit.sparkjob import HISTORY_COLUMNS

    path = f"{uri}/{HISTORY_DIR}/{PARQUET_NAME}"
    try:
        history = spark.read.parquet(path)
        missing = sorted(set(HISTORY_COLUMNS) - set(history.columns))
    except Exception as exc:  # pyspark's AnalysisException (no such path, no file system for the scheme)
        raise HistoryError(
            f"cannot read {path}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''} "
            "(a run read by URI needs its history compacted to Parquet — a closed run's is — and a Spark "
            "with the scheme's file system on its classpath)"
        ) from None
    if missing:
        raise HistoryError(f"{path} is not a chaos history: no columns {', '.join(missing)}")
    return history


def _reference(rd: RunDir, topic: TopicSource | None, options: AuditOptions) -> AuditFacts:
    from chaos.audit.reference import log_from_drain, reference_audit
    from chaos.history.reader import read_events

    events = read_events(rd)
    if topic is not None:
        raise AuditError(
            "the reference engine reads the topic from the drain only; use --engine spark "
            "to read it through Kafka"
        )
    return reference_audit(
        events, log_from_drain(events), options, run_id=events[0].run_id if events else rd.path.name
    )


def _spark(
    history_of: Callable[[SparkSession], DataFrame],
    master: str,
    topic: TopicSource | None,
    options: AuditOptions,
) -> AuditFacts:
    from chaos.audit.source import drain_log, read_topic
    from chaos.audit.spark import check_master, is_connect, spark_session
    from chaos.audit.sparkjob import spark_audit

    master = check_master(master)
    if not is_connect(master):  # a Connect server has the JVM; nothing starts here
        java_command()  # before the connector jars (Maven needs Java too) and the JVM
    try:
        spark = spark_session(master)
    except ChaosError:
        raise
    except Exception as exc:  # pyspark's own errors (a master that refuses, a JVM that exits at once)
        raise AuditError(
            f"Spark did not start on master {master!r}: {type(exc).__name__}: {exc}; `chaos doctor` checks "
            "Java and the connector jars, or audit without Spark: --engine reference"
        ) from exc
    history = history_of(spark)
    runs: Sequence[str] = [r.run_id for r in history.select("run_id").distinct().collect()]
    if len(runs) != 1:
        raise HistoryError(f"expected one run in the history, found {sorted(runs)}")
    if topic is None:
        log = drain_log(history)
    else:
        try:
            log = read_topic(spark, topic.bootstrap_servers, topic.topics, runs[0], topic.isolation_levels)
            log = log.cache()
            log.count()
        except Exception as exc:
            facts = spark_audit(history, None, options)[runs[0]]
            problems = tuple(sorted({*facts.problems, _unreadable(exc, master)}))
            return AuditFacts(facts.run_id, facts.anomalies, facts.availability, facts.totals, problems)
    return spark_audit(history, log, options)[runs[0]]


def _unreadable(exc: Exception, master: str) -> str:
    """The problem a topic Spark could not read gives the audit; how to fix it when the Spark behind
    ``master`` (a Connect server, a cluster) lacks the Kafka connector."""
    found = f"topic unreadable: {type(exc).__name__}"
    text = str(exc)
    if "kafka" in text.lower() and ("DATA_SOURCE_NOT_FOUND" in text or "Failed to find" in text):
        found += (
            f" (the Spark behind {master} has no Kafka connector: start it with "
            '--jars "$(chaos jars list | paste -sd, -)")'
        )
    return found


def audit_run(
    run_dir: str | os.PathLike[str],
    *,
    guarantee: str,
    engine: Engine = "spark",
    master: str = "local[*]",
    topic: TopicSource | None = None,
    options: AuditOptions = DEFAULT_OPTIONS,
    write: bool = True,
    streams: Mapping[str, str] | None = None,
) -> AuditResult:
    """Audit one run, judge it against ``guarantee`` — each producer of ``streams`` against its own — and
    (by default) write ``<run_dir>/audit.json``. A history that cannot be read gives verdict ``unknown``,
    never an exception-free pass."""
    facts = audit_facts(run_dir, engine=engine, master=master, topic=topic, options=options)
    result = judge(facts, guarantee, engine, streams)
    if write:
        write_audit(run_dir, result)
    return result
