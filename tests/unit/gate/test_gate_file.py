"""The gate file: parsed into a validated model; every error names the file, the key, the line, the fix."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

import pytest

from chaos.gate.gatefile import (
    ClientSettings,
    GateFile,
    GateFileError,
    Origin,
    Setting,
    Thresholds,
    is_secret,
    key_lines,
    load_gate,
    resolve_cases,
)

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
CATALOG = (
    "PB1",
    "PB4",
    "ISR2",
    "ISR3",
    "MD1",
    "MD2",
    "MD3",
    "MPI1",
    "L1",
    "L2",
    "L6",
    "D1",
    "D3",
    "O1",
    "O6",
)


def write(tmp_path: Path, text: str, name: str = "gate.toml") -> Path:
    path = tmp_path / name
    path.write_text(dedent(text).lstrip(), encoding="utf-8")
    return path


def problems(path: Path) -> str:
    with pytest.raises(GateFileError) as caught:
        load_gate(path)
    return "\n".join(caught.value.problems)


def test_the_examples_load() -> None:
    weak = load_gate(EXAMPLES / "gate-weak.toml")
    assert weak.guarantee == "at_least_once"
    acks = weak.producer.get("acks")
    assert acks is not None
    assert acks.value == "1"
    assert str(acks.origin).endswith("producer-weak.properties:11")
    assert [s.key for s in weak.producer.ignored] == [
        "bootstrap.servers",
        "key.serializer",
        "value.serializer",
    ]
    assert weak.consumer is not None
    assert weak.consumer.commit.value == "auto"
    assert weak.topic_setting("unclean.leader.election.enable").value == "true"
    strong = load_gate(EXAMPLES / "gate-strong.toml")
    assert strong.guarantee == "idempotent"
    assert strong.producer.as_dict()["enable.idempotence"] == "true"  # written as a bare dotted key
    assert strong.consumer is not None
    assert strong.consumer.commit.value == "after_processing"
    assert strong.thresholds_for("ISR2").longest_outage_s == 30
    assert strong.thresholds_for("PB1").longest_outage_s == 20
    assert strong.thresholds_for("ISR2").duplicates == 0


def test_a_minimal_file_takes_kafkas_topic_defaults(tmp_path: Path) -> None:
    gate = load_gate(write(tmp_path, 'guarantee = "at_least_once"\n[producer]\n'))
    assert gate.consumer is None
    assert gate.cases is None
    assert gate.time_profile == "ci"
    assert gate.kafka_version is None  # the session's
    assert gate.retries == 1
    assert {s.key: (s.value, s.origin.source) for s in gate.topic} == {
        "replication_factor": ("1", "Kafka default"),
        "min.insync.replicas": ("1", "Kafka default"),
        "unclean.leader.election.enable": ("false", "Kafka default"),
        "cleanup.policy": ("delete", "Kafka default"),
        "retention.ms": ("604800000", "Kafka default"),
        "retention.bytes": ("-1", "Kafka default"),
        "segment.bytes": ("1073741824", "Kafka default"),
        "segment.ms": ("604800000", "Kafka default"),
        "max.message.bytes": ("1048588", "Kafka default"),
        "min.compaction.lag.ms": ("0", "Kafka default"),
        "delete.retention.ms": ("86400000", "Kafka default"),
    }
    assert gate.traffic is None
    assert not gate.topic_given("retention.ms")


def test_the_kafka_version_is_one_the_harness_supports(tmp_path: Path) -> None:
    good = load_gate(write(tmp_path, 'guarantee = "at_least_once"\nkafka_version = "3.9.2"\n[producer]\n'))
    assert good.kafka_version == "3.9.2"
    path = write(tmp_path, 'guarantee = "at_least_once"\nkafka_version = "3.8.1"\n[producer]\n')
    assert f"{path}:2: kafka_version: expected one of 3.9.2, 4.0.2, 4.1.1, 4.4.0" in problems(path)


def test_an_unknown_top_level_key_is_named_with_its_line_and_the_closest_key(tmp_path: Path) -> None:
    path = write(tmp_path, 'guarantee = "at_least_once"\nguarentee = "idempotent"\n[producer]\n')
    assert f"{path}:2: guarentee: unknown key; did you mean 'guarantee'?" in problems(path)


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        guarantee = "at_least_one"
        time_profile = "fast"
        retries = 9
        [producer]
        fil = "p.properties"
        [topic]
        "min.insync.replica" = 2
        replication_factor = 0
        [thresholds]
        longest_outage = 3
        """,
    )
    text = problems(path)
    assert f"{path}:1: guarantee: got 'at_least_one'; expected one of at_most_once" in text
    assert f"{path}:2: time_profile: expected one of ci, faithful" in text
    assert f"{path}:3: retries: expected an integer 0..5" in text
    assert f"{path}:5: producer.fil: unknown key; did you mean 'file'?" in text
    assert f"{path}:7: topic.min.insync.replica: unknown key; did you mean 'min.insync.replicas'?" in text
    assert f"{path}:8: topic.replication_factor: expected an integer >= 1" in text
    assert f"{path}:10: thresholds.longest_outage: unknown key; did you mean 'longest_outage_s'?" in text


