"""A synthetic run directory (no Kafka): a recorded history, ``scenario.json``, ``audit.json`` and broker
logs, shaped like a PB1-style network cut of broker 2. Used by the report's tests and to measure pages.

``hostile=True`` puts ``<script>`` / ``</script>`` into every run-provided string a page shows (group name,
fault target and parameters, client log facility and message, error message, audit example value id and
topic, scenario texts and settings, log lines), so tests can prove they render as text.
``crashed=True`` leaves what a killed run leaves: JSONL segments only, no ``audit.json``, no scenario end.
``evidence`` writes it as the run's ``evidence.json`` (:func:`sample_evidence` builds one); ``clean_audit``
drops the lost writes, so the audit passes.
"""

from __future__ import annotations

import calendar
import os
import time
from pathlib import Path
from typing import Final, TypedDict

from chaos.cluster.logs import write_log
from chaos.history import (
    ClientLog,
    ClusterSample,
    DrainEnd,
    DrainRead,
    Event,
    FaultEvent,
    PartitionOffset,
    PartitionState,
    Rebalance,
    Recorder,
    SendInvoke,
    SendOutcome,
    json_text,
    value_id_for,
)
from chaos.run.events import Delivery
from chaos.run.evidence import Check, Evidence, write_evidence
from chaos.run.manifest import ExpectedSymptom, ScenarioInfo, ThresholdResult, TopicInfo, write_scenario

HOSTILE: Final = "</script><script>alert('xss')</script>"
"""A string that would end the page's script element and run code if a page ever failed to escape it."""
SAMPLE_T0: Final = calendar.timegm((2026, 1, 15, 12, 0, 0, 0, 0, 0))
TOPIC: Final = "chaos-sample"
PARTITIONS: Final = 3
FAULT_AT: Final = 20.0
FAULT_HEAL: Final = 32.0
SAMPLE_SYMPTOMS: Final = (
    ExpectedSymptom("error_code", "NOT_ENOUGH_REPLICAS", "acks=all produce below min.insync.replicas"),
    ExpectedSymptom("error_code", "_MSG_TIMED_OUT", "messages time out while the leader is silent"),
)
"""The sample scenario's declared error-code symptoms, whose checks :func:`sample_evidence` records."""


class _Clock(TypedDict):
    ts: float
    mono: float


