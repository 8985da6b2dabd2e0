"""A team's own service under chaos: the example services of ``examples/services/`` run as black boxes
between the run's input topic and its output topic (the run's topic, what the audit reads), with faults on
the brokers and on the service itself (:mod:`chaos.service`, docs/your-service.md).

Each test is bounded (a few hundred records, faults of seconds) so it stays under three minutes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from chaos.audit.verdict import judge
from chaos.cluster.engine import LABEL, docker_client
from chaos.faults.process import Crash
from chaos.faults.targets import LeaderOf
from chaos.report import render_run
from chaos.scenario import Scenario, ScenarioRun, Variant, views
from chaos.service import ServiceCrash, ServicePause, ServiceSpec, input_client
from chaos.service.examples import PYTHON_DIR, ensure_python_image, ensure_streams_app
from chaos.workload import IDEMPOTENT
from tests.story_check import contradictions, sentences_of

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]

SERVICE = Scenario(
    scenario_id="team_service_under_chaos",
    case_id="X30",
    title="A team's consume-transform-produce service between an input and an output topic",
    source="tests/integration/test_service.py",
    symptom="a service loses or duplicates what it was given when it or a broker fails",
    client=IDEMPOTENT,
    guarantee="at_least_once",
    expected_verdict="pass",
    variants=(
        Variant("streams_eos", "Kafka Streams, exactly_once_v2", guarantee="exactly_once"),
        Variant("streams_alos", "Kafka Streams, at_least_once"),
        Variant("python_broken", "commits before producing", expected_verdict="fail"),
        Variant("python_pause", "one of two instances frozen past max.poll.interval.ms"),
        Variant("python_image", "the Python service as a container"),
    ),
)
OUTPUT = {"min.insync.replicas": "2"}
READ_COMMITTED = {"isolation.level": "read_committed"}


def streams_spec(run: ScenarioRun, guarantee: str, state: Path) -> ServiceSpec:
    app = ensure_streams_app(run.cluster.config.kafka_version)
    return ServiceSpec(
        app.command(),
        env={
            "BOOTSTRAP_SERVERS": "{bootstrap}",
            "INPUT_TOPIC": "{input_topic}",
            "OUTPUT_TOPIC": "{output_topic}",
            "APPLICATION_ID": "{group}",
            "CLIENT_ID": "streams-{instance}",
            "PROCESSING_GUARANTEE": guarantee,
            # Streams' own defaults: 100 ms under exactly_once_v2 (1 s here), 30 s under at_least_once — so
            # a SIGKILL leaves the killed instance's processed, uncommitted input to be processed again
            "COMMIT_INTERVAL_MS": "1000" if guarantee == "exactly_once_v2" else "30000",
            "STATE_DIR": f"{state}/{{instance}}",
            "STREAMS_SESSION_TIMEOUT_MS": "6000",
            "TRANSACTION_TIMEOUT_MS": "10000",
        },
        instances=2,
        name="streams",
        ready_pattern=r"-> RUNNING",
        ready_timeout_s=90,
    )


def python_env(order: str, **extra: str) -> dict[str, str]:
    return {
        "BOOTSTRAP_SERVERS": "{bootstrap}",
        "INPUT_TOPIC": "{input_topic}",
        "OUTPUT_TOPIC": "{output_topic}",
        "GROUP_ID": "{group}",
        "COMMIT_ORDER": order,
        "SESSION_TIMEOUT_MS": "6000",
        **extra,
    }


def run_streams(run: ScenarioRun, guarantee: str, state: Path) -> tuple[int, str]:
    """2 Streams instances; 2,400 inputs at 120/s; the output's partition-0 leader crashed for 10 s, and
    instance 0 SIGKILLed 6 s later, restarted 8 s after. Returns the acknowledged inputs and the kill's
    proof."""
    run.create_topic(partitions=3, replication_factor=3, config=OUTPUT)
    service = run.service(streams_spec(run, guarantee, state), input_partitions=3)
    run.member("consumer-0", overrides=READ_COMMITTED, duration_s=170)
    # exactly_once: the input judged idempotent (the plain input producer cannot claim exactly_once), the
    # facts judged again under exactly_once by the test
    client = None if guarantee == "exactly_once_v2" else input_client("at_least_once")
    producer = run.producer(
        "producer-0", topic=service.input_topic, role="input", client=client, rate=120, count=2400
    )
    run.wait_for("the service's first output", lambda ev: len(views.delivered_ids(ev)) >= 100, 60)
    with run.fault(Crash, LeaderOf(run.topic, 0)):
        time.sleep(6)
        crash = run.fault(ServiceCrash, service[0])
        with crash:
            time.sleep(8)
        time.sleep(2)
    stats = producer.join()
    run.wait_for(
        "every acknowledged input in the output",
        lambda ev: views.acked_ids(ev) <= views.delivered_ids(ev),
        90,
    )
    run.wait_caught_up(60, topic=run.topic, isolation="read_committed")
    assert crash.record is not None
    assert crash.record.effect is not None
    return stats.ok, crash.record.effect.evidence


@pytest.mark.own_cluster
@pytest.mark.timeout(600)
def test_the_gate_runs_a_teams_streams_service_exactly_once(tmp_path: Path) -> None:
    """``chaos gate examples/gate-service.toml``, as a team's pipeline runs it (a process of its own, its own
    cluster; audited by the reference engine to keep the test short): the Kafka Streams example with
    exactly_once_v2 through SV1 — the output's leader killed, one instance SIGKILLed and restarted during
    it, the other frozen — claims exactly_once; every acknowledged input must be in the output exactly once
    (read_committed), and the gate exits 0 with gate.md and JUnit written as for a team's settings."""
    out = tmp_path / "gate"
    chaos = Path(sys.executable).with_name("chaos")
    env = {**os.environ, "CHAOS_AUDIT_ENGINE": "reference"}
    proc = subprocess.run(
        [str(chaos), "gate", str(ROOT / "examples" / "gate-service.toml"), "--out", str(out), "--seed", "7"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=540,
        check=False,
    )
    output = (proc.stdout + proc.stderr).decode(errors="replace")
    print(f"\nchaos gate: exit {proc.returncode}\n{output[-3000:]}")
    data = json.loads((out / "gate.json").read_text(encoding="utf-8"))
    cases = {c["case"]: c for c in data["cases"]}
    assert set(cases) == {"SV1"}
    assert data["plan"]["run"] == ["SV1"]
    assert (proc.returncode, data["exit_code"], data["verdict"]) == (0, 0, "pass"), data["headline"]
    assert cases["SV1"]["outcome"] == "pass"
    assert data["configuration"]["service"]["env"][:3] == ["BOOTSTRAP_SERVERS", "INPUT_TOPIC", "OUTPUT_TOPIC"]
    run_dir = out / Path(cases["SV1"]["attempts"][-1]["report"]).parent
    audit = json.loads((run_dir / "audit.json").read_text(encoding="utf-8"))
    totals = audit["facts"]["totals"]
    print(f"SV1: acked {totals['acked']}, output records {totals['log_records']}")
    assert totals["acked"] > 1000
    assert totals["log_records"] == totals["acked"]  # each acknowledged input once in the output
    logs = sorted(p.name for p in (run_dir / "logs").glob("streams-*.log"))
    assert logs == ["streams-0.log", "streams-1.log"]
    # the faults' proofs held (a fault that did not land makes the case inconclusive, never a pass)
    assert (out / "junit.xml").is_file()
    assert "SV1" in (out / "gate.md").read_text(encoding="utf-8")


def test_streams_at_least_once_duplicates_and_loses_nothing(
    scenario_run: Callable[..., ScenarioRun], tmp_path: Path
) -> None:
    """at_least_once under the same faults: nothing acknowledged is lost, the run passes at_least_once, and
    what the SIGKILL made the service redo — the input the killed instance processed since its last
    commit (Streams commits every 30 s under at_least_once) — shows as duplicates in the output, which
    exactly_once forbids."""
    with scenario_run(SERVICE, "streams_alos") as run:
        acked, proof = run_streams(run, "at_least_once", tmp_path)
        result = run.finish()
    facts = result.audit.facts
    eos = judge(facts, "exactly_once", result.audit.engine)
    alos = judge(facts, "at_least_once", result.audit.engine)
    duplicates = result.count("duplicate_in_log")
    print(
        f"\nacked {acked}; kill: {proof}; output records {facts.totals.log_records}; duplicates "
        f"{duplicates}; exactly_once {eos.verdict} {eos.failed_by}; at_least_once "
        f"{alos.verdict}; {result.summary()}"
    )
    assert result.count("lost_acked") == 0
    assert alos.verdict == "pass", alos.failed_by
    assert duplicates > 0, "the SIGKILL left no processed, uncommitted input to redo"
    assert eos.verdict == "fail"
    assert "duplicate_in_log" in eos.failed_by


def test_broken_service_loses_inputs(scenario_run: Callable[..., ScenarioRun]) -> None:
    with scenario_run(SERVICE, "python_broken") as run:
        run.create_topic(partitions=3, replication_factor=3, config=OUTPUT)
        spec = ServiceSpec(
            [sys.executable, str(PYTHON_DIR / "service.py")],
            env=python_env("before", PROCESS_MS="10"),
            id="value",
            ready_pattern="assigned",
        )
        service = run.service(spec)
        run.member("consumer-0")
        client = input_client("at_least_once")
        producer = run.producer(
            "producer-0", topic=service.input_topic, role="input", client=client, rate=100, count=1500
        )
        run.wait_for("the service's first output", lambda ev: len(views.delivered_ids(ev)) >= 200, 60)
        with run.fault(ServiceCrash, service[0]):
            time.sleep(3)
        producer.join()
        run.wait_quiet("the output idle", lambda e: type(e).__name__ == "Delivery", 5.0, 90)
        run.wait_caught_up(30)
        result = run.finish()
    lost = result.count("lost_acked")
    print(f"\nlost {lost} of {result.audit.facts.totals.acked}; {result.summary()}")
    assert lost > 0
    assert result.audit.verdict == "fail"
    assert "lost_acked" in result.audit.failed_by
    # the page tells it: the service's crash, and where the missing inputs are — the audit's own figures
    story = sentences_of(render_run(result.run_dir).page)
    print("\n".join(story))
    assert any("service_crash service-0" in s for s in story), story
    assert contradictions(story, result.audit) == []
    assert f"found {lost:,} acknowledged" in story[0]


def test_paused_instance_hands_its_partitions_over(scenario_run: Callable[..., ScenarioRun]) -> None:
    with scenario_run(SERVICE, "python_pause") as run:
        run.create_topic(partitions=3, replication_factor=3, config=OUTPUT)
        spec = ServiceSpec(
            [sys.executable, str(PYTHON_DIR / "service.py")],
            env=python_env("after", MAX_POLL_INTERVAL_MS="6000"),
            instances=2,
            ready_pattern="assigned",
        )
        service = run.service(spec)
        run.member("consumer-0")
        client = input_client("at_least_once")
        producer = run.producer(
            "producer-0", topic=service.input_topic, role="input", client=client, rate=100, count=2000
        )
        run.wait_for("the service's first output", lambda ev: len(views.delivered_ids(ev)) >= 200, 60)
        before = service[1].output().count("assigned 3")
        with run.fault(ServicePause, service[0]) as pause:
            run.wait_until(
                "the other instance owns every partition",
                lambda: (
                    "assigned 3" in service[1].output()[-4000:]
                    and service[1].output().count("assigned 3") > before
                ),
                30,
            )
            time.sleep(2)
        producer.join()
        run.wait_for(
            "every input in the output", lambda ev: views.acked_ids(ev) <= views.delivered_ids(ev), 60
        )
        run.wait_caught_up(30)
        result = run.finish()
    assert pause.record is not None
    assert pause.record.effect is not None
    # the handover as the output shows it: the paused instance's input partitions wait from the freeze
    # until the other instance, given them by the rebalance, writes their records to the output
    paused_at, healed_at = views.fault_window(result.events, pause)
    consumer = result.audit.facts.availability.consumer
    handover = consumer.longest_service_gap()
    stalls = {f"{g.topic}-{g.partition}": round(g.gap_s, 1) for g in consumer.service_gaps}
    print(f"\npause: {pause.record.effect.evidence}; input stalls {stalls}; {result.summary()}")
    assert pause.record.effect.observed
    assert result.count("lost_acked") == 0
    assert result.audit.verdict == "pass", result.audit.failed_by
    assert handover is not None
    assert handover.topic == service.input_topic
    assert handover.resumed
    assert healed_at is not None
    assert paused_at - 1.0 <= handover.start_mono <= healed_at, (handover, paused_at, healed_at)
    assert handover.gap_s >= 3.0, handover
    assert "Longest stall of a service's input" in render_run(result.run_dir).page.read_text()


def test_service_image_is_reaped(scenario_run: Callable[..., ScenarioRun]) -> None:
    image = ensure_python_image()
    with scenario_run(SERVICE, "python_image") as run:
        run.create_topic(partitions=3, replication_factor=3, config=OUTPUT)
        spec = ServiceSpec(image=image, env=python_env("after"), id="value", ready_pattern="assigned")
        service = run.service(spec)
        container = service[0]._container
        assert container.labels.get(LABEL) == run.cluster.run_id
        run.member("consumer-0")
        client = input_client("at_least_once")
        producer = run.producer(
            "producer-0", topic=service.input_topic, role="input", client=client, rate=200, count=600
        )
        producer.join()
        run.wait_for(
            "every input in the output", lambda ev: views.acked_ids(ev) <= views.delivered_ids(ev), 60
        )
        run.wait_caught_up(30)
        result = run.finish()
        log = service[0].log_path
    left = docker_client().containers.list(all=True, filters={"label": f"{LABEL}.role=service"})
    print(f"\n{result.summary()}; service containers left: {[c.name for c in left]}")
    assert result.audit.verdict == "pass", result.audit.failed_by
    assert result.audit.facts.totals.acked == 600
    assert not [c for c in left if c.id == container.id]
    assert "service consuming" in log.read_text()