def test_missing_guarantee_and_producer(tmp_path: Path) -> None:
    text = problems(write(tmp_path, "retries = 1\n"))
    assert "guarantee: missing; expected one of" in text
    assert "producer: missing; give the producer's settings" in text


def test_invalid_toml_names_the_file_and_position(tmp_path: Path) -> None:
    path = write(tmp_path, 'guarantee = "at_least_once\n')
    assert f"{path}: not valid TOML: " in problems(path)


def test_a_missing_properties_file_names_the_key_that_points_at_it(tmp_path: Path) -> None:
    path = write(tmp_path, 'guarantee = "at_least_once"\n[producer]\nfile = "nope.properties"\n')
    assert f"{path}:3: producer.file: {tmp_path / 'nope.properties'} does not exist" in problems(path)


def test_inline_settings_override_the_file_and_keep_their_own_line(tmp_path: Path) -> None:
    (tmp_path / "p.properties").write_text("acks=1\nlinger.ms=5\n", encoding="utf-8")
    path = write(
        tmp_path,
        """
        guarantee = "at_least_once"
        [producer]
        file = "p.properties"
        [producer.settings]
        acks = "all"
        "enable.idempotence" = true
        """,
    )
    gate = load_gate(path)
    assert gate.producer.as_dict() == {"acks": "all", "enable.idempotence": "true", "linger.ms": "5"}
    acks = gate.producer.get("request.required.acks")  # any alias finds it
    assert acks is not None
    assert str(acks.origin) == f"{path}:5"
    linger = gate.producer.get("queue.buffering.max.ms")
    assert linger is not None
    assert str(linger.origin) == f"{tmp_path / 'p.properties'}:2"


