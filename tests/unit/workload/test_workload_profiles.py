"""Client and time profiles, the config builders, and delivery-outcome classification."""

from __future__ import annotations

import struct

import pytest

from chaos.errors import ConfigError
from chaos.workload import (
    ACKS1,
    AT_LEAST_ONCE,
    CI,
    FAITHFUL,
    FIRE_AND_FORGET,
    IDEMPOTENT,
    PROFILES,
    TRANSACTIONAL,
    ClientProfile,
    RunContext,
    TimeProfile,
    classify_delivery_error,
    consumer_config,
    custom_profile,
    generation_of,
    producer_config,
    profile,
    time_profile,
)
from chaos.workload.consumer import CommitStrategy, MemberSpec, Processing, next_offsets
from chaos.workload.outcomes import DEFINITE_FAIL, JAVA_ERROR_NAMES, KNOWN_UNKNOWN, REJECTED_LAST_ATTEMPT

BOOT = "127.0.0.1:9092"
CONTEXT = RunContext(
    run_id="r", bootstrap_servers=BOOT, topic="t", group="g", client=IDEMPOTENT, sink=lambda event: None
)


def test_every_builtin_profile_declares_its_guarantee() -> None:
    assert {p.name: p.guarantee for p in PROFILES.values()} == {
        "fire_and_forget": "at_most_once",
        "acks1": "at_most_once",
        "at_least_once": "at_least_once",
        "idempotent": "idempotent",
        "transactional": "exactly_once",
    }
    assert all(p.description for p in PROFILES.values())
    assert profile("idempotent") is IDEMPOTENT


def test_profile_settings() -> None:
    assert FIRE_AND_FORGET.producer_settings["acks"] == 0
    assert ACKS1.producer_settings["acks"] == 1
    alo = AT_LEAST_ONCE.producer_settings
    assert alo["acks"] == "all"
    assert alo["enable.idempotence"] is False
    assert int(alo["retries"]) > 0
    assert int(alo["max.in.flight.requests.per.connection"]) > 1
    assert IDEMPOTENT.idempotent
    assert not AT_LEAST_ONCE.idempotent
    assert FIRE_AND_FORGET.single_attempt
    assert ACKS1.single_attempt
    assert not AT_LEAST_ONCE.single_attempt
    assert not IDEMPOTENT.single_attempt
    assert TRANSACTIONAL.transactional
    assert TRANSACTIONAL.consumer_settings["isolation.level"] == "read_committed"


def test_profiles_are_frozen_and_validated() -> None:
    with pytest.raises(AttributeError):
        IDEMPOTENT.name = "x"  # type: ignore[misc]
    with pytest.raises(ConfigError, match="guarantee"):
        ClientProfile("x", "sometimes", "d")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"bootstrap\.servers"):
        custom_profile("mine", "at_least_once", {"bootstrap.servers": "x"})
    with pytest.raises(ConfigError, match=r"enable\.idempotence"):
        custom_profile("mine", "idempotent", {"acks": "all"})
    with pytest.raises(ConfigError, match="expected one of"):
        profile("nope")


def test_custom_profile_keeps_user_settings() -> None:
    mine = custom_profile("team", "at_least_once", {"acks": "all", "linger.ms": 5, "retries": 3})
    config = producer_config(mine, BOOT, "producer-0")
    assert config["linger.ms"] == 5
    assert config["retries"] == 3
    assert config["bootstrap.servers"] == BOOT
    assert config["client.id"] == "producer-0"


@pytest.mark.parametrize("prof", list(PROFILES.values()), ids=list(PROFILES))
def test_producer_config_always_has_bounded_timeouts(prof: ClientProfile) -> None:
    config = producer_config(prof, BOOT, "producer-0", CI)
    for key in (
        "message.timeout.ms",
        "request.timeout.ms",
        "socket.timeout.ms",
        "socket.connection.setup.timeout.ms",
    ):
        assert 0 < int(config[key]) <= 300_000, key
    assert int(config["request.timeout.ms"]) < int(config["message.timeout.ms"])


def test_transactional_config_gets_an_id_and_a_consistent_message_timeout() -> None:
    for time in (CI, FAITHFUL):
        config = producer_config(TRANSACTIONAL, BOOT, "producer-3", time)
        assert config["transactional.id"] == "chaos-producer-3"
        assert int(config["message.timeout.ms"]) <= int(config["transaction.timeout.ms"])


def test_time_profiles_scale_every_timeout_and_keep_ratios() -> None:
    assert time_profile("faithful") is FAITHFUL
    assert time_profile("ci") is CI
    assert FAITHFUL.request_timeout_ms == 30_000
    assert FAITHFUL.api_timeout_s == 60.0
    assert FAITHFUL.max_poll_interval_ms == 300_000
    assert FAITHFUL.session_timeout_ms == 45_000
    assert FAITHFUL.message_timeout_ms == 300_000
    names = [
        "request_timeout_ms",
        "api_timeout_ms",
        "max_poll_interval_ms",
        "session_timeout_ms",
        "message_timeout_ms",
        "socket_timeout_ms",
    ]
    for a in names:
        for b in names:
            assert CI.ms(a) / CI.ms(b) == pytest.approx(FAITHFUL.ms(a) / FAITHFUL.ms(b), rel=1e-3)
    assert CI.request_timeout_ms < CI.max_poll_interval_ms
    assert CI.session_timeout_ms >= 6000


