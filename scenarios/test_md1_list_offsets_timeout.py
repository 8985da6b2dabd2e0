"""MD1 `md_list_offsets_times_out_request_timeout` — end offsets through a slow leader time out.

docs/catalog.md 1C MD1 (seed 002 § Troubleshooting › 造成kafka client端程序读取 metadata 超过默认 30s 抛错,
the
heading and its lead-in). The Java doc the seed quotes: ``endOffsets(...)`` throws ``TimeoutException`` "if
the offset metadata could not be fetched before the amount of time allocated by request.timeout.ms
expires"; the seed's restore (``endOffsets(tp) - 2`` → ``assign`` → ``seek`` → ``poll``) failed with
``TimeoutException: Failed to get offsets by times in 30000ms``. The fault: latency above the timeout (or a
black hole: that is PB1) on the broker that leads the snapshot partition, present **before** the client
starts.

Here the fault is a Toxiproxy ``latency`` toxic of L on broker B's client path only (``ext``, responses:
``downstream``), so the cluster itself is untouched — no fencing, no leader change, the partition stays
led by B — and only the client's round trips to B are slow. librdkafka's ``get_watermark_offsets()`` (the
Java ``endOffsets``) sends ListOffsets to the partition's leader; a fresh client's first exchange with B
(ApiVersions) and the ListOffsets answer each pay L, so the call needs ≈ 2·L. librdkafka has no
``request.timeout.ms`` for consumers (it is the producer's broker-side ack timeout); the Java deadline is
the call's own ``timeout`` argument, T.

Timeline (every variant): topic of 3 partitions, RF 3, ``min.insync.replicas=2``; 60 records produced
(acks=all) and consumed by a one-member group; B = the leader of one partition, not the active controller;
latency L on B's ``ext`` path; then (the client starts after the fault) the restore reader runs over every
partition, B's first, each with a fresh consumer; heal; drain; audit (reference).

Times (scaled by the time profile from the seed's ``request.timeout.ms`` R = 30 s faithful, 6 s ``ci``):
T_vulnerable = R / 5 (1.2 s ``ci``, 6 s faithful), L = 2 · T_vulnerable, T_remediated = 4 · L.

- ``vulnerable`` — the seed's configuration: the per-call timeout T below the latency (L = 2 T). Expected:
  B's partition ``list_offsets`` raises ``KafkaException`` ``_TIMED_OUT`` ("Local: Timed out") after
  ≈ T (≥ 0.95 T, ≤ T + 1.5 s); the two other partitions, led by healthy brokers, are restored in < L.
- ``remediated`` — the seed's remedy 2 (``endOffsets(tp, Duration.ofMillis(300000))`` against a measured
  ~2 min): T above the latency (4 L). Expected: every partition restored; B's ``list_offsets`` succeeds
  after ≥ 0.95 L (the answer did come through the slow path, so T_vulnerable could not have sufficed) and
  within T.

Client log: no connection error and no ``REQTMOUT`` line in either variant — the broker is slow, not
silent, and librdkafka's own request timeout (``socket.timeout.ms``, 12 s ``ci``) is longer than T.

Verdicts: only reads are faulted, so both variants audit ``pass`` (at_least_once, no loss, no duplicate).
The symptoms are recorded as evidence from the history: ``probe_call`` events (operation, error code,
duration, timeout passed); the ``latency`` fault window (in place around every call) and, in
``remediated``, B's answer taking ≥ 0.95 L are the case's preconditions.
"""

from __future__ import annotations

from chaos.faults.toxics import Latency
from chaos.scenario import ExpectedSymptom, Scenario, ScenarioRun, Variant, chaos_scenario, views
from chaos.scenario.restore import given_t, restore_calls, restore_logs, restored_everything, timed_out_at_t
from chaos.workload import AT_LEAST_ONCE

RECORDS = 60

SCENARIO = Scenario(
    scenario_id="md_list_offsets_times_out_request_timeout",
    case_id="MD1",
    title="Slow metadata reads: end offsets of a partition whose leader is slow time out",
    source="002 § Troubleshooting › 造成kafka client端程序读取 metadata 超过默认 30s 抛错",
    symptom=(
        "TimeoutException - if the offset metadata could not be fetched before the amount of time allocated "
        "by request.timeout.ms expires — org.apache.kafka.common.errors.TimeoutException: Failed to get "
        "offsets by times in 30000ms"
    ),
    guarantee="at_least_once",
    expected_verdict="pass",
    client=AT_LEAST_ONCE,
    topic_config={"min.insync.replicas": 2},
    variants=(
        Variant(
            "vulnerable",
            "Latency L on the leader's client path before the client starts; per-call timeout T = L / 2.",
            expected_symptoms=(
                ExpectedSymptom(
                    "error_code", "_TIMED_OUT", "end offsets of the slow leader's partition time out after T"
                ),
            ),
        ),
        Variant("remediated", "Same latency; per-call timeout raised above it (T = 4 L, seed remedy 2)."),
    ),
    remediation=(
        "Give the end-offsets call a timeout above the worst latency of the leader's path "
        "(seed: endOffsets(tp, Duration.ofMillis(300000)) against a measured ~2 min).",
        "Treat a timed-out end-offsets call as retriable instead of failing the whole start.",
        "request.timeout.ms (seed remedy 3) does not carry over to librdkafka consumers: the deadline is the "
        "timeout argument of get_watermark_offsets / offsets_for_times.",
    ),
    related=("PB1", "MD2"),
)