def write_sample_run(
    run_dir: str | os.PathLike[str],
    *,
    seconds: int = 60,
    rate: int = 50,
    hostile: bool = False,
    crashed: bool = False,
    t0: float = SAMPLE_T0,
    evidence: Evidence | None = None,
    clean_audit: bool = False,
) -> Path:
    """Write a synthetic run into ``run_dir`` (created; must not hold a history) and return it."""
    path = Path(run_dir)
    path.mkdir(parents=True, exist_ok=True)
    mark = f" {HOSTILE}" if hostile else ""
    run_id = "sample-run"
    group = f"group{mark}" if hostile else "sample-group"
    mono0 = 1000.0
    events: list[Event] = []

    def at(t: float) -> _Clock:
        return {"ts": t0 + t, "mono": mono0 + t}

    seq = 0
    offsets = [0] * PARTITIONS
    acked: list[tuple[str, int, int, float]] = []
    for second in range(seconds):
        for i in range(rate):
            t = second + i / rate
            vid = value_id_for(run_id, "producer-0", seq)
            part = seq % PARTITIONS
            events.append(
                SendInvoke(
                    run_id=run_id,
                    process="producer-0",
                    value_id=vid,
                    producer="producer-0",
                    seq=seq,
                    topic=TOPIC,
                    key=f"k{seq % 16}",
                    **at(t),
                )
            )
            in_fault = FAULT_AT <= t < FAULT_HEAL
            if in_fault and part == 1 and t < FAULT_AT + 7:
                events.append(
                    SendOutcome(
                        run_id=run_id,
                        process="producer-0",
                        value_id=vid,
                        outcome="info",
                        error="NOT_ENOUGH_REPLICAS",
                        retriable=True,
                        fatal=False,
                        message=f"Broker: Not enough in-sync replicas{mark}",
                        **at(t + 0.5),
                    )
                )
            else:
                latency = 4.0 + (seq % 7) + (600.0 if in_fault and part == 1 else 0.0)
                events.append(
                    SendOutcome(
                        run_id=run_id,
                        process="producer-0",
                        value_id=vid,
                        outcome="ok",
                        partition=part,
                        offset=offsets[part],
                        latency_ms=latency,
                        **at(t + latency / 1000),
                    )
                )
                acked.append((vid, part, offsets[part], t + latency / 1000))
                offsets[part] += 1
            seq += 1
    members = {"consumer-0": "member-a", "consumer-1": "member-b"}
    for vid, part, offset, t in acked:
        process = "consumer-0" if part != 2 else "consumer-1"
        events.append(
            Delivery(
                run_id=run_id,
                process=process,
                group=group,
                topic=TOPIC,
                partition=part,
                offset=offset,
                value_id=vid,
                member=members[process],
                generation=1,
                **at(t + 0.02),
            )
        )
    for process, member in members.items():
        parts = (
            (PartitionOffset(topic=TOPIC, partition=0), PartitionOffset(topic=TOPIC, partition=1))
            if process == "consumer-0"
            else (PartitionOffset(topic=TOPIC, partition=2),)
        )
        events.append(
            Rebalance(
                run_id=run_id,
                process=process,
                action="assign",
                group=group,
                partitions=parts,
                member=member,
                generation=1,
                **at(0.1),
            )
        )
    events.append(
        Rebalance(
            run_id=run_id,
            process="consumer-1",
            action="revoke",
            group=group,
            partitions=(PartitionOffset(topic=TOPIC, partition=2),),
            member="member-b",
            generation=1,
            **at(40.0),
        )
    )
    events.append(
        Rebalance(
            run_id=run_id,
            process="consumer-1",
            action="assign",
            group=group,
            partitions=(PartitionOffset(topic=TOPIC, partition=2),),
            member="member-b",
            generation=2,
            **at(40.4),
        )
    )
    target = f"broker-2{mark}"
    params = json_text({"note": HOSTILE} if hostile else {"paths": ["ext", "int", "ctl"]})
    events.append(
        FaultEvent(
            run_id=run_id,
            process="nemesis",
            action="inject",
            fault="network_cut",
            target=target,
            params=params,
            **at(FAULT_AT),
        )
    )
    events.append(
        FaultEvent(
            run_id=run_id,
            process="nemesis",
            action="heal",
            fault="network_cut",
            target=target,
            params=params,
            **at(FAULT_HEAL),
        )
    )
    for second in range(seconds):
        t = second + 0.5
        out = FAULT_AT + 6 <= t < FAULT_HEAL + 1
        states = []
        for p in range(PARTITIONS):
            moved = p == 1 and FAULT_AT + 7 <= t < FAULT_HEAL + 2
            leader = 1 if moved else p + 1
            isr = (1, 3) if out else (1, 2, 3)
            states.append(
                PartitionState(topic=TOPIC, partition=p, leader=leader, isr=isr, replicas=(1, 2, 3))
            )
        if second == 25:
            events.append(
                ClusterSample(
                    run_id=run_id,
                    process="sampler",
                    error="_TIMED_OUT",
                    message="describe_topics timed out",
                    **at(t),
                )
            )
            continue
        members_now = ("member-a",) if 40 <= second < 41 else ("member-a", "member-b")
        events.append(
            ClusterSample(
                run_id=run_id,
                process="sampler",
                controller=1,
                brokers=(1, 2, 3),
                partition_states=tuple(states),
                offline_partitions=0,
                under_replicated=PARTITIONS if out else 0,
                group=group,
                group_state="PREPARING_REBALANCE" if 40 <= second < 41 else "STABLE",
                group_members=members_now,
                duration_ms=3.0,
                **at(t),
            )
        )
    for t in (FAULT_AT + 1.0, FAULT_AT + 9.0):
        events.append(
            ClientLog(
                run_id=run_id,
                process="producer-0",
                level="warning",
                facility=f"REQTMOUT{mark}" if hostile else "REQTMOUT",
                message=f"127.0.0.1:19092/2: Timed out ProduceRequest in flight{mark}",
                **at(t),
            )
        )
    events.append(
        ClientLog(
            run_id=run_id,
            process="consumer-1",
            level="error",
            facility="ERROR_CB",
            error="_TRANSPORT",
            message="Broker transport failure",
            **at(FAULT_AT + 2),
        )
    )
    if not crashed:
        end = seconds + 2.0
        for vid, part, offset, _ in acked:
            events.append(
                DrainRead(
                    run_id=run_id,
                    process="drain",
                    isolation="read_uncommitted",
                    topic=TOPIC,
                    partition=part,
                    offset=offset,
                    value_id=vid,
                    **at(end),
                )
            )
        for p in range(PARTITIONS):
            events.append(
                DrainEnd(
                    run_id=run_id,
                    process="drain",
                    isolation="read_uncommitted",
                    topic=TOPIC,
                    partition=p,
                    outcome="ok",
                    low_offset=0,
                    high_offset=offsets[p],
                    **at(end + 0.5),
                )
            )
    events.sort(key=lambda e: e.ts)
    cut = int(len(events) * 0.8) if crashed else len(events)
    with Recorder(path, run_id, keep_jsonl=crashed) as history:
        for ev in events[:cut]:
            history.record(ev)
    if crashed:
        (path / "history" / "events.parquet").unlink()
    _write_logs(path / "logs", t0, seconds, hostile)
    _write_scenario(path, t0, seconds, hostile, crashed)
    if not crashed:
        _write_audit(path, t0, mono0, hostile, clean_audit)
    if evidence is not None:
        write_evidence(path, evidence)
    return path