def test_the_same_setting_twice_inline_is_an_error(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        guarantee = "at_least_once"
        [producer.settings]
        "enable.idempotence" = true
        enable.idempotence = false
        acks = 1
        "request.required.acks" = "all"
        """,
    )
    text = problems(path)
    assert "enable.idempotence: the same setting as enable.idempotence" in text
    assert "request.required.acks: the same setting as acks" in text


def test_callback_settings_are_the_harness_own(tmp_path: Path) -> None:
    path = write(tmp_path, 'guarantee = "at_least_once"\n[producer.settings]\nerror_cb = "x"\n')
    assert f"{path}:3: error_cb: set by the harness itself; remove it" in problems(path)


def test_non_scalar_settings_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, 'guarantee = "at_least_once"\n[producer.settings]\nacks = ["all"]\n')
    assert "expected a string, number or boolean for acks" in problems(path)


@pytest.mark.parametrize(
    ("consumer", "expected"),
    [
        ('"enable.auto.commit" = false', "missing: with enable.auto.commit=false the application commits"),
        (
            '"enable.auto.offset.store" = false',
            "missing: with enable.auto.offset.store=false the application commits or stores offsets itself",
        ),
        (
            '"enable.auto.commit" = false\ncommit = "auto"',
            "'auto' means librdkafka commits what poll() returned",
        ),
        ('commit = "transaction"', "needs a producer transactional.id, consumer.transform = true"),
        ('commit = "later"', "consumer.commit: expected one of auto, after_processing"),
        ("transform = 1", "consumer.transform: expected true or false"),
    ],
)
def test_where_the_consumer_commits_must_be_said_and_consistent(
    tmp_path: Path, consumer: str, expected: str
) -> None:
    settings = consumer.split("\n")
    own = [line for line in settings if line.startswith(("commit", "transform"))]
    librdkafka = [line for line in settings if line not in own]
    text = 'guarantee = "at_least_once"\n[producer]\n[consumer]\n' + "\n".join(own)
    text += "\n[consumer.settings]\n" + "\n".join(librdkafka) + "\n"
    assert expected in problems(write(tmp_path, text))


def test_a_transactional_transform(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        guarantee = "exactly_once"
        [producer.settings]
        "transactional.id" = "orders-transform"
        [consumer]
        commit = "transaction"
        transform = true
        [consumer.settings]
        "enable.auto.commit" = false
        """,
    )
    gate = load_gate(path)
    assert gate.transactional
    assert gate.consumer is not None
    assert gate.consumer.is_transform


