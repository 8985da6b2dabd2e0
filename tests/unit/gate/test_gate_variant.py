"""The team's configuration as the variant under test (chaos.gate.driver.variant.gate_variant), built on the
real catalog from the example gate files: the timeline a case's body branches on, the team's settings over
the case's timing settings, what is never handed to the run's clients, and the case sets a gate runs."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from chaos.gate.cases import DEFAULT_CASES, gate_cases
from chaos.gate.driver.variant import (
    commit_strategy,
    config_notes,
    gate_scenario,
    gate_variant,
    not_passed,
    timeline_of,
)
from chaos.gate.gatefile import GateFile, GateFileError, load_gate
from chaos.scenario import Scenario, discover
from chaos.scenario.describe import variant_client

ROOT: Final = Path(__file__).resolve().parents[3]
STRONG: Final = ROOT / "examples" / "gate-strong.toml"
WEAK: Final = ROOT / "examples" / "gate-weak.toml"


@pytest.fixture(scope="module")
def catalog() -> dict[str, Scenario]:
    return {s.case_id: s for s in discover()}


def gate_file(tmp_path: Path, text: str) -> GateFile:
    path = tmp_path / "gate.toml"
    path.write_text(text, encoding="utf-8")
    return load_gate(path)


def test_every_catalog_case_takes_the_strong_configuration_on_its_remediated_timeline(
    catalog: dict[str, Scenario],
) -> None:
    gate = load_gate(STRONG)
    for case, scenario in catalog.items():
        variant = gate_variant(scenario, gate)
        timeline = "vulnerable" if case == "O6" else "remediated"  # O6's transactional one needs a txn id
        assert variant.name == timeline_of(scenario, gate) == timeline, case
        assert (variant.guarantee, variant.expected_verdict, variant.client_profile) == (
            "idempotent",
            "pass",
            "gate",
        )
        producer = dict(variant.producer_config or {})
        assert producer["acks"] == "all"
        assert producer["enable.idempotence"] == "true"
        assert producer["max.in.flight.requests.per.connection"] == "5"
        assert producer["linger.ms"] == "5"  # the team's, over D1's and O1's own linger.ms
        own = dict(scenario.variant(timeline).producer_config or {})
        for key in set(producer) - {k for k in gate.producer.as_dict()}:
            assert key.endswith(".ms"), (case, key)  # only the case's timing settings stay
            assert producer[key] == own[key]
        assert "retries" not in producer, case  # D1's retries=3 is not the team's: librdkafka's default
        assert variant.topic_config == {"min.insync.replicas": 2, "unclean.leader.election.enable": False}
        assert variant_client(variant).guarantee == "idempotent"  # a profile the workload accepts
        run_scenario = gate_scenario(scenario, variant)
        assert run_scenario.variants == (variant,)
        assert run_scenario.nodeid() == scenario.nodeid()


def test_the_case_keeps_its_timing_where_the_team_gives_none(catalog: dict[str, Scenario]) -> None:
    gate = load_gate(STRONG)
    d1 = dict(gate_variant(catalog["D1"], gate).producer_config or {})
    assert d1["socket.timeout.ms"] == 1000  # D1's lost ack needs it; the team sets no socket timeout
    assert d1["retry.backoff.ms"] == 100
    mpi1 = dict(gate_variant(catalog["MPI1"], gate).consumer_config or {})
    assert mpi1 == {
        "enable.auto.commit": "false",
        "heartbeat.interval.ms": 1000,  # the case's
        "max.poll.interval.ms": "60000",  # the team's, over the case's 6000
        "session.timeout.ms": "6000",
    }


def test_a_team_session_longer_than_the_cases_poll_interval_raises_the_interval(
    catalog: dict[str, Scenario],
) -> None:
    """librdkafka refuses max.poll.interval.ms below session.timeout.ms: the team's 10-s session over MPI1's
    6-s interval made the case a harness error; the case's interval now follows the team's session."""
    gate = load_gate(ROOT / "examples" / "gate-realistic-fixed.toml")
    mpi1 = dict(gate_variant(catalog["MPI1"], gate).consumer_config or {})
    assert str(mpi1["session.timeout.ms"]) == "10000"  # the team's
    assert str(mpi1["max.poll.interval.ms"]) == "10000"  # the case's 6000, raised to it
    strong = dict(gate_variant(catalog["MPI1"], load_gate(STRONG)).consumer_config or {})
    assert strong["max.poll.interval.ms"] == "60000"  # a team's own interval is never touched


def test_the_weak_configuration_from_its_properties_file(catalog: dict[str, Scenario]) -> None:
    gate = load_gate(WEAK)
    variant = gate_variant(catalog["ISR2"], gate)
    producer = dict(variant.producer_config or {})
    assert producer["acks"] == "1"
    assert "bootstrap.servers" not in producer
    assert "enable.idempotence" not in producer  # librdkafka's default (false), as the lint judges it
    assert variant.topic_config == {"min.insync.replicas": 1, "unclean.leader.election.enable": True}
    assert (variant.guarantee, variant.client_guarantee) == ("at_least_once", "at_least_once")
    assert variant_client(variant).producer_settings["acks"] == "1"


def test_security_identity_and_secrets_never_reach_the_run(
    tmp_path: Path, catalog: dict[str, Scenario]
) -> None:
    gate = gate_file(
        tmp_path,
        """
        guarantee = "exactly_once"
        [producer.settings]
        "transactional.id" = "orders-tx"
        "client.id" = "orders"
        "security.protocol" = "SASL_SSL"
        "sasl.mechanisms" = "PLAIN"
        "sasl.username" = "svc"
        "sasl.password" = "hunter2"
        [consumer]
        commit = "transaction"
        transform = true
        [consumer.settings]
        "enable.auto.commit" = false
        "group.id" = "orders"
        "group.instance.id" = "orders-1"
        """,
    )
    variant = gate_variant(catalog["PB1"], gate)
    producer = dict(variant.producer_config or {})
    consumer = dict(variant.consumer_config or {})
    for key in ("transactional.id", "client.id", "security.protocol", "sasl.mechanisms", "sasl.password"):
        assert key not in producer
    assert producer["enable.idempotence"] == "true"  # implied by the transactional.id the run does not use
    assert set(consumer) == {"enable.auto.commit"}
    assert variant.client_guarantee == "idempotent"
    notes = config_notes(gate)
    assert any(n.startswith("producer transactional.id not passed") for n in notes)
    assert any(n.startswith("consumer group.instance.id not passed") for n in notes)
    assert "hunter2" not in " ".join(notes)
    assert not_passed("ssl.key.password")
    assert not_passed("sasl.oauthbearer.client.secret")
    assert not_passed("acks") is None
    # O6 replays the transactional timeline only with a transactional.id
    assert gate_variant(catalog["O6"], gate).name == "remediated"


def test_o6_without_a_transactional_id_replays_the_at_least_once_transform(
    tmp_path: Path, catalog: dict[str, Scenario]
) -> None:
    gate = gate_file(
        tmp_path,
        """
        guarantee = "idempotent"
        [producer.settings]
        "enable.idempotence" = true
        [consumer]
        commit = "after_processing"
        transform = true
        [consumer.settings]
        "enable.auto.commit" = false
        """,
    )
    assert gate_variant(catalog["O6"], gate).name == "vulnerable"


def test_the_default_case_set_and_a_chosen_one(tmp_path: Path, catalog: dict[str, Scenario]) -> None:
    known = tuple(catalog)
    assert set(DEFAULT_CASES) <= set(known)
    assert gate_cases(load_gate(STRONG), known) == ("PB1", "ISR2", "MPI1", "L2", "D1")
    producer_only = gate_file(tmp_path, 'guarantee = "idempotent"\n[producer.settings]\nacks = "all"\n')
    assert gate_cases(producer_only, known) == ("PB1", "ISR2", "L2", "D1")  # MPI1 needs a consumer
    chosen = gate_file(tmp_path, 'guarantee = "idempotent"\ncases = ["O1", "PB1"]\n[producer.settings]\n')
    assert gate_cases(chosen, known) == ("PB1", "O1")
    wrong = gate_file(tmp_path, 'guarantee = "idempotent"\ncases = ["L6"]\n[producer.settings]\n')
    with pytest.raises(GateFileError, match="L6 needs a consumer"):
        gate_cases(wrong, known)


# --- the team's topic and traffic ---------------------------------------------------------------------------


def test_the_log_policy_given_reaches_every_cases_run_topic(
    tmp_path: Path, catalog: dict[str, Scenario]
) -> None:
    gate = gate_file(
        tmp_path,
        """
        guarantee = "at_least_once"
        [producer.settings]
        "enable.idempotence" = true
        [topic]
        "min.insync.replicas" = 2
        "cleanup.policy" = "compact"
        "segment.ms" = 1000
        "max.message.bytes" = 2097152
        """,
    )
    for case in ("PB1", "L2", "O1"):
        variant = gate_variant(catalog[case], gate)
        assert variant.topic_config == {
            "min.insync.replicas": 2,
            "unclean.leader.election.enable": False,
            "cleanup.policy": "compact",
            "segment.ms": 1000,
            "max.message.bytes": 2097152,
        }, case  # what the file does not give stays the broker's (no retention.ms here)
        assert variant.topic_settings()["cleanup.policy"] == "compact"  # as create_topic takes it


class _Run:
    """What GateCase hands the traffic to: a run's workers (their default traffic) and its client library."""

    def __init__(self, client_library: str = "librdkafka") -> None:
        from chaos.scenario.workers import RunWorkers

        self.workers = RunWorkers(None, client_library)
        self.client_library = client_library


