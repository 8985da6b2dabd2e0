"""The Java client worker (chaos.workload.java_client): a profile means the same on both clients, a failed
send is classified by the librdkafka worker's rule, the client's log lines become evidence — and the real
worker (compiled against kafka-clients, run in a JVM) writes valid history events and stops on SIGTERM.
No broker here: the real-cluster run is tests/integration/test_java_client.py."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from chaos import versions
from chaos.errors import ConfigError
from chaos.history import (
    ClientLog,
    Commit,
    Delivery,
    Event,
    ProbeCall,
    SendInvoke,
    SendOutcome,
    TxnMarker,
)
from chaos.workload import (
    ACKS1,
    AT_LEAST_ONCE,
    IDEMPOTENT,
    TRANSACTIONAL,
    MemberSpec,
    ProducerSpec,
    RunContext,
)
from chaos.workload.effective import take_announced
from chaos.workload.java_build import JavaWorker, ensure_java_worker
from chaos.workload.java_client import (
    JavaChild,
    JavaMember,
    JavaProducer,
    JavaTransform,
    client_log_of,
    java_startup_probe,
)
from chaos.workload.java_config import JavaConfig, java_member_config, java_producer_config
from chaos.workload.transactional import TxnWorkerSpec


def context(run_id: str, client: object = ACKS1, events: list[Event] | None = None) -> RunContext:
    sink = events.append if events is not None else (lambda event: None)
    return RunContext(
        run_id=run_id, bootstrap_servers="127.0.0.1:1", topic="t", group="g", client=client, sink=sink,  # type: ignore[arg-type]
    )  # fmt: skip


@pytest.mark.parametrize("client", [ACKS1, AT_LEAST_ONCE, IDEMPOTENT, TRANSACTIONAL])
def test_every_profile_keeps_its_meaning_on_the_java_client(client: object) -> None:
    librdkafka = ProducerSpec("producer-0").client_config(context("r-j0", client))
    java = java_producer_config(librdkafka)
    request = int(java.settings["request.timeout.ms"])
    message = int(str(librdkafka.settings["message.timeout.ms"]))
    assert java.settings["delivery.timeout.ms"] == str(max(message, 5 + request))
    assert java.settings["acks"] == str(librdkafka.settings["acks"])
    assert java.settings["enable.idempotence"] == str(librdkafka.settings["enable.idempotence"]).lower()
    assert "message.timeout.ms" not in java.settings
    # the client-side bound of a request: librdkafka's socket.timeout.ms, Java's request.timeout.ms
    assert java.settings["request.timeout.ms"] == str(librdkafka.settings["socket.timeout.ms"])
    assert list(java.dropped) == ["request.timeout.ms"]  # librdkafka's broker-side ack timeout
    assert java.origins["request.timeout.ms"].endswith("(as librdkafka's socket.timeout.ms)")
    assert java.origins["delivery.timeout.ms"].endswith("(as librdkafka's message.timeout.ms)") == (
        message >= 5 + request
    )
    assert set(java.origins) == set(java.settings)
    # Java's delivery timeout must cover linger + request timeout, or the client refuses to start
    assert int(java.settings["delivery.timeout.ms"]) >= 5 + request


def test_librdkafkas_default_idempotence_is_kept_where_javas_differs() -> None:
    librdkafka = ProducerSpec("producer-0").client_config(context("r-j1"))
    bare = type(librdkafka)(
        librdkafka.process,
        librdkafka.role,
        librdkafka.profile,
        {k: v for k, v in librdkafka.settings.items() if k != "enable.idempotence"},
        {k: v for k, v in librdkafka.origins.items() if k != "enable.idempotence"},
    )
    java = java_producer_config(bare)
    assert java.settings["enable.idempotence"] == "false"
    assert "librdkafka's default" in java.origins["enable.idempotence"]


def test_a_librdkafka_key_without_a_java_counterpart_is_refused_with_the_fix() -> None:
    spec = ProducerSpec("producer-0", overrides=(("queue.buffering.max.messages", 1000),))
    with pytest.raises(ConfigError, match=r"'queue.buffering.max.messages' .* no Java client equivalent"):
        java_producer_config(spec.client_config(context("r-j2")))


def test_the_clients_warn_and_error_lines_are_client_logs() -> None:
    line = (
        "WARN org.apache.kafka.clients.NetworkClient - [Producer clientId=producer-0] Connection to node 1 "
        "(/127.0.0.1:19092) could not be established. Node may not be available."
    )
    event = client_log_of(line, "r-j3", "producer-0")
    assert event is not None
    assert (event.level, event.facility) == ("warning", "NetworkClient")
    assert event.message.startswith("[Producer clientId=producer-0] Connection to node 1")
    assert (
        client_log_of(
            "\tat org.apache.kafka.clients.producer.KafkaProducer.send(KafkaProducer.java:1)", "r", "p"
        )
        is None
    )


def child(single_attempt: bool) -> JavaChild:
    worker = JavaWorker(Path("/nonexistent"), versions.KAFKA_VERSION)  # row() runs nothing
    return JavaChild("producer-0", "{}", lambda event: None, worker, "r-j4", single_attempt=single_attempt)


@pytest.mark.parametrize(
    ("error", "sync", "single_attempt", "outcome"),
    [
        ("REQUEST_TIMED_OUT", False, False, "info"),  # the Java client's TimeoutException: may be written
        ("NOT_ENOUGH_REPLICAS", False, True, "fail"),  # the only attempt was rejected before the append
        ("NOT_ENOUGH_REPLICAS", False, False, "info"),  # an earlier attempt may have been appended
        ("NOT_LEADER_OR_FOLLOWER", False, True, "fail"),  # the Java name of NOT_LEADER_FOR_PARTITION
        ("MESSAGE_TOO_LARGE", False, False, "fail"),  # the Java name of MSG_SIZE_TOO_LARGE
        ("InterruptException", True, False, "fail"),  # send() itself refused: never enqueued
        ("KafkaException", False, False, "info"),  # a forced close's aborted batch: unknown
    ],
)
def test_a_failed_send_is_classified_by_the_librdkafka_workers_rule(
    error: str, sync: bool, single_attempt: bool, outcome: str
) -> None:
    row = {
        "run_id": "r-j4", "kind": "send_outcome", "ts": time.time(), "mono": time.monotonic(),
        "process": "producer-0", "value_id": "r-j4:producer-0:0", "outcome": None, "error": error,
        "retriable": False, "fatal": False, "sync": sync,
    }  # fmt: skip
    event = Event.from_row(child(single_attempt).row(row))
    assert isinstance(event, SendOutcome)
    assert event.outcome == outcome


def test_the_real_worker_records_its_sends_and_stops_on_sigterm() -> None:
    """A JVM whose only broker does not exist: the first send() waits for metadata (max.block.ms); SIGTERM
    interrupts it — the value gets its one outcome (``fail``: send() refused it), the client's connection
    warnings are client logs, and the JVM exits as a graceful stop (143)."""
    events: list[Event] = []
    ctx = context("r-j5", ACKS1, events)
    producer = JavaProducer(
        ctx,
        ProducerSpec("producer-0", rate=None, count=3, flush_timeout_s=5.0),
        ensure_java_worker(versions.KAFKA_VERSION),
    )
    (announced,) = take_announced("r-j5")
    assert announced.settings["delivery.timeout.ms"] == "60000"
    assert announced.settings["request.timeout.ms"] == "12000"  # the ci profile's socket.timeout.ms
    producer.start()
    deadline = time.monotonic() + 30
    while not any(isinstance(e, ClientLog) and e.facility == "NetworkClient" for e in events):
        assert time.monotonic() < deadline, events
        time.sleep(0.2)
    stats = producer.stop(20.0)
    invokes = [e for e in events if isinstance(e, SendInvoke)]
    outcomes = [e for e in events if isinstance(e, SendOutcome)]
    assert [e.value_id for e in invokes] == ["r-j5:producer-0:0"]
    assert [(e.value_id, e.outcome, e.error) for e in outcomes] == [
        ("r-j5:producer-0:0", "fail", "InterruptException")
    ]
    assert (stats.sent, stats.ok, stats.fail, stats.info) == (1, 0, 1, 0)
    notices = Counter(e.facility for e in events if isinstance(e, ClientLog) and e.level == "notice")
    assert notices == {"JAVA_CONFIG": 1}  # librdkafka's request.timeout.ms left out, said in the run


def member_config(strategy: str = "commit_after", **overrides: str | int) -> JavaConfig:
    spec = MemberSpec("consumer-0", strategy=strategy, overrides=tuple(overrides.items()))  # type: ignore[arg-type]
    return java_member_config(spec.client_config(context("r-m0", AT_LEAST_ONCE)))


def test_a_members_configuration_keeps_its_meaning_on_the_java_client() -> None:
    java = member_config()
    assert java.settings["group.id"] == "g"
    assert java.settings["enable.auto.commit"] == "false"
    assert java.settings["isolation.level"] == "read_uncommitted"
    assert java.settings["request.timeout.ms"] == "12000"  # the ci profile's socket.timeout.ms
    assert "enable.auto.offset.store" in java.dropped  # the worker commits as the strategy says
    assert member_config("auto").settings["enable.auto.commit"] == "true"
    assert (
        member_config("commit_after", **{"partition.assignment.strategy": "cooperative-sticky"}).settings[
            "partition.assignment.strategy"
        ]
        == "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"
    )
    assert member_config("commit_after", **{"fetch.wait.max.ms": 100}).settings["fetch.max.wait.ms"] == "100"


def test_store_after_has_no_java_counterpart_and_says_what_to_use() -> None:
    spec = MemberSpec("consumer-0", strategy="store_after")
    worker = JavaWorker(Path("/nonexistent"), versions.KAFKA_VERSION)
    with pytest.raises(
        ConfigError, match=r"(?s)store_after has no Java client counterpart.*use commit_after"
    ):
        JavaMember(context("r-m1", AT_LEAST_ONCE), spec, worker)


def test_a_members_rows_become_the_librdkafka_members_events() -> None:
    common = {
        "run_id": "r-j4",
        "ts": time.time(),
        "mono": time.monotonic(),
        "process": "consumer-0",
        "group": "g",
    }
    ours = Event.from_row(
        child(False).row({**common, "kind": "delivery", "topic": "t", "partition": 0, "offset": 7,
                          "value": "r-j4:producer-0:7", "key": "k7", "member": "m-1", "generation": 3})
    )  # fmt: skip
    foreign = Event.from_row(
        child(False).row({**common, "kind": "delivery", "topic": "t", "partition": 0, "offset": 8,
                          "value": "not ours", "key": None, "member": None, "generation": None})
    )  # fmt: skip
    assert isinstance(ours, Delivery)
    assert isinstance(foreign, Delivery)
    assert (ours.value_id, ours.member, ours.generation) == ("r-j4:producer-0:7", "m-1", 3)
    assert foreign.value_id is None
    offsets = [{"topic": "t", "partition": 0, "offset": 8, "error": None}]
    for error, outcome in (("CommitFailedException", "fail"), ("REQUEST_TIMED_OUT", "info")):
        commit = Event.from_row(
            child(False).row({**common, "kind": "commit", "outcome": None, "error": error, "offsets": offsets,
                              "member": "m-1", "generation": 3, "message": "x"})
        )  # fmt: skip
        assert isinstance(commit, Commit)
        assert commit.outcome == outcome


def test_the_real_member_leaves_on_sigterm() -> None:
    """A JVM member whose broker does not exist: it starts, logs the client's connection warnings, and a
    SIGTERM closes it as a graceful stop (exit 143) well within its bound."""
    events: list[Event] = []
    member = JavaMember(
        context("r-m2", AT_LEAST_ONCE, events),
        MemberSpec("consumer-0"),
        ensure_java_worker(versions.KAFKA_VERSION),
    )
    member.start()
    deadline = time.monotonic() + 30
    while not any(isinstance(e, ClientLog) and e.facility == "NetworkClient" for e in events):
        assert time.monotonic() < deadline, events
        time.sleep(0.2)
    started = time.monotonic()
    member.stop(20.0)
    assert member.returncode == 143
    assert time.monotonic() - started < 15
    assert not [e for e in events if isinstance(e, Delivery | Commit)]


def test_the_real_probe_times_out_as_the_java_client_does_and_says_so() -> None:
    """A JVM probe whose only broker does not exist: ``partitionsFor`` fails at its own timeout with the
    Java client's words — MD3's seed line, "Timeout expired while fetching topic metadata" — recorded as a
    ``probe_call`` of the probe's process; no ``committed`` call follows; the probe says it failed."""
    events: list[Event] = []
    ok = java_startup_probe(
        context("r-p1", AT_LEAST_ONCE, events),
        MemberSpec("probe"),
        ensure_java_worker(versions.KAFKA_VERSION),
        timeout_s=2.0,
        group=True,
    )
    assert ok is False
    (call,) = [e for e in events if isinstance(e, ProbeCall)]
    assert (call.process, call.operation, call.topic, call.error) == (
        "probe",
        "metadata",
        "t",
        "TimeoutException",
    )
    assert call.message is not None
    assert "Timeout expired while fetching topic metadata" in call.message
    assert call.timeout_ms == 2000.0
    assert 1900 <= call.duration_ms <= 6000, call.duration_ms
    (announced,) = take_announced("r-p1")
    assert announced.settings["group.id"] == "g"