def test_time_profile_validation() -> None:
    with pytest.raises(ConfigError, match=r"group\.min\.session\.timeout\.ms"):
        TimeProfile("fast", 0.05)
    with pytest.raises(ConfigError, match="positive"):
        TimeProfile("neg", -1)
    with pytest.raises(ConfigError, match="unknown timeout"):
        CI.ms("nope")


def test_consumer_config() -> None:
    config = consumer_config(IDEMPOTENT, BOOT, "consumer-0", "g1", CI)
    assert config["group.id"] == "g1"
    assert config["isolation.level"] == "read_uncommitted"
    assert config["session.timeout.ms"] == CI.session_timeout_ms
    assert int(config["max.poll.interval.ms"]) >= int(config["session.timeout.ms"])
    assert consumer_config(TRANSACTIONAL, BOOT, "c", "g")["isolation.level"] == "read_committed"
    assert (
        consumer_config(IDEMPOTENT, BOOT, "c", "g", overrides={"max.poll.interval.ms": 10000})[
            "max.poll.interval.ms"
        ]
        == 10000
    )


def test_the_consumer_group_protocol_leaves_session_and_heartbeat_to_the_broker() -> None:
    """``group.protocol=consumer`` (KIP-848): the time profile's classic keys are left out — librdkafka would
    refuse them — and the broker gets the profile's session and heartbeat instead; a team that sets one of
    them anyway is told by librdkafka's own refusal."""
    from chaos.run.profiles import CLASSIC_ONLY_CONSUMER_KEYS
    from chaos.workload.clientconf import ClientConfigError

    on_consumer = IDEMPOTENT.with_group_protocol("consumer")
    assert (on_consumer.group_protocol, IDEMPOTENT.group_protocol) == ("consumer", "classic")
    assert IDEMPOTENT.with_group_protocol("classic") is IDEMPOTENT
    assert on_consumer.with_group_protocol("consumer") is on_consumer  # set once, kept
    config = consumer_config(on_consumer, BOOT, "c", "g", CI)  # librdkafka accepted it (a real consumer)
    assert config["group.protocol"] == "consumer"
    assert not set(CLASSIC_ONLY_CONSUMER_KEYS) & set(config)
    assert config["max.poll.interval.ms"] == CI.max_poll_interval_ms
    by_override = consumer_config(IDEMPOTENT, BOOT, "c", "g", CI, overrides={"group.protocol": "consumer"})
    assert "session.timeout.ms" not in by_override
    with pytest.raises(
        ClientConfigError, match=r"session\.timeout\.ms. is not supported for .group\.protocol=consumer"
    ):
        consumer_config(on_consumer, BOOT, "c", "g", CI, overrides={"session.timeout.ms": 7000})
    mpi1 = custom_profile(
        "mpi1", "at_least_once", {}, {"session.timeout.ms": 6000, "max.poll.interval.ms": 6000}
    )
    moved = mpi1.with_group_protocol("consumer")
    assert moved.consumer_settings == {"max.poll.interval.ms": 6000, "group.protocol": "consumer"}
    assert mpi1.moved_by(moved) == {"session.timeout.ms": 6000}  # the run notes it: the broker's now
    assert consumer_config(moved, BOOT, "c", "g", CI)["max.poll.interval.ms"] == 6000
    with pytest.raises(ConfigError, match="expected one of classic, consumer"):
        IDEMPOTENT.with_group_protocol("eager")  # type: ignore[arg-type]
    broker = CI.broker_config
    assert int(broker["group.consumer.min.session.timeout.ms"]) <= CI.session_timeout_ms
    assert broker["group.consumer.session.timeout.ms"] == str(CI.session_timeout_ms)
    assert int(broker["group.consumer.heartbeat.interval.ms"]) < CI.session_timeout_ms


@pytest.mark.parametrize(
    ("strategy", "auto_commit", "auto_store"),
    [
        ("auto", True, True),
        ("commit_after", False, False),
        ("commit_before", False, False),
        ("store_after", True, False),
    ],
)
def test_commit_strategy_settings(strategy: CommitStrategy, auto_commit: bool, auto_store: bool) -> None:
    spec = MemberSpec(name="consumer-0", strategy=strategy, overrides={"max.poll.interval.ms": 10000})  # type: ignore[arg-type]
    settings = spec.consumer_settings(CONTEXT)
    assert settings["enable.auto.commit"] is auto_commit
    assert settings["enable.auto.offset.store"] is auto_store
    assert (settings["group.id"], settings["client.id"], settings["bootstrap.servers"]) == (
        "g",
        "consumer-0",
        BOOT,
    )
    assert settings["session.timeout.ms"] == CI.session_timeout_ms
    assert settings["max.poll.interval.ms"] == 10000
    assert MemberSpec.from_data(spec.to_data()) == spec