def _docker_ts(ts: float) -> str:
    whole = int(ts)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{int((ts - whole) * 1e9):09d}Z"


def _log4j_ts(ts: float) -> str:
    whole = int(ts)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(whole)) + f",{int((ts - whole) * 1000):03d}"


def _write_logs(directory: Path, t0: float, seconds: int, hostile: bool) -> None:
    """``broker-{1,2,3}.log.gz`` as :meth:`KafkaCluster.capture_logs` saves them."""
    for broker in (1, 2, 3):
        lines = []
        for second in range(0, seconds, 2):
            ts = t0 + second + 0.25
            lines.append(
                f"{_docker_ts(ts)} [{_log4j_ts(ts)}] INFO [BrokerServer id={broker}] heartbeat ok "
                f"(kafka.server.BrokerLifecycleManager)"
            )
            if broker == 1 and second == int(FAULT_AT) + 6:
                ts = t0 + FAULT_AT + 6.2
                lines.append(
                    f"{_docker_ts(ts)} [{_log4j_ts(ts)}] INFO [Partition {TOPIC}-1 broker=1] Shrinking "
                    f"ISR from 1,2,3 to 1,3. Leader: (highWatermark: 115, endOffset: 120). Out of sync "
                    f"replicas: (brokerId: 2, endOffset: 115). (kafka.cluster.Partition)"
                )
                lines.append(
                    "java.io.IOException: Connection to 2 was disconnected before the response was read"
                )
            if hostile and broker == 2 and second == int(FAULT_AT):
                ts = t0 + FAULT_AT + 1.0
                lines.append(f"{_docker_ts(ts)} [{_log4j_ts(ts)}] WARN client said {HOSTILE}")
        write_log(directory, f"broker-{broker}", ("\n".join(lines) + "\n").encode("utf-8"))


def _write_scenario(path: Path, t0: float, seconds: int, hostile: bool, crashed: bool) -> None:
    mark = f" {HOSTILE}" if hostile else ""
    info = ScenarioInfo(
        scenario_id="pb1_cut_one_broker_then_start_client",
        title=f"Partitioned broker: network cut of one broker{mark}",
        case_id="PB1",
        source="002 § Troubleshooting › 场景3",
        symptom="通过加日志，发现错误都是发生在endOffsets这里，默认的timeout应该是30s "
        f"(the errors all happen in endOffsets; the default timeout should be 30 s){mark}",
        guarantee="at_least_once",
        variant="vulnerable",
        expected_verdict="fail",
        client_profile="at_least_once",
        producer_config={
            "acks": "all",
            "retries": 10,
            "enable.idempotence": False,
            "client.note": HOSTILE if hostile else "sample",
        },
        consumer_config={"isolation.level": "read_committed", "enable.auto.commit": False},
        topic=TopicInfo(TOPIC, PARTITIONS, 3, {"min.insync.replicas": 2}),
        broker_config={"replica.lag.time.max.ms": 6000, "unclean.leader.election.enable": False},
        time_profile="ci",
        brokers=3,
        seed=4242,
        plan={
            "format": 1,
            "seed": 4242,
            "brokers": 3,
            "steps": [
                {
                    "at_s": FAULT_AT,
                    "duration_s": FAULT_HEAL - FAULT_AT,
                    "kind": "network_cut",
                    "target": {"role": "broker", "id": 2},
                    "params": {},
                }
            ],
        },
        expected_symptoms=(
            *SAMPLE_SYMPTOMS,
            ExpectedSymptom(
                "client_log", "Timed out ProduceRequest", "librdkafka REQTMOUT on the cut broker"
            ),
            ExpectedSymptom("broker_log", "Shrinking ISR", "the leader drops the cut follower"),
            ExpectedSymptom("broker_log", r"Failed to elect leader", "no eligible leader"),
        ),
        remediation=(
            "Remove the dead node from bootstrap.servers "
            "(修改 consumer.properties.bootstrap.servers，移除坏节点).",
            f"Raise the per-call timeout of the offset lookup above the fault's duration.{mark}",
        ),
        thresholds=(ThresholdResult("longest_outage_s", 30.0, 7.5, True, "s"),),
        nodeid="scenarios/test_partitioned.py::test_pb1[ci]",
        started_ts=t0,
        ended_ts=None if crashed else t0 + seconds + 3,
        outcome=None if crashed else "failed",
        error="KafkaException: _TIMED_OUT" + mark if crashed else None,
    )
    write_scenario(path, info)