def test_thresholds_validate_and_merge_per_case(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        guarantee = "at_least_once"
        [producer]
        [thresholds]
        duplicates = 5
        p99_ack_latency_ms = 2000
        [thresholds.ISR2]
        duplicate_rate = 0.01
        [thresholds.isr2]
        duplicates = 1
        """,
    )
    assert "thresholds.isr2: a sub-table of thresholds is named by a catalog id" in problems(path)
    base = Thresholds(duplicates=5, p99_ack_latency_ms=2000)
    merged = Thresholds(duplicate_rate=0.01).over(base)
    assert merged == Thresholds(p99_ack_latency_ms=2000, duplicate_rate=0.01)
    with pytest.raises(GateFileError, match="not both"):
        Thresholds(duplicates=1, duplicate_rate=0.1)
    with pytest.raises(GateFileError, match="duplicate_rate: expected a fraction"):
        Thresholds(duplicate_rate=2)
    with pytest.raises(GateFileError, match="heal_to_first_ack_s: expected a number >= 0"):
        Thresholds(heal_to_first_ack_s=-1)


def test_the_baseline_tolerance(tmp_path: Path) -> None:
    path = write(tmp_path, 'guarantee = "at_least_once"\n[producer]\n[baseline]\ntolerance = -1\nslack = 2\n')
    text = problems(path)
    assert "baseline.tolerance: expected a number >= 0" in text
    assert "baseline.slack: unknown key" in text


def _gate(consumer: bool = False, transform: bool = False, tid: bool = False, **kwargs: object) -> GateFile:
    from chaos.gate.gatefile import ConsumerSide

    where = Origin("test")
    producer = ClientSettings.from_mapping("producer", {"transactional.id": "t"} if tid else {}, where)
    side = (
        ConsumerSide(
            ClientSettings.from_mapping("consumer", {}, where),
            Setting("commit", "auto", where),
            Setting("transform", "true" if transform else "false", where),
        )
        if consumer
        else None
    )
    return GateFile(guarantee="at_least_once", producer=producer, consumer=side, **kwargs)  # type: ignore[arg-type]


def test_default_cases_are_those_that_apply() -> None:
    producer_only = resolve_cases(_gate(), CATALOG)
    assert "L6" not in producer_only
    assert "MPI1" not in producer_only
    assert "O6" not in producer_only
    assert {"PB1", "ISR2", "L2", "O1"} <= set(producer_only)
    consumer = resolve_cases(_gate(consumer=True), CATALOG)
    assert {"L6", "D3", "MPI1"} <= set(consumer)
    assert "O6" not in consumer
    assert "O6" in resolve_cases(_gate(consumer=True, transform=True), CATALOG)
    assert "O6" in resolve_cases(_gate(tid=True), CATALOG)


def test_chosen_cases_must_exist_and_apply() -> None:
    with pytest.raises(GateFileError, match=r"PB9: not a catalog case; expected one of PB1"):
        resolve_cases(_gate(cases=("PB1", "PB9")), CATALOG)
    with pytest.raises(GateFileError, match=r"cases: L6 needs a consumer"):
        resolve_cases(_gate(cases=("L6",)), CATALOG)
    with pytest.raises(GateFileError, match=r"XX1: not a catalog case"):
        resolve_cases(_gate(case_thresholds={"XX1": Thresholds()}), CATALOG)
    assert resolve_cases(_gate(cases=("ISR2", "PB1")), CATALOG) == ("ISR2", "PB1")


def test_cases_in_the_file_are_catalog_ids(tmp_path: Path) -> None:
    path = write(tmp_path, 'guarantee = "at_least_once"\ncases = ["pb1", "PB1"]\n[producer]\n')
    assert f"{path}:2: cases: expected distinct catalog ids" in problems(path)


def test_secrets_are_masked() -> None:
    for key in ("sasl.password", "ssl.key.password", "sasl.oauthbearer.client.secret", "sasl.jaas.config"):
        assert is_secret(key)
        assert Setting(key, "hunter2", Origin("f")).shown == f"{key}=***"
    assert not is_secret("acks")


def test_key_lines_find_dotted_quoted_and_table_keys() -> None:
    text = dedent(
        """
        top = 1
        [producer.settings]
        enable.idempotence = true
        "max.in.flight" = 5
        'linger.ms' = 1
        [ "topic" ]
        inline = { a = 1 }
        """
    )
    lines = key_lines(text)
    assert lines[("top",)] == 2
    assert lines[("producer", "settings")] == 3
    assert lines[("producer", "settings", "enable", "idempotence")] == 4
    assert lines[("producer", "settings", "max.in.flight")] == 5
    assert lines[("producer", "settings", "linger.ms")] == 6
    assert lines[("topic", "inline")] == 8


def test_the_topics_log_policy_is_read_with_its_lines(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        guarantee = "at_least_once"
        [producer]
        [topic]
        "cleanup.policy" = "delete, compact"
        "retention.ms" = 3000
        "retention.bytes" = -1
        "segment.bytes" = 1048576
        "segment.ms" = 1000
        "max.message.bytes" = 2097152
        "min.compaction.lag.ms" = 0
        "delete.retention.ms" = 60000
        """,
    )
    gate = load_gate(path)
    assert gate.topic_setting("cleanup.policy").value == "compact,delete"  # one spelling, sorted
    assert str(gate.topic_setting("retention.ms").origin) == f"{path}:5"
    assert gate.topic_given("segment.ms")
    assert gate.topic_setting("max.message.bytes").value == "2097152"
    assert (
        load_gate(
            write(
                tmp_path, 'guarantee = "at_least_once"\n[producer]\n[topic]\n"cleanup.policy" = ["compact"]\n'
            )
        )
        .topic_setting("cleanup.policy")
        .value
        == "compact"
    )


