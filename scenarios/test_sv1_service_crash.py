"""SV1 `service_crash_under_leader_crash` — a consume-transform-produce service killed while its output's
leader is down, then one instance frozen.

docs/catalog.md 6 SV1. The seeds' crash cases (D3: killed before the commit; O6: killed between the send
and the commit; L6: committed before processing) happen inside a team's own service, whose code the
harness does not see: here the service runs as a black box between an input topic the harness writes and
the run's topic (its output, what the audit reads), :mod:`chaos.service` and docs/your-service.md. In a
gate run with a ``[service]`` table it is the team's service; otherwise the project's example Python
service (``examples/services/python/service.py``).

Timeline (ci):

1. the output (the run's topic) and the input: 3 partitions, RF 3, ``min.insync.replicas=2`` (a gate's
   topic settings over both); the service's instances started (the example: 2), each waited for;
2. a one-member group reads the output (``read_committed`` when the claim is ``exactly_once``); the input
   producer writes 2,000 values at 100/s (idempotent, ``role="input"``);
3. once 100 values came out: the **leader of an output partition is killed** (``Crash``) for 10 s — of
   the first partition whose leader is neither the controller nor the coordinator of the service's group
   (``run.target_partition``): with its coordinator down a service cannot commit, and a kill then finds
   nothing committed to lose —, and 4 s into it
   **service instance 0 is SIGKILLed** (``ServiceCrash``) for 4 s, then started again;
4. after the heal, **the last instance is frozen** (``ServicePause``, SIGSTOP) for 8 s: past the example's
   6-s session its partitions move to the other instance; a service with longer timeouts just stalls;
5. the input producer ends; the output is read until it stays idle 5 s and the group has caught up; the
   service stopped; drain; audit.

What the audit judges: every acknowledged input by where it appears in the output. The input producer's
values are judged by the claim — ``exactly_once`` as ``idempotent`` (no loss, no duplicate in the output,
no aborted read: what the service's transactions promise; the harness's reader may still see a record
twice after its own rebalance, which is not the service's doing).

Variants (claim ``at_least_once``):

- ``vulnerable`` — the example service committing its input offsets *before* producing
  (``COMMIT_ORDER=before``, 20 ms of processing per record): the SIGKILL, with the output's leader down and
  the batch unflushed, loses what it had committed and not written. Audit: ``lost_acked`` > 0: **fail**.
- ``remediated`` — the example service committing *after* its output is flushed: a crash makes it write
  the batch again (duplicates, the price of at-least-once) and loses nothing: **pass**.

Expected symptoms: none at the clients; the service's log shows the kill and the restart, the broker logs
the leader's failover.
"""

from __future__ import annotations

import sys
import time
from typing import cast

from chaos.faults.process import Crash
from chaos.faults.targets import LeaderOf
from chaos.history import Delivery
from chaos.run.events import Isolation
from chaos.run.terms import Guarantee
from chaos.scenario import Scenario, ScenarioRun, Variant, chaos_scenario, views
from chaos.service import ServiceCrash, ServicePause, ServiceSpec, input_client
from chaos.service.examples import PYTHON_DIR
from chaos.workload import IDEMPOTENT

INPUTS = 2_000
RATE = 100.0
LEADER_DOWN_S = 10.0
CRASH_AFTER_S = 4.0
SERVICE_DOWN_S = 4.0
PAUSE_S = 8.0
READ_COMMITTED = {"isolation.level": "read_committed"}
ORDER = {"vulnerable": "before", "remediated": "after"}

SCENARIO = Scenario(
    scenario_id="service_crash_under_leader_crash",
    case_id="SV1",
    title="A consume-transform-produce service killed while its output's leader is down, then frozen",
    source="D3, L6 and O6 inside a team's own service (docs/your-service.md)",
    symptom="records given to the service missing from its output, or written twice, after a crash",
    guarantee="at_least_once",
    client=IDEMPOTENT,
    variants=(
        Variant(
            "vulnerable",
            "the example service commits its input offsets before producing",
            expected_verdict="fail",
        ),
        Variant(
            "remediated",
            "the example service commits after its output is flushed",
            expected_verdict="pass",
        ),
    ),
    remediation=(
        "Commit the input offsets only after the output is acknowledged (flush, then commit), and make the "
        "output idempotent downstream — or run the service transactionally (Kafka Streams "
        "processing.guarantee=exactly_once_v2, or send_offsets_to_transaction) and read it read_committed.",
    ),
    related=("D3", "L6", "O6"),
)


def example_service(variant: str) -> ServiceSpec:
    """The project's example Python service of a variant (``examples/services/python``)."""
    return ServiceSpec(
        [sys.executable, str(PYTHON_DIR / "service.py")],
        env={
            "BOOTSTRAP_SERVERS": "{bootstrap}",
            "INPUT_TOPIC": "{input_topic}",
            "OUTPUT_TOPIC": "{output_topic}",
            "GROUP_ID": "{group}",
            "COMMIT_ORDER": ORDER[variant],
            "PROCESS_MS": "20" if variant == "vulnerable" else "0",
            "SESSION_TIMEOUT_MS": "6000",
        },
        instances=2,
        id="value",
        ready_pattern="assigned",
    )


@chaos_scenario(SCENARIO)
def test_sv1(run: ScenarioRun) -> None:
    spec = run.team_service or example_service(run.variant.name)
    exactly_once = run.variant.guarantee == "exactly_once"
    topic_config = {k: str(v).lower() for k, v in (run.variant.topic_config or {}).items()}
    run.create_topic(partitions=3, replication_factor=3, config={"min.insync.replicas": "2"})
    service = run.service(spec, input_partitions=3, input_config=topic_config)
    run.member("consumer-0", overrides=READ_COMMITTED if exactly_once else None, duration_s=240)
    producer = run.producer(
        "producer-0",
        topic=service.input_topic,
        role="input",
        client=None if exactly_once else input_client(cast(Guarantee, run.variant.guarantee)),
        rate=RATE,
        count=INPUTS,
        duration_s=90,
    )
    run.wait_for("the service's first output", lambda ev: len(views.delivered_ids(ev)) >= 100, 90)
    target = run.target_partition(avoid_coordinator=True, group=service.group)
    with run.fault(Crash, LeaderOf(run.topic, target.partition)):
        time.sleep(CRASH_AFTER_S)
        with run.fault(ServiceCrash, service[0]):
            time.sleep(SERVICE_DOWN_S)
        time.sleep(LEADER_DOWN_S - CRASH_AFTER_S - SERVICE_DOWN_S)
    with run.fault(ServicePause, service.instances[-1]):
        time.sleep(PAUSE_S)
    producer.join()
    run.wait_quiet("the output idle", lambda e: isinstance(e, Delivery), 5.0, 120)
    isolation: Isolation | None = "read_committed" if exactly_once else None
    run.wait_caught_up(60, topic=run.topic, isolation=isolation)
    result = run.finish(
        isolations=("read_committed",) if exactly_once else ("read_uncommitted", "read_committed")
    )

    lost = result.count("lost_acked")
    print(f"\n{run.variant.name}: {spec.describe()}; lost {lost}; {result.summary()}")
    if run.variant.name == "vulnerable" and run.team_service is None:
        assert lost > 0, "the broken example lost nothing: the kill fell outside a committed, unflushed batch"
    else:
        assert lost == 0