def test_a_probe_without_a_group_leaves_the_group_out() -> None:
    events: list[Event] = []
    java_startup_probe(
        context("r-p2", AT_LEAST_ONCE, events),
        MemberSpec("probe"),
        ensure_java_worker(versions.KAFKA_VERSION),
        timeout_s=1.0,
    )
    (announced,) = take_announced("r-p2")
    assert "group.id" not in announced.settings
    assert [e.operation for e in events if isinstance(e, ProbeCall)] == ["metadata"]


def test_a_transforms_markers_carry_the_value_ids_of_its_values() -> None:
    """The worker sends a transaction's raw values; the parent keeps the harness's value ids, in order."""
    row = {"run_id": "r-t1", "ts": time.time(), "mono": time.monotonic(), "process": "transformer-0",
           "kind": "txn", "action": "commit", "transactional_id": "chaos-transformer-0", "outcome": "ok",
           "values": ["r-t1:producer-0:3", "not ours", "r-t1:producer-0:4"],
           "offsets": [{"topic": "in", "partition": 1, "offset": 5, "error": None}]}  # fmt: skip
    marker = Event.from_row(child(False).row(row))
    assert isinstance(marker, TxnMarker)
    assert marker.value_ids == ("r-t1:producer-0:3", "r-t1:producer-0:4")
    assert [(o.partition, o.offset) for o in marker.offsets] == [(1, 5)]


