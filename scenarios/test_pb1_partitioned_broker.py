"""PB1 `pb_cut_one_broker_then_start_client` — a broker's network is cut, then a client starts and restores.

docs/catalog.md 1A PB1 (seed 002 § Troubleshooting › 场景3). The seed's client restored its state on start:
per partition a temporary consumer ran ``endOffsets(tp) - 2`` → ``assign`` → ``seek`` → ``poll(10 s)``; with
broker 2's host cut off the network, random partitions failed with ``TimeoutException: Failed to get
offsets by times in 30000ms``; a *killed* broker with its host still up did not cause it.

What really happens with librdkafka and KRaft (measured here; docs/measurements.md has the numbers):

- a new librdkafka client connects to every bootstrap broker at once and uses whichever answers, so a cut
  broker in ``bootstrap.servers`` does **not** hang the client's start (unlike the seed's Java client):
  the seed's "remove the dead broker from bootstrap" remedy is moot here;
- ``get_watermark_offsets()`` looks the partition's leader up once and sends ListOffsets to *that*
  broker; on a transport error it retries on the same broker until its own timeout
  (``rd_kafka_query_wmark_offsets_resp_cb``). It never follows a leadership change;
- the controller fences a silent or dead broker after ``broker.session.timeout.ms`` (6 s ``ci``, 9 s by
  default) and moves its leaderships; a restore that *starts* after that succeeds everywhere.

Timeline (every variant): topic of 3 partitions, RF 3, ``min.insync.replicas=2``; 60 records produced
(acks=all) and consumed by a one-member group; the runner's introspection reads leaders/ISR every 0.5 s.
At t0 the fault hits broker B, the leader of one partition (not the active controller, so no quorum
election blurs the window); the restore reader runs over every partition, B's first; heal; drain; audit.

- ``vulnerable`` — network cut of B; the restore starts at once (a client restarted inside the failover
  window), per-call timeout T = 0.5 × the broker session timeout (3 s ``ci``). B's partition:
  ``list_offsets`` fails with ``_TIMED_OUT`` after T; the two others are restored; no connection is
  refused (the cut is silent).
- ``remediated`` — network cut of B; the restore starts once B leads nothing (the controller fenced it:
  the seed's "don't restart clients too fast"), same T: every partition is restored.
- ``long_timeout`` — the seed's remedy 2, T raised above the failover time (2 × session, 12 s ``ci``):
  leadership moves after ~6 s, yet the call still fails — ``_TIMED_OUT`` after the full 12 s, or
  ``_DESTROY_BROKER`` at ~6.3 s when librdkafka drops the fenced broker's handle (librdkafka logs
  "Connection setup timed out … after 6004ms"). Raising the timeout does not help.
- ``crash`` — ``docker kill`` of B: its proxy refuses within milliseconds (client log "Disconnected …
  after 4ms in state APIVERSION_QUERY") — and the call *still* waits out T, then ``_TIMED_OUT``: with
  librdkafka the seed's crash/cut distinction disappears for end offsets inside the failover window.

Verdicts: only reads are faulted, so every variant audits ``pass`` under ``at_least_once`` (no loss, no
duplicate). The symptoms are recorded as evidence from the history: ``probe_call`` events (error code,
duration against the timeout passed) and the restore client's ``client_log`` lines; the introspected leader
timeline gives ``long_timeout``'s precondition (the failover happened while the call waited).

Ratios: T < broker session timeout for ``vulnerable``/``crash`` (the restore runs inside the failover
window); T > it for ``long_timeout``. ``faithful``: session timeout 9 s, T 4.5 s / 18 s.
"""

from __future__ import annotations

import re

from chaos.faults.network import NetworkCut
from chaos.faults.process import Crash
from chaos.scenario import ExpectedSymptom, Scenario, ScenarioRun, Variant, chaos_scenario, views
from chaos.scenario.restore import given_t, restore_calls, restore_logs, restored_everything, timed_out_at_t
from chaos.workload import AT_LEAST_ONCE

RECORDS = 60