def test_a_bad_log_policy_says_what_kafka_takes(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        guarantee = "at_least_once"
        [producer]
        [topic]
        "cleanup.policy" = "compacted"
        "retention.ms" = -2
        "segment.bytes" = 1024
        "max.message.bytes" = "1MB"
        "delete.retention.ms" = 1.5
        "retention.msec" = 10
        """,
    )
    text = problems(path)
    assert (
        f'{path}:4: topic.cleanup.policy: expected "delete" (retention removes old segments), "compact"'
        in text
    )
    assert f"{path}:5: topic.retention.ms: expected milliseconds >= 0, or -1 (keep forever); got -2" in text
    assert f"{path}:6: topic.segment.bytes: expected bytes, 1048576..2147483647 (Kafka 4 refuses" in text
    assert f"{path}:7: topic.max.message.bytes: expected bytes of one record batch" in text
    assert f"{path}:8: topic.delete.retention.ms: expected milliseconds >= 0; got 1.5" in text
    assert f"{path}:9: topic.retention.msec: unknown key; did you mean 'retention.ms'?" in text


def test_the_traffic_table(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        guarantee = "at_least_once"
        [producer]
        [traffic]
        sizes = [[200, 0.9], [20000, 0.1]]
        keys = 12
        key_skew = "zipf"
        tombstones = 0.05
        headers = { source = "billing" }
        rate = 40
        burst = [2, 1]
        """,
    )
    gate = load_gate(path)
    traffic = gate.traffic
    assert traffic is not None
    assert traffic.max_size == 20000
    assert (traffic.traffic.keys, traffic.traffic.key_skew, traffic.traffic.tombstones) == (12, "zipf", 0.05)
    assert traffic.traffic.headers == (("source", "billing"),)
    assert (traffic.rate, traffic.burst) == (40.0, (2.0, 1.0))
    run = traffic.for_run()
    assert run.steps == ((40.0, 2.0), (0.0, 1.0))  # on at the team's rate, then silence
    assert str(traffic.setting("sizes").origin) == f"{path}:4"  # type: ignore[union-attr]
    assert traffic.describe() == (
        "values of 200..20000 bytes, 12 keys (zipf), 5% tombstones, headers source; 40 msg/s, bursts of 2 s "
        "every 3 s"
    )
    steady = load_gate(write(tmp_path, 'guarantee = "at_least_once"\n[producer]\n[traffic]\nrate = 10\n'))
    assert steady.traffic is not None
    assert steady.traffic.for_run().steps == ((10.0, 3600.0),)
    burst = load_gate(write(tmp_path, 'guarantee = "at_least_once"\n[producer]\n[traffic]\nburst = [1, 2]\n'))
    assert burst.traffic is not None
    assert burst.traffic.for_run().burst == (1.0, 2.0)  # at each case's own rate
    keyless = load_gate(
        write(tmp_path, 'guarantee = "at_least_once"\n[producer]\n[traffic]\nkeyless = true\n')
    )
    assert keyless.traffic is not None
    assert keyless.traffic.keyless


def test_a_bad_traffic_table_says_how_to_fix_it(tmp_path: Path) -> None:
    def one(body: str) -> str:
        return problems(write(tmp_path, f'guarantee = "at_least_once"\n[producer]\n[traffic]\n{body}\n'))

    assert "traffic.size: expected a value size in bytes" in one("size = 0")
    assert "set size (one fixed size) or sizes (a distribution), not both" in one("size = 10\nsizes = [1, 5]")
    assert "give keys = N (the key space) or keyless = true, not both" in one("keys = 4\nkeyless = true")
    assert "traffic.tombstones: a tombstone deletes a key, and these records are keyless" in one(
        "keyless = true\ntombstones = 0.1"
    )
    assert "traffic.rate: expected messages/s per producer, > 0" in one("rate = -5")
    assert "traffic.burst: expected [on_s, off_s], both seconds > 0" in one("burst = [1]")
    assert "traffic.sise: unknown key; did you mean 'size'?" in one("sise = 100")


def test_keyless_records_on_a_compacted_topic_are_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        guarantee = "at_least_once"
        [producer]
        [topic]
        "cleanup.policy" = "compact"
        [traffic]
        keyless = true
        """,
    )
    text = problems(path)
    assert f"{path}:6: traffic.keyless: a compacted topic (cleanup.policy=compact, {path}:4) refuses" in text
    assert "give the records keys (keys = N), or drop compact from cleanup.policy" in text


def test_the_log_policy_and_traffic_examples_load() -> None:
    compacted = load_gate(EXAMPLES / "gate-compacted.toml")
    assert compacted.topic_setting("cleanup.policy").value == "compact"
    assert compacted.traffic is not None
    assert compacted.traffic.traffic.tombstones == 0.05
    short = load_gate(EXAMPLES / "gate-short-retention.toml")
    assert short.topic_setting("retention.ms").value == "3000"
    assert short.cases == ("L6",)
    fixed = load_gate(EXAMPLES / "gate-realistic-fixed.toml")
    assert fixed.consumer is not None
    assert fixed.consumer.commit.value == "after_processing"