def _write_audit(path: Path, t0: float, mono0: float, hostile: bool, clean: bool) -> None:
    from chaos.audit.facts import (
        ANOMALIES,
        AnomalyReport,
        AuditFacts,
        Availability,
        Example,
        FaultWindow,
        LatencyStats,
        Totals,
    )
    from chaos.audit.verdict import judge

    topic = f"{TOPIC}{HOSTILE}" if hostile else TOPIC
    lost_id = f"sample-run:producer-0:{HOSTILE}" if hostile else "sample-run:producer-0:1001"
    reports = {name: AnomalyReport(0) for name in ANOMALIES}
    if not clean:
        reports["lost_acked"] = AnomalyReport(
            2,
            (
                Example(lost_id, topic, 1, 340, t0 + 21.02),
                Example("sample-run:producer-0:1004", TOPIC, 1, 341, t0 + 21.08),
            ),
        )
    reports["duplicate_delivery_after_rebalance"] = AnomalyReport(
        14,
        tuple(
            Example(f"sample-run:producer-0:{2000 + 3 * i}", TOPIC, 2, 660 + i, t0 + 40.5 + i / 50)
            for i in range(10)
        ),
    )
    reports["lost_indeterminate"] = AnomalyReport(
        1, (Example("sample-run:producer-0:1000", TOPIC, 1, None, t0 + 20.5),)
    )
    window = FaultWindow(
        "network_cut",
        f"broker-2{' ' + HOSTILE if hostile else ''}",
        mono0 + FAULT_AT,
        mono0 + FAULT_HEAL,
        LatencyStats(1000, 6.0, 10.0),
        LatencyStats(500, 8.0, 609.0),
        LatencyStats(1400, 6.0, 10.0),
        0.004,
        0.03,
    )
    facts = AuditFacts(
        "sample-run",
        tuple((name, reports[name]) for name in ANOMALIES),
        Availability(7.5, mono0 + FAULT_AT, mono0 + FAULT_AT + 7.5, (window,)),
        Totals(3000, 2880, 0, 120, 2878, 2892),
    )
    result = judge(facts, "at_least_once", "reference")
    (path / "audit.json").write_text(result.to_json(), encoding="utf-8")


def sample_evidence(*, cut_landed: bool, strict: bool = False) -> Evidence:
    """The checks a scenario run of the sample would record: the runner's check of two declared symptoms,
    one symptom of the scenario's own, and the precondition that the cut isolated broker 2."""
    return Evidence(
        (
            Check("symptom", SAMPLE_SYMPTOMS[0].check_description, True, "70 events, first from producer-0"),
            Check("symptom", SAMPLE_SYMPTOMS[1].check_description, False, "no such event in the history"),
            Check("symptom", "the consumer stalled for at least 6 s", True, "stalled 7.5 s"),
            Check(
                "precondition",
                "the cut isolated broker 2 (its followers left the ISR)",
                cut_landed,
                "ISR shrank to [1, 3] at t+26.2 s" if cut_landed else "the ISR never shrank",
            ),
        ),
        strict,
    )
