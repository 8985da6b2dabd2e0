"""The gate's lint: librdkafka's own validation of every key, and one test per rule of the table."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import pytest

from chaos.audit.verdict import FATAL
from chaos.gate.cases import CONSUMER_OUTAGE, DEFAULT_CASES
from chaos.gate.gatefile import (
    ClientSettings,
    ConsumerSide,
    GateFile,
    GateFileError,
    GateTraffic,
    Origin,
    Setting,
)
from chaos.gate.lint import REFUSALS, RULES, Refusal, check_clients, derive, lint_gate
from chaos.workload import Traffic

WHERE = Origin("test.toml", 7)
STRONG_PRODUCER: Mapping[str, Any] = {"enable.idempotence": True}
MANUAL: Mapping[str, Any] = {"enable.auto.commit": False}


def gate(
    producer: Mapping[str, Any] = STRONG_PRODUCER,
    consumer: Mapping[str, Any] | None = MANUAL,
    commit: str = "after_processing",
    transform: bool = False,
    topic: Mapping[str, Any] | None = None,
    guarantee: str = "at_least_once",
    traffic: GateTraffic | None = None,
    cases: tuple[str, ...] | None = None,
) -> GateFile:
    """A gate in code; by default the strong configuration (idempotent, commit after processing, RF 3 /
    min.insync.replicas 2, unclean off)."""
    topic_values = {"replication_factor": 3, "min.insync.replicas": 2, **(topic or {})}
    side = None
    if consumer is not None:
        side = ConsumerSide(
            ClientSettings.from_mapping("consumer", consumer, WHERE),
            Setting("commit", commit, WHERE),
            Setting("transform", "true" if transform else "false", WHERE),
        )
    return GateFile(
        guarantee=guarantee,  # type: ignore[arg-type]
        producer=ClientSettings.from_mapping("producer", producer, WHERE),
        consumer=side,
        topic=tuple(
            Setting(k, str(v).lower() if isinstance(v, bool) else str(v), WHERE)
            for k, v in topic_values.items()
        ),
        traffic=traffic,
        cases=cases,
    )


def sized(size: int) -> GateTraffic:
    return GateTraffic(Traffic(size=size), settings=(Setting("traffic.size", str(size), WHERE),))


def fired(g: GateFile) -> set[str]:
    return {f.rule.id for f in derive(g).findings}


TRANSACTIONAL = {"transactional.id": "orders-transform"}
RULE_CASES: dict[str, tuple[GateFile, GateFile]] = {
    # rule id: (a configuration that triggers it, the same configuration fixed as the rule says)
    "acks_0": (gate({"acks": 0, "retries": 0}), gate({"acks": "all", "retries": 0})),
    "acks_1": (gate({"acks": 1, "retries": 0}), gate({"acks": "all", "retries": 0})),
    "unclean_election": (
        gate(topic={"unclean.leader.election.enable": True}),
        gate(topic={"unclean.leader.election.enable": False}),
    ),
    "retries_duplicate": (
        gate({"enable.idempotence": False, "retries": 3}),
        gate({"enable.idempotence": True}),
    ),
    "retries_reorder": (
        gate({"enable.idempotence": False, "max.in.flight.requests.per.connection": 1}),
        gate({"enable.idempotence": True, "max.in.flight.requests.per.connection": 5}),
    ),
    "commit_before_processing": (
        gate(consumer={}, commit="auto"),
        gate(consumer={"enable.auto.offset.store": False}, commit="after_processing"),
    ),
    "commit_outside_transaction": (
        gate(guarantee="exactly_once"),
        gate(TRANSACTIONAL, commit="transaction", transform=True, guarantee="exactly_once"),
    ),
    "transform_without_transaction": (
        gate(transform=True, guarantee="idempotent"),
        gate(TRANSACTIONAL, commit="transaction", transform=True, guarantee="idempotent"),
    ),
    "read_uncommitted": (
        gate(TRANSACTIONAL, {**MANUAL, "isolation.level": "read_uncommitted"}, "transaction", True),
        gate(TRANSACTIONAL, {**MANUAL, "isolation.level": "read_committed"}, "transaction", True),
    ),
    "no_spare_replica": (
        gate(topic={"replication_factor": 2, "min.insync.replicas": 2}),
        gate(topic={"replication_factor": 3, "min.insync.replicas": 2}),
    ),
    "single_copy": (gate(topic={"min.insync.replicas": 1}), gate(topic={"min.insync.replicas": 2})),
    # L6's group is away ~10 s (its member killed, its successor assigned after the session): 3 s of
    # retention expires what it had not read; a day does not
    "retention_shorter_than_outage": (
        gate(topic={"retention.ms": 3000}, cases=("L6",)),
        gate(topic={"retention.ms": 86_400_000}, cases=("L6",)),
    ),
    "compaction_latest_value_only": (
        gate(topic={"cleanup.policy": "compact"}),
        gate(topic={"cleanup.policy": "delete"}),
    ),
    "record_too_large": (
        gate(topic={"max.message.bytes": 100_000}, traffic=sized(200_000)),
        gate(topic={"max.message.bytes": 1_048_588}, traffic=sized(200_000)),
    ),
    "request_size_mismatch": (
        gate({**STRONG_PRODUCER, "message.max.bytes": 2_000_000}),
        gate({**STRONG_PRODUCER, "message.max.bytes": 1_000_000}),
    ),
}


def test_every_rule_has_a_test() -> None:
    assert set(RULE_CASES) == {r.id for r in RULES}
    assert len({r.id for r in RULES}) == len(RULES)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_rule(rule: Any) -> None:
    broken, fixed = RULE_CASES[rule.id]
    assert rule.id in fired(broken)
    assert rule.id not in fired(fixed), f"{rule.id}: its fix ({rule.fix}) does not clear it"
    result = derive(broken)
    finding = next(f for f in result.findings if f.rule.id == rule.id)
    assert [s.key for s in finding.settings] == list(rule.keys)
    # the guarantees it breaks are exactly those whose policy forbids one of its anomalies
    assert set(rule.breaks) == {g for g, fatal in FATAL.items() if fatal & set(rule.anomalies)}
    if broken.guarantee in rule.breaks:
        assert not result.kept
        assert finding in result.violations
    assert fixed.guarantee in derive(fixed).kept_guarantees


def test_acks_1_and_unclean_election_need_a_second_replica() -> None:
    single = {"replication_factor": 1, "min.insync.replicas": 1, "unclean.leader.election.enable": True}
    found = fired(gate({"acks": 1, "retries": 0}, topic=single))
    assert "acks_1" not in found
    assert "unclean_election" not in found
    assert {"no_spare_replica", "single_copy"} <= found


def test_a_transactional_id_implies_idempotence() -> None:
    assert "retries_duplicate" not in fired(gate({**TRANSACTIONAL, "retries": 5}))


def test_before_processing_commits_lose_even_without_auto_commit() -> None:
    assert "commit_before_processing" in fired(gate(commit="before_processing"))


def test_a_producer_only_gate_skips_the_consumer_rules() -> None:
    found = fired(gate(consumer=None))
    assert found == {"commit_outside_transaction"}  # no transaction: exactly_once cannot be kept
    assert derive(gate(consumer=None)).strongest == "idempotent"


@pytest.mark.parametrize(
    ("g", "strongest"),
    [
        (gate(), "idempotent"),
        (gate({}, consumer=None), None),  # librdkafka's defaults: no idempotence, 2147483647 retries
        (gate({"acks": 0, "retries": 0}, consumer=None), "at_most_once"),
        (gate({"enable.idempotence": False, "retries": 3}), None),
        (gate(TRANSACTIONAL, commit="transaction", transform=True), "exactly_once"),
        (gate(consumer={}, commit="auto"), "at_most_once"),
    ],
)
def test_the_strongest_guarantee_kept(g: GateFile, strongest: str | None) -> None:
    assert derive(g).strongest == strongest


def test_the_result_lists_violations_of_the_claim_and_other_findings() -> None:
    result = derive(gate({"acks": 1, "retries": 0}, topic={"min.insync.replicas": 1}))
    assert not result.kept
    assert [f.rule.id for f in result.violations] == ["acks_1"]
    assert "commit_outside_transaction" in [f.rule.id for f in result.others]
    data = result.to_dict()
    assert data["kept"] is False
    assert data["violations"][0]["rule"] == "acks_1"
    assert data["violations"][0]["settings"] == [{"key": "acks", "value": "1", "origin": "test.toml:7"}]


def test_defaults_are_librdkafkas_and_say_so() -> None:
    result = derive(gate({}, consumer={}, commit="auto"))
    reorder = next(f for f in result.findings if f.rule.id == "retries_reorder")
    assert {s.key: (s.value, s.origin.source) for s in reorder.settings} == {
        "enable.idempotence": ("false", "librdkafka default"),
        "retries": ("2147483647", "librdkafka default"),
        "max.in.flight.requests.per.connection": ("1000000", "librdkafka default"),
    }


def test_acks_other_than_0_1_all_is_bad_input() -> None:
    with pytest.raises(GateFileError, match=r"test.toml:7: acks=2: Kafka brokers accept acks 0, 1 or all"):
        derive(gate({"acks": 2}))


def test_derive_builds_no_client(monkeypatch: pytest.MonkeyPatch) -> None:
    import chaos.workload.clientconf as module

    def refuse(*_: object) -> None:
        raise AssertionError("derive must not build a client")

    monkeypatch.setattr(module, "construct", refuse)
    assert derive(gate()).kept


# --- librdkafka's validation -------------------------------------------------------------------------------


def test_librdkafka_accepts_the_strong_configuration() -> None:
    check, result = lint_gate(gate({"enable.idempotence": True, "acks": "all", "linger.ms": 5}))
    assert check.problems == ()
    assert result.kept
    assert check.librdkafka.count(".") == 2


def test_an_unknown_key_is_named_with_its_origin_and_a_suggestion() -> None:
    check = check_clients(gate({"acsk": "all", "linger.ms": 5}))
    assert len(check.problems) == 1
    text = str(check.problems[0])
    assert 'producer acsk (test.toml:7): No such configuration property: "acsk"' in text
    assert "did you mean 'acks'?" in text


def test_an_invalid_value_names_the_users_key_not_librdkafkas_alias() -> None:
    check = check_clients(gate({"acks": "bogus"}, {"isolation.level": "read_uncommited", **MANUAL}))
    texts = [str(p) for p in check.problems]
    assert any(t.startswith("producer acks (test.toml:7): Invalid value") for t in texts), texts
    assert any(
        t.startswith('consumer isolation.level (test.toml:7): Invalid value "read_uncommited"') for t in texts
    )


def test_every_bad_key_is_reported_and_a_refused_combination_too() -> None:
    producer = {"acsk": 1, "linger.ms": "soon", "enable.idempotence": True, "max.in.flight": 6}
    problems = check_clients(gate(producer)).problems
    assert [tuple(s.key for s in p.settings) for p in problems] == [
        ("acsk",),
        ("linger.ms",),
        ("enable.idempotence", "max.in.flight"),
    ]


REFUSAL_SETTINGS: dict[str, Mapping[str, Any]] = {
    "max.in.flight": {"enable.idempotence": True, "max.in.flight.requests.per.connection": 6},
    "acks": {"enable.idempotence": True, "acks": 1},
    "retries": {"enable.idempotence": True, "retries": 0},
    "transactional.id": {"transactional.id": "t", "enable.idempotence": False},
    "message.timeout.ms": {
        "transactional.id": "t",
        "message.timeout.ms": 90000,
        "transaction.timeout.ms": 60000,
    },
    "max.poll.interval.ms": {**MANUAL, "max.poll.interval.ms": 6000},  # below the default session (45 s)
}


def _first_name(refusal: Refusal) -> str:
    return refusal.fragment.split("`")[1]


@pytest.mark.parametrize("refusal", REFUSALS, ids=_first_name)
def test_each_refusal_is_librdkafkas_own_and_names_its_keys(refusal: Refusal) -> None:
    settings = REFUSAL_SETTINGS[_first_name(refusal)]
    g = gate(settings) if refusal.side == "producer" else gate(STRONG_PRODUCER, settings)
    (problem,) = check_clients(g).problems
    assert refusal.fragment in problem.message
    assert {s.key for s in problem.settings} == set(refusal.keys) & set(settings)
    assert refusal.fix in problem.fix


def test_a_key_of_the_other_side_would_be_ignored_so_it_is_refused() -> None:
    check = check_clients(
        gate({"enable.idempotence": True, "enable.auto.commit": False}, {**MANUAL, "acks": "all"})
    )
    texts = sorted(str(p) for p in check.problems)
    assert texts[0].startswith(
        "consumer acks (test.toml:7): Configuration property request.required.acks is a"
    )
    assert texts[0].endswith("move it to [producer.settings], or remove it")
    assert texts[1].startswith("producer enable.auto.commit (test.toml:7): Configuration property")
    assert texts[1].endswith("move it to [consumer.settings], or remove it")
    with pytest.raises(GateFileError, match="move it to"):
        lint_gate(gate({"enable.idempotence": True, "group.id": "g"}))


def test_ignored_keys_are_notes() -> None:
    producer = ClientSettings(
        "producer",
        (Setting("acks", "all", WHERE),),
        (Setting("bootstrap.servers", "prod:9092", WHERE),),
    )
    g = GateFile(guarantee="at_least_once", producer=producer)
    assert check_clients(g).notes == (
        "bootstrap.servers=prod:9092 (test.toml:7) ignored: the gate runs the client against its own cluster",
    )


def test_the_check_is_fast() -> None:
    """The issue allows 10 s for a refused typo. Measured here with a misspelled key among 12 producer and 6
    consumer settings (a refusal makes the check build one client per key to find every bad one)."""
    producer = {
        "acsk": "all",
        "client.id": "orders",
        "linger.ms": 5,
        "batch.num.messages": 1000,
        "retry.backoff.ms": 100,
        "socket.timeout.ms": 1000,
        "compression.type": "lz4",
        "message.timeout.ms": 30000,
        "request.timeout.ms": 10000,
        "enable.idempotence": True,
        "max.in.flight.requests.per.connection": 5,
        "statistics.interval.ms": 0,
    }
    consumer = {
        **MANUAL,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 1000,
        "max.poll.interval.ms": 60000,
        "fetch.wait.max.ms": 100,
        "auto.offset.reset": "earliest",
    }
    started = time.monotonic()
    check = check_clients(gate(producer, consumer))
    elapsed = time.monotonic() - started
    assert [s.key for p in check.problems for s in p.settings] == ["acsk"]
    assert elapsed < 5.0, f"the librdkafka check took {elapsed:.2f} s (it contacts no broker)"


# --- the log policy and the traffic -------------------------------------------------------------------------


def test_retention_is_judged_against_the_outage_of_the_cases_the_gate_runs() -> None:
    """The default set's longest outage is ISR2's (15 s): retention below it expires records in ISR2 and in
    every default case whose outage is longer than the retention, named longest first."""
    longest = max(CONSUMER_OUTAGE[c].seconds for c in DEFAULT_CASES)
    finding = next(
        f
        for f in derive(gate(topic={"retention.ms": 9000})).violations
        if f.rule.id == "retention_shorter_than_outage"
    )
    assert finding.rule.cases == ("ISR2", "MPI1")  # 15 s and 12 s; L2's 8 s is inside 9 s
    assert finding.rule.breaks == ("at_least_once", "idempotent", "exactly_once")
    assert [s.key for s in finding.settings] == ["retention.ms", "cleanup.policy"]
    assert "retention_shorter_than_outage" not in fired(gate(topic={"retention.ms": int(longest * 1000)}))
    # retention by size only, forever, or a compacted topic: no time retention to outrun
    assert "retention_shorter_than_outage" not in fired(gate(topic={"retention.ms": -1}))
    assert "retention_shorter_than_outage" not in fired(
        gate(topic={"retention.ms": 1000, "cleanup.policy": "compact"})
    )
    both = fired(gate(topic={"retention.ms": 1000, "cleanup.policy": "compact,delete"}))
    assert {"retention_shorter_than_outage", "compaction_latest_value_only"} <= both
    # at most once accepts the loss: found, not a violation
    result = derive(gate(topic={"retention.ms": 1000}, guarantee="at_most_once"))
    assert result.kept
    assert "retention_shorter_than_outage" in {f.rule.id for f in result.others}


def test_every_catalog_case_has_a_consumer_outage() -> None:
    from chaos.scenario import discover

    catalog = {s.case_id for s in discover()}
    assert set(CONSUMER_OUTAGE) == catalog
    assert all(o.why.strip() and o.seconds >= 0 for o in CONSUMER_OUTAGE.values())


def test_compaction_is_reported_with_what_it_promises_and_breaks_nothing() -> None:
    result = derive(gate(topic={"cleanup.policy": "compact"}))
    assert result.kept
    (finding,) = [f for f in result.others if f.rule.id == "compaction_latest_value_only"]
    assert finding.rule.breaks == ()
    assert "latest value of each key" in finding.rule.why
    assert finding.rule.cases == ("ISR2",)  # the default case whose group falls furthest behind
    assert "compaction_latest_value_only" not in fired(
        gate(topic={"cleanup.policy": "compact"}, guarantee="at_most_once")
    )


def test_record_sizes_count_the_batch_overhead_and_both_limits() -> None:
    assert "record_too_large" in fired(gate(topic={"max.message.bytes": 1000}, traffic=sized(950)))
    assert "record_too_large" not in fired(gate(topic={"max.message.bytes": 1100}, traffic=sized(950)))
    # librdkafka's own message.max.bytes (1000000) refuses before the broker's 1048588 would
    assert "record_too_large" in fired(gate(traffic=sized(1_000_000)))
    assert "record_too_large" not in fired(gate())  # bare value ids: no size to judge


def test_a_batch_size_above_the_topics_limit_is_a_mismatch() -> None:
    found = derive(gate({**STRONG_PRODUCER, "batch.size": 500_000}, topic={"max.message.bytes": 200_000}))
    (finding,) = [f for f in found.others if f.rule.id == "request_size_mismatch"]
    assert {s.key: s.value for s in finding.settings} == {
        "message.max.bytes": "1000000",
        "batch.size": "500000",
        "max.message.bytes": "200000",
    }


def test_a_java_only_size_key_names_librdkafkas_equivalent() -> None:
    (problem,) = check_clients(gate({**STRONG_PRODUCER, "max.request.size": 2_000_000})).problems
    assert "librdkafka's message.max.bytes does that work: write message.max.bytes instead" in problem.fix