def test_member_spec_validation() -> None:
    with pytest.raises(ConfigError, match="strategy"):
        MemberSpec(name="c", strategy="never")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="set by the workload itself"):
        MemberSpec(name="c", overrides=(("on_commit", "print"),))
    with pytest.raises(ConfigError, match=r"MemberSpec\.name"):
        MemberSpec(name="")
    with pytest.raises(ConfigError, match="per_record_s"):
        Processing(per_record_s=-1)
    with pytest.raises(ConfigError, match="record_delivery"):
        MemberSpec(name="c", record_delivery="never")  # type: ignore[arg-type]
    spec = MemberSpec(name="c", record_delivery="processed", topic="other")
    assert MemberSpec.from_data(spec.to_data()) == spec


def testnext_offsets_are_next_offsets_per_partition() -> None:
    from confluent_kafka import Message

    msgs = [Message(topic="t", partition=p, offset=o) for p, o in [(0, 5), (0, 7), (1, 2), (0, 6)]]
    assert [(tp.topic, tp.partition, tp.offset) for tp in next_offsets(msgs)] == [("t", 0, 8), ("t", 1, 3)]


# ---- outcome classification -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "single", "expected"),
    [
        ("_MSG_TIMED_OUT", True, "info"),
        ("_MSG_TIMED_OUT", False, "info"),
        ("REQUEST_TIMED_OUT", True, "info"),
        ("NOT_ENOUGH_REPLICAS_AFTER_APPEND", True, "info"),
        ("_PURGE_INFLIGHT", True, "info"),
        ("NETWORK_EXCEPTION", True, "info"),
        ("_TRANSPORT", True, "info"),
        ("OUT_OF_ORDER_SEQUENCE_NUMBER", False, "info"),
        ("_FENCED", False, "info"),
        ("NOT_ENOUGH_REPLICAS", True, "fail"),
        ("NOT_ENOUGH_REPLICAS", False, "info"),
        ("NOT_LEADER_FOR_PARTITION", True, "fail"),
        ("_UNKNOWN_TOPIC", True, "fail"),
        ("_PURGE_QUEUE", True, "fail"),
        ("_PURGE_QUEUE", False, "info"),
        ("MSG_SIZE_TOO_LARGE", False, "fail"),
        ("INVALID_RECORD", False, "fail"),
        ("TOPIC_AUTHORIZATION_FAILED", False, "fail"),
        ("_INVALID_ARG", False, "fail"),
        ("SOMETHING_NEW", True, "info"),
    ],
)
def test_classification(error: str, single: bool, expected: str) -> None:
    assert classify_delivery_error(error, single_attempt=single).outcome == expected


def test_classification_sets_are_disjoint_and_real_codes() -> None:
    from confluent_kafka import KafkaError

    assert not DEFINITE_FAIL & REJECTED_LAST_ATTEMPT
    assert not (DEFINITE_FAIL | REJECTED_LAST_ATTEMPT) & KNOWN_UNKNOWN
    harness_codes = {"_NO_DELIVERY_REPORT"}
    for name in DEFINITE_FAIL | REJECTED_LAST_ATTEMPT | (KNOWN_UNKNOWN - harness_codes):
        assert KafkaError(getattr(KafkaError, name)).name() == name
    # the Java client's names map to librdkafka's names of the same codes, each classified
    for java, librdkafka in JAVA_ERROR_NAMES.items():
        assert java not in DEFINITE_FAIL | REJECTED_LAST_ATTEMPT | KNOWN_UNKNOWN
        assert librdkafka in DEFINITE_FAIL | REJECTED_LAST_ATTEMPT, java


# ---- group generation ----------------------------------------------------------------------------------


class _FakeConsumer:
    def __init__(self, blob: object) -> None:
        self.blob = blob

    def consumer_group_metadata(self) -> object:
        return self.blob


def test_generation_is_parsed_from_group_metadata() -> None:
    blob = b"CGMDv2:" + struct.pack("=i", 7) + b"g\x00member\x00\x01"
    assert generation_of(_FakeConsumer(blob)) == 7
    assert generation_of(_FakeConsumer(b"CGMDv2:\xff\xff\xff\xffg\x00\x00\x01")) is None
    assert generation_of(_FakeConsumer(b"CGMDv9:xxxx")) is None
    assert generation_of(_FakeConsumer(object())) is None


def test_generation_of_a_real_unjoined_consumer_is_none() -> None:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "log_level": 0})
    try:
        assert generation_of(consumer) is None
    finally:
        consumer.close()