def test_a_transforms_two_clients_keep_their_meaning_on_the_java_client() -> None:
    """The transactional transform's producer keeps its transactional.id and idempotence, its consumer reads
    committed data and commits nothing by itself; both are announced for the run."""
    events: list[Event] = []
    ctx = context("r-t2", TRANSACTIONAL, events)
    worker = JavaTransform(
        ctx, TxnWorkerSpec("transformer-0", input_topic="in"), JavaWorker(Path("/x"), "4.4.0")
    )
    producer, consumer = take_announced("r-t2")
    assert producer.settings["transactional.id"] == "chaos-transformer-0"
    assert producer.settings["enable.idempotence"] in ("true", "True")
    assert consumer.settings["isolation.level"] == "read_committed"
    assert consumer.settings["enable.auto.commit"] == "false"
    assert worker.close_timeout_s == 2 * ctx.time.api_timeout_s


def test_a_delivery_timeout_below_javas_floor_is_raised_to_it() -> None:
    """The transactional profile caps message.timeout.ms at transaction.timeout.ms (12 s in ci), which equals
    the request timeout: the Java producer would refuse it (delivery.timeout.ms < linger.ms +
    request.timeout.ms), so it is raised to that sum, saying so."""
    ctx = context("r-t3", TRANSACTIONAL)
    java = java_producer_config(TxnWorkerSpec("t0", input_topic="in").producer_client(ctx))
    assert java.settings["request.timeout.ms"] == "12000"
    assert java.settings["delivery.timeout.ms"] == "12005"
    assert "lower bound" in java.origins["delivery.timeout.ms"]
    plain = java_producer_config(ProducerSpec("p").client_config(context("r-t4", ACKS1)))
    assert plain.settings["delivery.timeout.ms"] == "60000"  # above the floor: untouched