@chaos_scenario(SCENARIO)
def test_md1(run: ScenarioRun) -> None:
    variant = run.variant.name
    run.create_topic(partitions=3, replication_factor=3)
    run.prefill(RECORDS)
    t_vulnerable_s = run.time.request_timeout_ms / 5000
    latency_ms = round(2000 * t_vulnerable_s)
    timeout_s = t_vulnerable_s if variant == "vulnerable" else 4 * latency_ms / 1000
    target = run.target_partition()
    broker, led = target.leader, target.partition
    assert broker is not None, "the target partition has no leader"
    order = [led, *(p for p in range(3) if p != led)]
    fault = run.fault(Latency, broker, latency_ms, paths=("ext",), direction="downstream")
    fault.inject()  # before the restore client exists
    run.note(f"latency {latency_ms} ms on broker {broker}'s client path; restore with T = {timeout_s} s")
    restored = run.restore_reader(call_timeout_s=timeout_s, poll_timeout_s=4 * latency_ms / 1000).restore(
        order
    )
    fault.heal()
    result = run.finish()

    # Verdicts: reads only, nothing lost or duplicated.
    assert result.count("lost_acked") == result.count("duplicate_in_log") == 0
    events = result.events
    injected, healed = views.fault_window(events, fault)
    offsets = views.probe_calls(events, "list_offsets")
    print(
        f"{variant}: latency {latency_ms} ms on broker {broker} (leader of p{led}); T {timeout_s} s; "
        f"restore {[(r.partition, r.ok, r.error) for r in restored]}; "
        f"restore client logs {restore_logs(events)}"
    )

    calls = restore_calls(result, order, led)
    # The fault was in place before the first restore call and lifted after the last one.
    result.precondition(
        "the latency was in place from before the first restore call until after the last one",
        bool(offsets)
        and healed is not None
        and injected < min(p.mono - p.duration_ms / 1000 for p in offsets)
        and max(p.mono for p in offsets) <= healed,
        f"latency {injected:.2f} → {healed}; calls (start, end) "
        f"{[(round(p.mono - p.duration_ms / 1000, 2), round(p.mono, 2)) for p in offsets]}",
    )
    if calls is None:
        return
    mine = calls.mine
    # Only B's partition is affected: the others' leaders answer through healthy paths, faster than L.
    result.symptom(
        f"the partitions led by healthy brokers answered their end offsets within L = {latency_ms} ms",
        all(p.error is None and p.duration_ms < latency_ms for p in calls.others),
        [(p.partition, p.error, round(p.duration_ms)) for p in calls.others],
    )
    given_t(result, calls, timeout_s)
    # The broker was slow, never silent nor refusing: no connection failure on the restore clients.
    logs = [e for e in views.client_logs(events) if e.process == "restore"]
    failures = [e for e in logs if e.facility == "FAIL" or "timed out" in (e.message or "")]
    result.symptom(
        "no connection failure on the restore clients (the broker is slow, not silent)",
        not failures,
        [(e.facility, (e.message or "")[-90:]) for e in failures],
    )
    if variant == "vulnerable":
        timed_out_at_t(result, calls, broker, timeout_s)
        outcomes = [(r.partition, r.ok, r.error) for r in restored]
        result.symptom(f"the restore of p{led} failed", not restored[0].ok, outcomes)
        result.symptom("the other partitions were restored", all(r.ok for r in restored[1:]), outcomes)
    else:
        # The answer came through the slow path: it took at least L, more than T_vulnerable — the seed's
        # 30 s would have failed the same way — and less than the raised T.
        result.precondition(
            f"broker {broker}'s answer came through the slow path (≥ 0.95 L = {0.95 * latency_ms:.0f} ms)",
            0.95 * latency_ms <= mine.duration_ms,
            f"{mine.duration_ms:.0f} ms",
        )
        restored_everything(result, calls, restored, broker, timeout_s)
