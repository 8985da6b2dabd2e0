"""On the real cluster: a run's producer on the Java client (kafka-clients of the cluster's
Kafka version) under a crash of a partition's leader writes the same history as the librdkafka worker, and
the same audit judges it.

RN1's ``remediated`` variant (acks=all, idempotent: at least once) with one crash in its plan; the producer
is started by ``run.producer()`` like every scenario's, on ``client_library="java"`` (what
``--chaos-client java`` sets). Asserted: the Java producer ran (its effective configuration is recorded as
the Java client's, with ``delivery.timeout.ms``), every value it sent got one outcome, the audit passes with
every acknowledged value in the log, and the client's own WARN lines about the crashed broker are in the
history as evidence (measured: the ``Sender``'s "Received invalid metadata error in produce request on
partition … NetworkException: Disconnected from node 3", the line D1's source notes quote).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from chaos.faults.plan import RUN_TOPIC, FaultStep, Plan
from chaos.faults.targets import LeaderOf
from chaos.history import ClientLog
from chaos.run.manifest import read_scenario
from chaos.scenario import ScenarioRun, find, views
from chaos.workload import JavaProducer

pytestmark = pytest.mark.integration

PLAN = Plan(2026, 1, (FaultStep(3.0, 6.0, "crash", LeaderOf(RUN_TOPIC, 0)),), 10.0)


@pytest.mark.timeout(300)
def test_a_java_producer_through_a_leader_crash_is_audited_like_librdkafkas(
    scenario_run: Callable[..., ScenarioRun],
) -> None:
    run = scenario_run(find("RN1"), "remediated", replay=PLAN, client_library="java")
    with run:
        run.create_topic(partitions=3, replication_factor=3)
        run.member("consumer-0", duration_s=120.0)
        producer = run.producer(rate=200.0, duration_s=20.0)
        assert isinstance(producer, JavaProducer)
        run.wait_for("the first acks", lambda ev: bool(views.outcomes(ev, "ok")), 60)
        nemesis = run.nemesis(run.plan())
        assert nemesis.wait(120)
        stats = producer.join()
        run.wait_converged(60)
        run.wait_caught_up(60)
        result = run.finish()
    print(f"\n{run.run_id}: {stats}; errors {nemesis.errors}; {result.summary()}")
    assert nemesis.errors == []
    assert stats.sent > 3000
    assert stats.sent == stats.ok + stats.fail + stats.info  # one outcome per value
    assert result.audit.verdict == "pass", result.audit.failed_by
    assert result.audit.facts.totals.acked == stats.ok
    info = read_scenario(run.dir)
    assert info is not None
    assert result.audit_s is not None
    assert info.timings == {"history_s": info.timings["history_s"], "audit_s": round(result.audit_s, 3)}
    assert info.timings["history_s"] > 5.0  # the plan alone is 10 s long
    (java,) = [c for c in info.clients if c.process == "producer-0"]
    assert java.profile == "idempotent (Java client)"
    assert java.settings["delivery.timeout.ms"] == "60000"
    warnings = [
        e
        for e in result.events
        if isinstance(e, ClientLog) and e.process == "producer-0" and e.level == "warning"
    ]
    # the crash as the Java client logs it: a produce request cut off ("Got error produce response … Error:
    # NETWORK_EXCEPTION", "Received invalid metadata error in produce request …": Sender), or a reconnect
    # refused ("Connection to node N … could not be established": NetworkClient)
    assert any(e.facility in ("Sender", "NetworkClient") for e in warnings), warnings[:5]