def test_the_traffic_is_the_runs_default_or_not_applicable(
    tmp_path: Path, catalog: dict[str, Scenario]
) -> None:
    from chaos.gate.driver.gatecase import GateCase
    from chaos.gate.driver.session import GateSession
    from chaos.gate.driver.variant import traffic_not_applicable

    path = tmp_path / "gate.toml"
    path.write_text(
        'guarantee = "idempotent"\n[producer.settings]\n"enable.idempotence" = true\n'
        "[traffic]\nsize = 500\nkeys = 4\nrate = 20\n",
        encoding="utf-8",
    )
    session = GateSession.load(path, tmp_path, junit=None, calibrate=False, allow_flaky=False)
    run = _Run()
    notes = GateCase(catalog["O1"], session)._traffic(run)  # type: ignore[arg-type]
    assert notes == ("traffic: values of 500 bytes, 4 keys (sequential); 20 msg/s",)
    assert run.workers.traffic == session.gate.traffic.for_run()  # type: ignore[union-attr]
    o6 = _Run()
    (note,) = GateCase(catalog["O6"], session)._traffic(o6)  # type: ignore[arg-type]
    assert note.startswith("traffic not applicable: the records it judges are its own transform's output")
    assert o6.workers.traffic is None
    java = _Run("java")
    (note,) = GateCase(catalog["L2"], session)._traffic(java)  # type: ignore[arg-type]
    assert (
        note == "traffic not applicable: the Java client's producer takes a key count only, no traffic shape"
    )
    assert traffic_not_applicable("D1") is None


