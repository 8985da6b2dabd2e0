"""A real run: a workload with no fault on the 3-broker cluster audits clean.

Both engines audit the same run: the reference from the final drain, Spark from the topic's real contents
through Spark's Kafka source (read_uncommitted and read_committed). Both must say pass, find no anomaly,
and count exactly the acked values in the log.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from chaos.audit.run import TopicSource, audit_run
from chaos.audit.verdict import AuditResult
from chaos.cluster.cluster import KafkaCluster
from chaos.history import Recorder
from chaos.workload import IDEMPOTENT, RunContext
from chaos.workload.composed import WorkloadPlan, run_workload
from chaos.workload.readers import drain

pytestmark = pytest.mark.integration


def anomaly_counts(result: AuditResult) -> dict[str, int]:
    return {name: report.count for name, report in result.facts.anomalies}


def test_a_real_run_without_faults_audits_clean(kafka_cluster: KafkaCluster, run_dir: Path) -> None:
    run_id = f"audit-{uuid.uuid4().hex[:8]}"
    topic, group = f"t-{run_id}", f"g-{run_id}"
    kafka_cluster.create_topic(topic, partitions=3, replication_factor=3, config={"min.insync.replicas": "2"})
    plan = WorkloadPlan(producers=2, members=2, rate=500.0, duration_s=10.0, catch_up_s=20.0)
    history_dir = run_dir / run_id
    with Recorder(history_dir, run_id) as history:
        context = RunContext(
            run_id,
            kafka_cluster.bootstrap_servers,
            topic,
            group,
            IDEMPOTENT,
            history.record,
            run_dir=history_dir,
        )
        workload = run_workload(context, plan)
        drained = drain(context)
    assert workload.acked > 0
    assert all(summary.incomplete == () for summary in drained), drained

    reference = audit_run(history_dir, guarantee="idempotent", engine="reference", write=False)
    spark = audit_run(
        history_dir,
        guarantee="idempotent",
        engine="spark",
        master="local[2]",
        topic=TopicSource(kafka_cluster.bootstrap_servers, (topic,)),
    )
    print(f"\nacked {workload.acked}; reference {reference.facts.totals}; spark {spark.facts.totals}")
    for result in (reference, spark):
        assert result.facts.problems == (), result.facts.problems
        assert anomaly_counts(result) == dict.fromkeys(anomaly_counts(result), 0)
        assert result.verdict == "pass", result.failed_by
        assert result.facts.totals.acked == workload.acked
        assert result.facts.totals.sends == workload.acked
    # the log read through Kafka holds each acked value once per isolation level read
    assert spark.facts.totals.log_records == reference.facts.totals.log_records == workload.acked
    assert (history_dir / "audit.json").exists()