SCENARIO = Scenario(
    scenario_id="pb_cut_one_broker_then_start_client",
    case_id="PB1",
    title="Partitioned broker: network cut of one broker, then client start and restore",
    source="002 § Troubleshooting › 网络故障 › 场景3",
    symptom=(
        "刚开始的时候，每次都会随机成功某几个partition … 通过加日志，发现错误都是发生在endOffsets这里，"
        "默认的timeout应该是30s — org.apache.kafka.common.errors.TimeoutException: Failed to get offsets "
        "by times in 30000ms"
    ),
    guarantee="at_least_once",
    expected_verdict="pass",
    client=AT_LEAST_ONCE,
    topic_config={"min.insync.replicas": 2},
    variants=(
        Variant(
            "vulnerable",
            "Client restarted right after the cut; per-call timeout below the failover time.",
            expected_symptoms=(
                ExpectedSymptom(
                    "error_code", "_TIMED_OUT", "end offsets of the cut broker's partition time out"
                ),
            ),
        ),
        Variant(
            "remediated",
            "Client started once the cut broker was fenced and its leaderships moved.",
        ),
        Variant(
            "long_timeout",
            "Seed remedy 2: the per-call timeout raised above the failover time (2 x session).",
            expected_symptoms=(
                ExpectedSymptom(
                    "error_code",
                    "_TIMED_OUT|_DESTROY_BROKER",
                    "the call still fails: at its timeout, or when librdkafka drops the fenced broker",
                    regex=True,
                ),
                ExpectedSymptom(
                    "client_log",
                    "Connection setup timed out|Timed out ApiVersionRequest in flight",
                    "librdkafka gives up the connect (setup timeout in ci, ApiVersion timeout in faithful)",
                    regex=True,
                ),
            ),
        ),
        Variant(
            "crash",
            "Contrast: the broker is killed (host answers, connections refused at once).",
            expected_symptoms=(
                ExpectedSymptom("error_code", "_TIMED_OUT", "the call retries the refused leader until T"),
                ExpectedSymptom("client_log", "connection closed by peer", "the proxy refuses at once"),
            ),
        ),
    ),
    remediation=(
        "Do not restart clients (or run the restore) inside the failover window: wait until the cut broker "
        "is fenced and its leaderships have moved (seed: 启停kafka客户端操作时也不要动作太快).",
        "Treat a timed-out end-offsets call as retriable: retry the restore of that partition after "
        "metadata refreshes instead of failing the start.",
        "Removing the dead broker from bootstrap.servers (seed remedy 1) does not help librdkafka: clients "
        "learn it from metadata; raising request.timeout.ms (remedy 3) does not apply (producer-only).",
    ),
    related=("MD1",),
)


def _restore_partitions(run: ScenarioRun, broker: int) -> tuple[int, list[int]]:
    """The partition B leads, and the restore order: B's partition first, then the others."""
    states = run.cluster.describe_partitions([run.topic])
    led = next(s.partition for s in states if s.leader == broker)
    return led, [led, *sorted(s.partition for s in states if s.partition != led)]