def test_a_producer_takes_the_runs_traffic_unless_it_brings_its_own() -> None:
    from chaos.scenario.workers import UNSET, RunWorkers, producer_traffic
    from chaos.workload import Traffic

    workers = RunWorkers()
    assert workers.default_traffic(None, 50.0) is None  # no gate traffic: the records as they were
    workers.traffic = Traffic(size=300, keys=None, steps=((20.0, 3600.0),))
    assert workers.default_traffic(None, 50.0) == workers.traffic
    # a prefill (as fast as acks come) keeps its pace: the shape without the rate pattern
    prefill = workers.default_traffic(None, None)
    assert prefill is not None
    assert (prefill.size, prefill.keys, prefill.steps, prefill.burst) == (300, None, None, None)
    own = Traffic(keys=8)
    assert workers.default_traffic(own, 50.0) is own
    # keyless: the spec keeps its default key count, the records carry no key
    assert producer_traffic(UNSET, workers.default_traffic(None, 50.0))[0] == 16


def test_what_the_log_policy_removed_reads_as_sentences() -> None:
    from chaos.audit.facts import Removal
    from chaos.gate.driver.variant import removal_notes

    def removal(policy: str, expired: int, compacted: int, unread: int) -> Removal:
        return Removal("t", 0, policy, 3000, -1, 86_400_000, 120, None, expired, compacted, unread)

    assert removal_notes((removal("delete", 120, 0, 57),), "t") == (
        "expired 120, 57 of them unread by the group (retention.ms=3000, cleanup.policy=delete): removed by "
        "retention before the group read them: retention shorter than the group's outage",
    )
    (note,) = removal_notes((removal("compact", 0, 340, 0),), "t")
    assert note.startswith("compacted 340 (cleanup.policy=compact): values superseded by a later value")
    assert removal_notes((), "t") == ()


@pytest.mark.parametrize(
    ("consumer", "library", "expected"),
    [
        ('commit = "auto"', "librdkafka", "auto"),
        (
            'commit = "after_processing"\n[consumer.settings]\n"enable.auto.offset.store" = false',
            "librdkafka",
            "store_after",
        ),
        (
            'commit = "after_processing"\n[consumer.settings]\n"enable.auto.offset.store" = false',
            "java",
            "commit_after",
        ),
        (
            'commit = "after_processing"\n[consumer.settings]\n"enable.auto.commit" = false',
            "librdkafka",
            "commit_after",
        ),
        (
            'commit = "before_processing"\n[consumer.settings]\n"enable.auto.commit" = false',
            "librdkafka",
            "commit_before",
        ),
    ],
)
def test_the_members_commit_as_the_teams_application_does(
    tmp_path: Path, consumer: str, library: str, expected: str
) -> None:
    gate = gate_file(
        tmp_path, f'guarantee = "at_least_once"\n[producer.settings]\nacks = "all"\n[consumer]\n{consumer}\n'
    )
    assert commit_strategy(gate, library) == expected


def test_without_a_consumer_the_cases_keep_their_own_commit(tmp_path: Path) -> None:
    gate = gate_file(tmp_path, 'guarantee = "at_least_once"\n[producer.settings]\nacks = "all"\n')
    assert commit_strategy(gate) is None
