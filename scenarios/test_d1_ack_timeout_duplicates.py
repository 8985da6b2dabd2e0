"""D1 `producer_ack_timeout_retry_duplicates` — a lost ack makes a retrying producer write a record twice.

docs/catalog.md 3 D1 (seed 000 § 3 ``Acks``和``Retries`` › 3.2 Demo, § 4 幂等写 › 4.2; 004 comment
"使用幂等producer").
The seed set ``request.timeout.ms=1`` on a Java producer (acks=all, retries=3) so that it gave up on each
ack before it arrived and retried: "Got error produce response … retrying (2 attempts left). Error:
NETWORK_EXCEPTION", and the consumer saw the record 4 times; with ``enable.idempotence=true`` it saw it
once although the producer retried three times.

librdkafka: ``request.timeout.ms`` is the *broker's* ack timeout, not a client timer (docs/catalog.md,
"Sources": [ck]), so the
lost ack is made by the network instead: a Toxiproxy **latency** toxic on the **downstream** (response)
path of the partition leader's client proxy, longer than the producer's ``socket.timeout.ms``. Requests
still reach the broker at once (upstream untouched) and are appended; their responses arrive too late.

Setup: topic of 1 partition, RF 3, ``min.insync.replicas=2``; producer at 100 msg/s, ``linger.ms=50`` (a
produce request carries ~5 records), ``max.in.flight.requests.per.connection=1`` (no reordering can blur
the duplicates), ``acks=all``, ``retries=3``, ``socket.timeout.ms=1000``; a one-member group reads along
(commit after processing).

Timeline: warm-up (50 acks) → latency 1500 ms downstream on the leader's ``ext`` proxy → wait for
librdkafka's ``REQTMOUT`` "Timed out ProduceRequest in flight" (the ack is lost; the connection is closed
and the batch goes to the retry queue) → wait until the reconnect's "Timed out ApiVersionRequest" (the
retry cannot be sent while the toxic holds) → heal → 50 new acks → stop the producer → the group catches
up → drain → audit (the session's engine, Spark by default).

Both variants claim ``idempotent`` — what the application needs: every acknowledged record once in the
log. The vulnerable client *configuration* is only at-least-once (``client_guarantee``).

- ``vulnerable`` — ``enable.idempotence=false``: the timed-out batch is sent again after the heal and
  appended a second time. Audit: ``duplicate_in_log`` > 0 (and as many ``duplicate_delivery_other`` at the
  group, which reads both copies), each value at most 1 + retries times in the log, nothing lost:
  verdict **fail**.
- ``remediated`` — ``enable.idempotence=true``: the same timeout and retry; the broker recognises the
  retried batch by producer id and sequence and answers with the original offsets. Audit: no duplicate,
  no loss: verdict **pass**.

Measured (ci, this machine; 6 runs plus 2 while building it): every run shows the same librdkafka
sequence in both variants — "Timed out ProduceRequest in flight (after N ms, timeout #0)", "Timed out 1
in-flight, 0 retry-queued, 0 out-queue, 0 partially-sent requests", then "Timed out ApiVersionRequest in
flight (after ~1004ms)" and "FAIL … ApiVersionRequest failed: Local: Timed out" for the reconnects under
the toxic. ``vulnerable``: 18 / 8 / 11 / 6 / 26 / 12 values duplicated, 2 copies each; ``remediated``:
none. The toxic was held 1.6–3.9 s; a variant takes 7.5–11.7 s. Deviation from the seed: the retry is
held until the heal (every reconnect's ApiVersion answer is delayed too), so each value is written
twice — not the seed's 1 + 3 retries — and every delivery report
is a success (no ``NETWORK_EXCEPTION`` reaches the application: the retry succeeded).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Sequence

from chaos.faults.targets import LeaderOf
from chaos.faults.toxics import Latency
from chaos.history import DrainRead, Event
from chaos.scenario import ExpectedSymptom, Scenario, ScenarioRun, Variant, chaos_scenario, views

RATE = 100.0
LINGER_MS = 50
LATENCY_MS = 1_500
SOCKET_TIMEOUT_MS = 1_000
RETRIES = 3

SCENARIO = Scenario(
    scenario_id="producer_ack_timeout_retry_duplicates",
    case_id="D1",
    title="Lost produce ack: a non-idempotent producer's retry duplicates the record",
    source="000 § 3 Acks和Retries › 3.2 Demo; § 4 幂等写 › 4.2; 004 comment (使用幂等producer)",
    symptom=(
        "如果发生ACK丢失（数据写入Kafka分区文件，但是生产者没有收到ACK并重试），"
        "会导致Kafka的分区文件中产生重复记录 — "
        "Got error produce response with correlation id 7 on topic-partition topic01-0, retrying "
        "(2 attempts left). Error: NETWORK_EXCEPTION"
    ),
    guarantee="idempotent",
    producer_config={
        "acks": "all",
        "retries": RETRIES,
        "retry.backoff.ms": 100,
        "max.in.flight.requests.per.connection": 1,
        "socket.timeout.ms": SOCKET_TIMEOUT_MS,
        "linger.ms": LINGER_MS,
    },
    topic_config={"min.insync.replicas": 2},
    expected_symptoms=(
        ExpectedSymptom(
            "client_log", "Timed out ProduceRequest", "librdkafka REQTMOUT: the ack did not arrive"
        ),
    ),
    variants=(
        Variant(
            "vulnerable",
            f"acks=all, retries={RETRIES}, enable.idempotence=false, socket.timeout.ms={SOCKET_TIMEOUT_MS}",
            client_guarantee="at_least_once",
            expected_verdict="fail",
            client_profile="at_least_once_retries",
            producer_config={"enable.idempotence": False},
        ),
        Variant(
            "remediated",
            f"enable.idempotence=true (acks=all, retries={RETRIES}, socket.timeout.ms={SOCKET_TIMEOUT_MS})",
            expected_verdict="pass",
            client_profile="idempotent_retries",
            producer_config={"enable.idempotence": True},
        ),
    ),
    remediation=(
        "enable.idempotence=true (requires acks=all and retries > 0): the broker drops a retried batch whose "
        "producer id and sequence it has already appended (seed 000 § 4).",
    ),
    related=("D2", "O1"),
)


def _copies(events: tuple[Event, ...]) -> Counter[str]:
    """How many offsets hold each value in the read_uncommitted drain."""
    return Counter(
        e.value_id
        for e in events
        if isinstance(e, DrainRead) and e.isolation == "read_uncommitted" and e.value_id is not None
    )


def _lost_acks(events: Sequence[Event]) -> list[str]:
    """A produce request timed out in flight, as each client logs it: librdkafka's ``REQTMOUT`` "Timed out
    ProduceRequest", the Java client's ``Sender`` "Got error produce response … Error: REQUEST_TIMED_OUT"
    (``--chaos-client java``)."""
    return [
        e.message
        for e in views.client_logs(events)
        if (e.facility == "REQTMOUT" and "ProduceRequest" in e.message)
        or (
            e.facility == "Sender"
            and "Got error produce response" in e.message
            and "REQUEST_TIMED_OUT" in e.message
        )
    ]


@chaos_scenario(SCENARIO)
def test_d1(run: ScenarioRun) -> None:
    variant = run.variant.name
    run.create_topic(partitions=1, replication_factor=3)
    run.member("consumer-0", batch_size=500)
    producer = run.producer(rate=RATE, duration_s=60.0, flush_timeout_s=15.0)
    run.wait_for("warm-up acks", lambda ev: len(views.acked_ids(ev)) >= RATE / 2, 30)
    latency = run.fault(Latency, LeaderOf(run.topic, 0), LATENCY_MS, direction="downstream")
    latency.inject()
    with contextlib.suppress(AssertionError):  # the lost ack: a precondition, recorded below
        run.wait_for(
            "a produce request timed out",
            lambda ev: bool(_lost_acks(ev)),
            20,
        )
    # the retry waits for a new connection, whose ApiVersion answer the toxic delays past the timeout too
    with contextlib.suppress(AssertionError):  # evidence, recorded below
        run.wait_for(
            "a reconnect failed under the fault",
            lambda ev: any("Timed out ApiVersionRequest" in e.message for e in views.client_logs(ev)),
            20,
        )
    latency.heal()
    healed = len(run.events())
    run.wait_for("acks again after the heal", lambda ev: len(views.acked_ids(ev[healed:])) >= RATE / 2, 30)
    producer.stop()
    run.wait_caught_up(30)
    result = run.finish()

    events = result.events
    copies = _copies(events)
    duplicated = {v: n for v, n in copies.items() if n > 1}
    timeouts = _lost_acks(events)
    reconnects = [e.message for e in views.client_logs(events) if "Timed out ApiVersionRequest" in e.message]
    inject = views.fault_event(events, latency, "inject")
    heal = views.fault_event(events, latency, "heal")
    print(
        f"\n{variant}: copies per duplicated value {sorted(Counter(duplicated.values()).items())}; "
        f"latency held {heal.mono - inject.mono:.1f} s"
    )
    lost_ack = result.precondition(
        "a produce request timed out in flight (REQTMOUT ProduceRequest; Java: REQUEST_TIMED_OUT): the fault "
        "lost an ack",
        bool(timeouts),
        [m.split(": ", 2)[-1] for m in timeouts]
        or "no REQTMOUT ProduceRequest line (Java: no Sender REQUEST_TIMED_OUT)",
    )
    result.symptom(
        "a reconnect's ApiVersionRequest timed out under the fault (the retry held until the heal)",
        bool(reconnects),
        reconnects[:3] or "no 'Timed out ApiVersionRequest' line",
    )
    assert result.count("lost_acked") == 0
    assert result.count("unseen_by_group") == 0
    assert result.count("reordered") == 0
    if variant == "remediated":
        assert duplicated == {}
    elif lost_ack:
        assert result.count("duplicate_in_log") == len(duplicated) > 0
        assert max(duplicated.values()) <= 1 + RETRIES
        assert set(result.audit.failed_by) == {"duplicate_in_log", "duplicate_delivery_other"}
        # the duplicated values were in flight when the acks were lost
        for example in dict(result.audit.facts.anomalies)["duplicate_in_log"].examples:
            assert example.ts is not None
            assert inject.ts - 2.0 <= example.ts <= heal.ts + 5.0, example