@chaos_scenario(SCENARIO)
def test_pb1(run: ScenarioRun) -> None:
    variant = run.variant.name
    run.create_topic(partitions=3, replication_factor=3)
    run.prefill(RECORDS)
    run.introspect(interval_s=0.5)
    broker = run.target_partition().leader
    assert broker is not None, "the target partition has no leader"
    led, order = _restore_partitions(run, broker)
    session_s = run.cluster.config.detection_timeout_s("broker.session.timeout.ms", 9000)
    timeout_s = (2.0 if variant == "long_timeout" else 0.5) * session_s
    fault = run.fault(Crash if variant == "crash" else NetworkCut, broker)
    fault.inject()
    if variant == "remediated":
        moved_s = run.wait_until(
            f"every other broker sees broker {broker} lead no partition of the topic",
            # Asked one by one: a client's metadata may come from any of them, and a broker that has not
            # applied the new leaders yet sends it to the old one (NOT_LEADER_FOR_PARTITION, measured
            # once in the faithful profile when only one broker was asked).
            lambda: all(
                s.leader not in (broker, None)
                for b in run.cluster.brokers
                if b.node_id != broker
                for s in run.cluster.describe_partitions([run.topic], via=b.node_id)
            ),
            60,
        )
        run.note(f"leaderships moved away from broker {broker} {moved_s:.1f} s after the cut")
    restored = run.restore_reader(call_timeout_s=timeout_s, poll_timeout_s=timeout_s).restore(order)
    fault.heal()
    result = run.finish()

    events = result.events
    injected, _ = views.fault_window(events, fault)
    spans = views.leader_timeline(events, run.topic, led, process="introspect")
    moved = next((s.first_mono for s in spans if s.leader not in (broker, None)), None)
    refused = [
        e for e in views.client_logs(events) if e.process == "restore" and "Disconnected" in (e.message or "")
    ]
    print(
        f"{variant}: fault on broker {broker} (leader of partition {led}); T {timeout_s:.1f} s; "
        f"restore {[(r.partition, r.ok, r.error) for r in restored]}; leadership of p{led} moved "
        f"{'never' if moved is None else f'at +{moved - injected:.1f} s'}; restore client logs "
        f"{restore_logs(events)}"
    )

    # Verdicts: reads only, nothing lost or duplicated in any variant.
    assert result.count("lost_acked") == result.count("duplicate_in_log") == 0
    calls = restore_calls(result, order, led)
    if calls is None:
        return
    mine = calls.mine
    result.symptom(
        f"the partitions led by healthy brokers answered their end offsets within T = {timeout_s:.1f} s",
        all(p.error is None and p.duration_ms < 1000 * timeout_s for p in calls.others),
        [(p.partition, p.error, round(p.duration_ms)) for p in calls.others],
    )
    if variant == "remediated":
        restored_everything(result, calls, restored, broker, timeout_s)
        return
    given_t(result, calls, timeout_s)
    if variant == "long_timeout":
        # The controller moved the leadership while the call was still waiting, yet the call did not
        # follow it: librdkafka keeps the request on the leader it looked up first. It fails at its own
        # timeout (_TIMED_OUT), or earlier with _DESTROY_BROKER once the fenced broker has left the
        # metadata and librdkafka decommissions its handle (measured both) — never with the offsets.
        timeline = [(s.leader, round(s.first_mono - injected, 1)) for s in spans]
        result.precondition(
            f"the leadership of p{led} moved away from broker {broker}", moved is not None, timeline
        )
        if mine.error == "_TIMED_OUT":
            result.precondition(
                f"the leadership of p{led} moved while the call was still waiting",
                moved is not None and moved < mine.mono,
                (moved, mine.mono),
            )
        result.symptom(
            f"the end offsets of p{led} failed with _TIMED_OUT or _DESTROY_BROKER",
            mine.error in ("_TIMED_OUT", "_DESTROY_BROKER"),
            mine,
        )
        result.symptom(
            f"the call failed between 0.8 x the broker session ({0.8 * session_s:.1f} s) and T + 1.5 s",
            0.8 * session_s * 1000 <= mine.duration_ms <= timeout_s * 1000 + 1500,
            f"{mine.duration_ms:.0f} ms",
        )
        return
    # Inside the failover window the faulted broker still led the partition when the restore asked for its
    # end offsets: the call waited for its whole timeout, then failed with _TIMED_OUT.
    timed_out_at_t(result, calls, broker, timeout_s)
    if variant == "vulnerable":
        detail = [(e.facility, (e.message or "")[-90:]) for e in refused]
        result.symptom("no connection was refused (a cut broker is silent)", refused == [], detail)
    else:
        # A killed broker refuses at once (its proxy closes the connection within milliseconds), yet the
        # call still waits out its timeout: librdkafka retries the refused leader, it does not fail fast.
        fast = [e for e in refused if _after_ms(e.message or "") < 1000]
        result.symptom(
            "the killed broker refused the connection within 1 s",
            bool(fast),
            [(e.message or "")[-90:] for e in refused],
        )


def _after_ms(message: str) -> float:
    """The ``after N ms in state`` figure of a librdkafka connection log line (inf when absent)."""
    found = re.search(r"after (\d+)ms in state", message)
    return float(found.group(1)) if found else float("inf")
